"""The shared server's lines socket: one MCP connection per socket connection.

A stdio relay (:mod:`smriti.server.shared.relay`) passes its client's stdin lines to this socket
unchanged and the server's lines back to its stdout: the session is the one the client would
have with an in-process ``smriti-mcp`` on stdio, served by the same code (the SDK's dual-era
loop: the ``initialize`` handshake or the 2026-07-28 per-request envelope, whichever the
client opens with; :func:`smriti.server.stdio.answering_lines`, one wire per connection, for
every line: :mod:`smriti.server.wire`). The relay
needs no MCP SDK, no HTTP and no session ids of its own, so it starts in milliseconds.

The connections run in the app's lifespan (the streamable-HTTP session manager's, which opened
the memory), so they share the one runtime with the HTTP sessions of the CLI.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from smriti.server.sdk import lifespan_state, lowlevel_server
from smriti.server.stdio import SocketWriter, answering_lines, socket_lines

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

logger = logging.getLogger("smriti.shared")


class LineSessions:
    """The connections on the lines socket; ``count`` is how many are open."""

    def __init__(self, server: MCPServer, sock: socket.socket, on_change: Callable[[int], None]) -> None:
        self.server = server
        self.sock = sock
        self.count = 0
        self.on_change = on_change  # told +1/-1: the idle timer counts a connection as activity

    async def serve(self) -> None:
        """Accept connections until cancelled (the app's lifespan ends)."""
        listener = await anyio.abc.SocketListener.from_socket(self.sock)
        async with anyio.create_task_group() as tasks:
            await listener.serve(self._one, task_group=tasks)

    async def _one(self, stream: anyio.abc.SocketStream) -> None:
        from mcp.server.runner import serve_dual_era_loop

        lowlevel = lowlevel_server(self.server)
        # The lifespan the session manager entered once for the app (the open memory): a
        # connection must not enter its own (that would open the store a second time).
        state = lifespan_state(self.server)
        async with stream:  # closed after the count falls: a relay that saw it close finds it fallen
            self.count += 1
            self.on_change(+1)
            try:
                async with answering_lines(socket_lines(stream), SocketWriter(stream)) as (read, write):
                    await serve_dual_era_loop(
                        lowlevel,
                        read,
                        write,
                        lifespan_state=state,
                        init_options=lowlevel.create_initialization_options(),
                    )
            except Exception as error:  # one connection's failure is not the server's
                logger.warning("a relay's connection ended: %s", error)
            finally:
                self.count -= 1
                self.on_change(-1)


def lines_lifespan(inner: Any, sessions: LineSessions) -> Any:
    """``inner`` (the app's lifespan), serving ``sessions`` while it is entered."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[Any]:
        async with inner(app) as state, anyio.create_task_group() as tasks:
            tasks.start_soon(sessions.serve)
            yield state
            tasks.cancel_scope.cancel()

    return lifespan
