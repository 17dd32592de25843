"""Bounds on idle HTTP connections, for ``--transport streamable-http`` and the shared server.

uvicorn closes a keep-alive connection ``timeout_keep_alive`` seconds after its last response,
but a connection that never sends a request is held open for good: 300 idle sockets opened
against the server stayed open. :class:`IdleClosingH11Protocol` starts the same timer when a
connection is made, so every idle connection, used or not, is closed after
``HTTP_KEEP_ALIVE_TIMEOUT`` seconds. A request in progress (an MCP event stream included) is
never idle: the timer runs only between requests. ``HTTP_MAX_CONNECTIONS`` is uvicorn's
``limit_concurrency``: past that many connections or requests at once, new requests are
answered 503 instead of piling up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import asyncio

    from smriti.config import Settings


class IdleClosingH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with the keep-alive timer also running before the first request."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )


def uvicorn_limits(settings: Settings) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments that bound idle and concurrent connections."""
    return {
        "http": IdleClosingH11Protocol,
        "timeout_keep_alive": settings.http_keep_alive_timeout,
        "limit_concurrency": settings.http_max_connections or None,
    }
