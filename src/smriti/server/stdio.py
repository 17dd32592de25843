"""The stdio transport, answering every line, even a malformed one, with ids echoed verbatim.

The SDK's stdio transport parses each line and, when parsing fails, hands the exception to
the session, which logs it and answers nothing; it also reads a request whose id is a float,
a boolean, an object or null as a notification, and answers that with nothing either. So this
module reads stdin and writes stdout itself, one :class:`~smriti.server.wire.Wire` per session:
the wire says what to do with each line (pass the message on, or answer it at once; see
:mod:`smriti.server.wire` for the rules) and writes each answer under the id the client sent.
The SDK's session sees only messages it can read.

The shared server reads each connection on its lines socket the same way (:func:`answering_lines`
over :func:`socket_lines`, :mod:`smriti.server.shared.lines`): a stdio client served in-process
and one whose relay passes its lines on get the same wire, the same answers.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import IO, TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse, jsonrpc_message_adapter
from pydantic import ValidationError

from smriti.server.wire import Line, LineSplitter, Wire

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.server.mcpserver import MCPServer

logger = logging.getLogger("smriti.server")

# Seconds the answers to requests still in flight get once stdin has ended. Long enough for
# `printf '...' | smriti-mcp` on a cold start (the shared server starts in ~1-3 s, a first
# recall loads caches); a client that closed stdin with nothing pending ends the process at once.
ANSWER_GRACE = 10.0


def read_message(wire: Wire, raw: bytes) -> tuple[SessionMessage | None, bytes | None]:
    """One line as a message for the SDK's session, or the line to answer it with.

    :meth:`Wire.read <smriti.server.wire.Wire.read>` checks the JSON-RPC envelope; the SDK's
    model reads it once more, and whatever it still refuses is answered too.
    """
    line: Line = wire.read(raw)
    if line.warning is not None:
        log = logger.warning if line.reply is not None or "surrogate" in line.warning else logger.info
        log("message from the client: %s", line.warning)
    if line.message is None:
        return None, line.reply
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_python(line.message, by_name=False)), None
    except ValidationError:
        logger.warning("message from the client refused by the MCP SDK's model")
        return None, wire.refuse(line.message, "not a JSON-RPC 2.0 message of MCP")


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


@contextlib.contextmanager
def _claimed_stdout() -> Iterator[IO[bytes]]:
    """Write the wire to a private copy of fd 1 while fd 1 itself goes to stderr, as the SDK
    does: a stray ``print`` of a library or a child process cannot break a message."""
    private = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(2, 1)
    out = os.fdopen(private, "wb", closefd=False)
    try:
        yield out
    finally:
        with contextlib.suppress(OSError):
            out.flush()
        os.dup2(private, 1)


class SocketWriter:
    """Writes a session's lines to a socket stream (the lines socket's connection).

    A peer gone mid-write (a relay killed) is not an error of the session: its reader ends it.
    """

    def __init__(self, stream: anyio.abc.ByteSendStream) -> None:
        self.stream = stream
        self.gone = False

    async def __call__(self, data: bytes) -> None:
        if self.gone:
            return
        try:
            await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.gone = True


async def socket_lines(stream: anyio.abc.ByteReceiveStream) -> AsyncIterator[bytes]:
    """The newline-terminated lines received on ``stream`` (an unfinished last one too)."""
    splitter = LineSplitter()
    while True:
        try:
            chunk = await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            break
        for line in splitter.feed(chunk):
            yield line
    if rest := splitter.rest():
        yield rest


@asynccontextmanager
async def answering_lines(
    lines: AsyncIterable[bytes], send: Callable[[bytes], Awaitable[None]]
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Messages read from ``lines`` and a stream whose messages ``send`` writes; unreadable
    lines are answered here. One :class:`~smriti.server.wire.Wire` per call: one session.

    When the lines end, the stream of messages ends once every request passed on has been
    answered, or after ``ANSWER_GRACE`` seconds: ``printf '...' | smriti-mcp`` gets its answers,
    and a client that went away does not keep the session. Leaving the context writes what
    was sent, then stops writing.
    """
    wire = Wire()
    readable_send, readable = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    # SessionMessages from the session, bytes: the wire's own answers
    answers, answers_out = anyio.create_memory_object_stream[SessionMessage | bytes](0)
    in_flight: set[Any] = set()  # ids of the requests passed on and not answered yet

    async def read_lines() -> None:
        async with readable_send:
            async for raw in lines:
                message, reply = read_message(wire, raw)
                if reply is not None:
                    await answers.send(reply)
                if message is None:
                    continue
                if isinstance(message.message, JSONRPCRequest):
                    in_flight.add(message.message.id)
                await readable_send.send(message)
            with anyio.move_on_after(ANSWER_GRACE):
                while in_flight:
                    await anyio.sleep(0.02)

    async def write_answers() -> None:
        async with answers_out:
            async for item in answers_out:
                if isinstance(item, bytes):
                    await send(item)
                    continue
                message = item.message
                await send(wire.write(message.model_dump(mode="json", by_alias=True, exclude_unset=True)))
                if isinstance(message, JSONRPCResponse | JSONRPCError):
                    in_flight.discard(message.id)

    async with anyio.create_task_group() as tasks:
        reading = anyio.CancelScope()

        async def read_until_stopped() -> None:
            with reading:
                await read_lines()

        tasks.start_soon(read_until_stopped)
        tasks.start_soon(write_answers)
        try:
            yield readable, cast("MemoryObjectSendStream[SessionMessage]", answers)
        finally:
            reading.cancel()  # its thread may be blocked on stdin
            answers.close()  # the writer writes what was sent, then stops
            tasks.cancel_scope.deadline = anyio.current_time() + 1.0  # unless the peer is stuck


@asynccontextmanager
async def answering_stdio() -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """:func:`answering_lines` on the process's stdin and stdout."""
    with _claimed_stdout() as stdout:

        def write(data: bytes) -> None:
            stdout.write(data)
            stdout.flush()

        async def send(data: bytes) -> None:
            await anyio.to_thread.run_sync(write, data)

        async with _claimed_stdin() as lines, answering_lines(_file_lines(lines), send) as streams:
            yield streams


async def _file_lines(lines: anyio.AsyncFile[bytes]) -> AsyncIterator[bytes]:
    async for raw in lines:
        yield raw


async def run_stdio(server: MCPServer) -> None:
    """``server.run_stdio_async()`` with malformed lines answered (see the module docstring)."""
    from smriti.server.sdk import lowlevel_server

    lowlevel = lowlevel_server(server)  # the call run_stdio_async makes, on our streams
    async with answering_stdio() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
