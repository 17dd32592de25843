"""The stdio transport, with a JSON-RPC error for every line that is not a message.

The SDK's stdio transport parses each line and, when parsing fails, hands the exception to
the session, which logs it and answers nothing: a client that sent invalid JSON, a batch
array (batches left the protocol in 2025-06-18) or a message nested too deep waits for its
own timeout. JSON-RPC 2.0 asks for a reply with ``"id": null``: -32700 (parse error) when
the line is not JSON, -32600 (invalid request) when it is JSON but not a message.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import INVALID_REQUEST, PARSE_ERROR, ErrorData, JSONRPCError
from pydantic import ValidationError

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.mcpserver import MCPServer

logger = logging.getLogger("smriti.server")


def error_reply(problem: Exception) -> SessionMessage:
    """The JSON-RPC error answering a line that could not be read as a message."""
    not_json = isinstance(problem, ValidationError) and any(
        error["type"] == "json_invalid" for error in problem.errors()
    )
    if not_json:
        error = ErrorData(code=PARSE_ERROR, message="Parse error: the line is not valid JSON")
    else:
        error = ErrorData(
            code=INVALID_REQUEST,
            message="Invalid request: not a JSON-RPC 2.0 message (batches are not supported)",
        )
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=error))


@asynccontextmanager
async def answering_stdio() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """The SDK's stdio streams, minus unreadable lines, which are answered here instead."""
    async with stdio_server() as (incoming, outgoing):
        readable_send, readable = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def sort_lines() -> None:
            async with readable_send:
                async for item in incoming:
                    if isinstance(item, Exception):
                        logger.warning("unreadable message on stdin: %s", str(item).splitlines()[0])
                        await outgoing.send(error_reply(item))
                    else:
                        await readable_send.send(item)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sort_lines)
            yield readable, outgoing
            tasks.cancel_scope.cancel()


async def run_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()`` with malformed lines answered (see the module docstring)."""
    # why the private attribute: MCPServer exposes no other way to run its low-level server on
    # streams of our own; it is the same call run_stdio_async makes (mcp 2.3).
    lowlevel = server._lowlevel_server
    async with answering_stdio() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
