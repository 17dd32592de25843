"""The stdio transport, answering every line that is a request, even a malformed one.

The SDK's stdio transport parses each line and, when parsing fails, hands the exception to
the session, which logs it and answers nothing: a client that sent invalid JSON, a batch
array (batches left the protocol in 2025-06-18), a lone UTF-16 surrogate escape (valid JSON,
refused by pydantic's parser) or a message nested too deep waits for its own timeout. So this
module reads stdin itself (the SDK still writes stdout) and reads each line as follows:

- bytes that are not UTF-8 become U+FFFD, as the SDK's reader does;
- a lone surrogate escape (``"\\udaee"``, typically an emoji cut in half) becomes U+FFFD too,
  so a memory with one is stored rather than refused;
- a line that is still not a message is answered as JSON-RPC 2.0 asks: -32700 (parse error)
  when it is not JSON, -32600 (invalid request) when it is JSON but not a message, with the
  request's ``id`` when the line is an object with a ``method`` and a usable id (a string or
  an integer), else with ``"id": null``;
- a blank line carries nothing and is skipped.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import re
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.mcpserver import MCPServer

logger = logging.getLogger("smriti.server")

# Seconds the answers to requests still in flight get once stdin has ended. Long enough for
# `printf '...' | smriti-mcp` on a cold start (the shared server starts in ~1-3 s, a first
# recall loads caches); a client that closed stdin with nothing pending ends the process at once.
ANSWER_GRACE = 10.0
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Unreadable(Exception):
    """A line that is no message; ``reply`` answers it."""

    def __init__(self, reply: JSONRPCError, why: str) -> None:
        super().__init__(why)
        self.reply = reply


def _error(code: int, message: str, message_id: str | int | None = None) -> _Unreadable:
    return _Unreadable(
        JSONRPCError(jsonrpc="2.0", id=message_id, error=ErrorData(code=code, message=message)), message
    )


def _replace_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone surrogate in its strings and keys made U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_surrogates(key): _replace_surrogates(item) for key, item in value.items()}
    return value


def _request_id(value: Any) -> str | int | None:
    """The id to answer an invalid ``value`` with: a request's own, when it has a usable one."""
    if not isinstance(value, dict) or "method" not in value:
        return None  # a client's malformed response or no message at all: no id of ours to answer
    key = value.get("id")
    return key if isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool)) else None


def read_message(raw: bytes) -> SessionMessage | None:
    """One stdin line as a message; None for a blank line.

    Raises:
        _Unreadable: the line is no message; its ``reply`` is the JSON-RPC error to send.
    """
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return None
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValidationError:
        pass  # read it again, more slowly, to repair it or to find the id to answer
    try:
        value = _replace_surrogates(json.loads(text))
    except (ValueError, RecursionError):
        raise _error(PARSE_ERROR, "Parse error: the line is not valid JSON") from None
    message_id = _request_id(value)
    try:
        message = jsonrpc_message_adapter.validate_json(json.dumps(value, ensure_ascii=False), by_name=False)
    except (ValidationError, RecursionError):
        detail = "not a JSON-RPC 2.0 message"
        if not isinstance(value, dict):
            detail += " (a message is one JSON object; batches are not supported)"
        raise _error(INVALID_REQUEST, f"Invalid request: {detail}", message_id) from None
    if _SURROGATE_ESCAPE.search(text):
        logger.warning("a message carried a lone UTF-16 surrogate: replaced with U+FFFD")
    return SessionMessage(message)


class _NoLines:
    """Stands in for the SDK's stdin (read here instead): no lines at all."""

    def __aiter__(self) -> _NoLines:
        return self

    async def __anext__(self) -> str:
        raise StopAsyncIteration


@asynccontextmanager
async def _claimed_stdin() -> AsyncIterator[anyio.AsyncFile[bytes]]:
    """Read the wire from a private copy of fd 0 while fd 0 itself reads the null device.

    As the SDK does for its own reader: a child process (git for backups, the shared server)
    must not read the client's messages. The copy is never closed: a worker thread may still
    block on it after the transport ends.
    """
    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        yield anyio.wrap_file(os.fdopen(private, "rb", closefd=False))
    finally:
        os.dup2(private, 0)


async def _after(head: bytes, lines: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """The lines of ``head`` (read from stdin before the transport began), then the file's;
    an unfinished last line of ``head`` is the start of the file's first."""
    *complete, partial = head.split(b"\n")
    for line in complete:
        yield line + b"\n"
    async for raw in lines:
        yield partial + raw
        partial = b""
    if partial:
        yield partial


@asynccontextmanager
async def answering_stdio(
    head: bytes = b"",
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Messages read from stdin and a stream to stdout; unreadable lines are answered here.

    ``head``: bytes already read from stdin (the relay reads the first line before it imports
    the SDK: :mod:`smriti.server.shared.handshake`), handled before what stdin still holds.

    When stdin ends, the stream of messages ends once every request passed on has been
    answered, or after ``ANSWER_GRACE`` seconds: ``printf '...' | smriti-mcp`` gets its answers,
    and a client that went away does not keep the process. Leaving the context writes what
    was sent and closes stdout's stream, so the SDK's writer ends with it.
    """
    async with (
        _claimed_stdin() as lines,
        stdio_server(stdin=cast("anyio.AsyncFile[str]", _NoLines())) as (_, stdout),
    ):
        messages_in, messages = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        answers, answers_out = anyio.create_memory_object_stream[SessionMessage](0)
        in_flight: set[Any] = set()  # ids of the requests passed on and not answered yet
        async with anyio.create_task_group() as tasks:
            reading = anyio.CancelScope()
            tasks.start_soon(_read_lines, reading, _after(head, lines), messages_in, answers, in_flight)
            tasks.start_soon(_write_answers, answers_out, stdout, in_flight)
            try:
                yield messages, answers
            finally:
                reading.cancel()  # its thread may be blocked on stdin
                answers.close()  # the writer writes what was sent, then stops
                tasks.cancel_scope.deadline = anyio.current_time() + 1.0  # unless stdout is stuck
        await stdout.aclose()


async def _read_lines(
    scope: anyio.CancelScope,
    lines: AsyncIterable[bytes],
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage],
    in_flight: set[Any],
) -> None:
    """Pass each line on as a message, or answer it when it is none; at the end of stdin, wait
    (at most ``ANSWER_GRACE``) for the requests in flight before ending ``messages``."""
    with scope, messages:
        async for raw in lines:
            try:
                message = read_message(raw)
            except _Unreadable as problem:
                logger.warning("unreadable message on stdin: %s", problem)
                await answers.send(SessionMessage(problem.reply))
                continue
            if message is None:
                continue
            if isinstance(message.message, JSONRPCRequest):
                in_flight.add(message.message.id)
            await messages.send(message)
        with anyio.move_on_after(ANSWER_GRACE):
            while in_flight:
                await anyio.sleep(0.02)


async def _write_answers(
    answers: MemoryObjectReceiveStream[SessionMessage],
    stdout: MemoryObjectSendStream[SessionMessage],
    in_flight: set[Any],
) -> None:
    """Write each answer to stdout and mark its request answered."""
    async with answers:
        async for item in answers:
            await stdout.send(item)
            if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                in_flight.discard(item.message.id)


async def run_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()`` with malformed lines answered (see the module docstring)."""
    from smriti.server.sdk import lowlevel_server

    lowlevel = lowlevel_server(server)  # the call run_stdio_async makes, on our streams
    async with answering_stdio() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
