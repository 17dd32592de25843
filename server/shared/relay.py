"""The stdio ``smriti-mcp`` as a relay to the user's shared server.

An MCP client (Claude Desktop, Cursor, Windsurf, ...) starts ``smriti-mcp`` on stdio. With
``SMRITI_SHARED`` on (the default) that process opens no database: it makes sure the user's
shared server runs (:func:`smriti.server.shared.client.ensure_server`) and passes JSON-RPC messages
both ways between the SDK's stdio transport and the SDK's streamable-HTTP client transport,
whose HTTP goes over the server's unix socket. The protocol stays the SDK's on both sides;
the relay only keeps what it needs to reconnect.

When the shared server goes away (killed, stopped, idle exit) the session is lost, not the
client: the next request starts a server again (``RestartingTransport``), the relay opens a new
session by replaying the client's ``initialize`` (its answer is not passed on) and sends the
request again. A request that never reached a server (its POST was refused or answered "no
such session") is sent again; one that a server was running when it died is answered with an
error, since it may or may not have been carried out.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types import (
    CONNECTION_CLOSED,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)

from smriti.errors import SmritiError
from smriti.server.shared.client import MCP_URL, SharedPaths, ensure_server, quiet_cancelled_socket_reads
from smriti.server.stdio import answering_stdio

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client._transport import ReadStream, WriteStream

    from smriti.config import Settings

logger = logging.getLogger("smriti.server.shared.relay")

_REPLAY_ID = "smriti-relay-initialize"
END_SESSION_WITHIN = 0.4  # seconds to close the session once stdin has ended and been answered
_MAX_BARREN_SESSIONS = 3  # sessions lost in a row before a message came back: give up on the unsent


class RestartingTransport(httpx2.AsyncHTTPTransport):
    """HTTP over the shared server's socket that starts a new server when none listens.

    Only a POST (a message from the client) starts one: the SDK's GET stream reconnects by
    itself, and a server stopped with ``smriti stop`` must stay stopped until someone asks.
    It also notes the JSON-RPC ids of POSTs no server ran: refused connections, and POSTs
    answered 404 within a session (its session is gone), so the relay may send them again in a
    new session.
    """

    def __init__(self, settings: Settings, paths: SharedPaths) -> None:
        # Idle connections are let go well before the server closes them (HTTP_KEEP_ALIVE_TIMEOUT),
        # so a request never goes out on a connection the server is closing.
        limits = httpx2.Limits(keepalive_expiry=settings.http_keep_alive_timeout / 2)
        super().__init__(uds=str(paths.socket), limits=limits)
        self.settings = settings
        self.unknown_session: set[Any] = set()
        self.attempted: set[Any] = set()  # ids of the messages this transport began to send

    def answered(self, message_id: Any) -> None:
        """The server answered ``message_id``: stop tracking it (a long session sends many)."""
        self.attempted.discard(message_id)
        self.unknown_session.discard(message_id)

    def never_ran(self, ids: Iterable[Any]) -> set[Any]:
        """Which of ``ids`` no server can have run: never sent, refused, or out of session."""
        return {key for key in ids if key not in self.attempted or key in self.unknown_session}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST":
            self.attempted.add(_message_id(request.content))
        try:
            response = await super().handle_async_request(request)
        except httpx2.ConnectError:
            if request.method != "POST":
                raise
            # Refused: no server got this message. Noted before the restart, which takes a while:
            # the session may be found lost meanwhile (its stream ends) and this request then
            # goes into the next session instead of being answered "may or may not have run".
            message_id = _message_id(request.content)
            if message_id is not None:
                self.unknown_session.add(message_id)
            logger.info("the shared Smriti server is gone: starting a new one")
            await anyio.to_thread.run_sync(ensure_server, self.settings)
            response = await super().handle_async_request(request)
            if response.status_code != 404:  # the new server took it after all (no session yet)
                self.unknown_session.discard(message_id)
        if response.status_code == 404 and request.method == "POST" and "mcp-session-id" in request.headers:
            message_id = _message_id(request.content)
            if message_id is not None:
                self.unknown_session.add(message_id)
        return response


def _message_id(body: bytes) -> Any:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


class Relay:
    """One stdio client's messages to and from the shared server, across reconnections."""

    def __init__(self, settings: Settings, stdout: MemoryObjectSendStream[SessionMessage]) -> None:
        self.settings = settings
        self.stdout = stdout
        self.initialize: JSONRPCRequest | None = None  # the client's, replayed on reconnection
        self.initialized = False  # a session was established once (reconnections replay)
        self.protocol_version: str | None = None
        self.pending: dict[Any, JSONRPCRequest] = {}  # requests sent, not yet answered
        self.unsent: list[SessionMessage] = []  # to send once connected
        self.transport: RestartingTransport | None = None
        self.barren = 0  # sessions lost in a row with no message from the server

    async def run(self, stdin: MemoryObjectReceiveStream[SessionMessage | Exception]) -> None:
        """Relay until the client closes stdin."""
        while True:
            if not self.unsent:  # connect lazily: a stopped server stays stopped until a message
                try:
                    item = await stdin.receive()
                except anyio.EndOfStream:
                    return
                if isinstance(item, SessionMessage):
                    self.unsent.append(item)
                continue
            try:
                paths = await anyio.to_thread.run_sync(ensure_server, self.settings)
            except SmritiError as error:
                logger.error("cannot reach the shared Smriti server: %s", error)
                requests = [m.message for m in self.unsent if isinstance(m.message, JSONRPCRequest)]
                await self._fail(requests, str(error))
                self.unsent.clear()
                continue
            if await self._connected(paths, stdin):
                return
            if self.barren >= _MAX_BARREN_SESSIONS:  # a server that starts but never answers
                requests = [m.message for m in self.unsent if isinstance(m.message, JSONRPCRequest)]
                await self._fail(requests, "the shared Smriti server does not answer (see its log)")
                self.unsent.clear()
                self.barren = 0

    # ------------------------------------------------------------------------- one session
    async def _connected(
        self, paths: SharedPaths, stdin: MemoryObjectReceiveStream[SessionMessage | Exception]
    ) -> bool:
        """Relay over one session; True when stdin ended, False when the session was lost."""
        self.transport = RestartingTransport(self.settings, paths)
        outcome = {"eof": False}
        try:
            with anyio.CancelScope() as session:
                async with (
                    httpx2.AsyncClient(
                        transport=self.transport, timeout=httpx2.Timeout(30.0, read=None)
                    ) as http,
                    streamable_http_client(MCP_URL, http_client=http) as (read, write),
                    anyio.create_task_group() as tasks,
                ):
                    if self.initialized:
                        await self._replay_initialize(read, write)
                    tasks.start_soon(self._down, read, tasks.cancel_scope)
                    while self.unsent:
                        await self._send(write, self.unsent.pop(0))
                    async for item in stdin:
                        if isinstance(item, SessionMessage):
                            await self._send(write, item)
                    outcome["eof"] = True  # and the last answers are written (answering_stdio)
                    # The client is gone: end the session (the SDK's DELETE on leaving), but
                    # never wait on the server more than END_SESSION_WITHIN for that.
                    session.deadline = anyio.current_time() + END_SESSION_WITHIN
                    tasks.cancel_scope.cancel()
        except Exception as error:  # the transport failed (inside exception groups): a lost session
            logger.warning("the session with the shared Smriti server ended: %s", _first_cause(error))
        if outcome["eof"]:
            return True
        self.barren += 1
        await self._session_lost()
        return False

    async def _send(self, write: WriteStream[SessionMessage], item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest):
            if message.method == "initialize":
                self.initialize = message
            self.pending[message.id] = message
        metadata = None
        if self.protocol_version is not None:
            metadata = ClientMessageMetadata(headers={MCP_PROTOCOL_VERSION_HEADER: self.protocol_version})
        await write.send(SessionMessage(message, metadata=metadata))

    async def _down(self, read: ReadStream[SessionMessage | Exception], scope: anyio.CancelScope) -> None:
        """Server to client: pass every message on; cancel ``scope`` when the session is lost."""
        async for item in read:
            if isinstance(item, Exception):
                logger.warning("unreadable message from the shared server: %s", item)
                continue
            self.barren = 0
            message = item.message
            if isinstance(message, JSONRPCResponse | JSONRPCError):
                lost = self.transport is not None and message.id in self.transport.unknown_session
                if lost and message.id in self.pending:  # never ran: send it again, in a new session
                    self.unsent.append(SessionMessage(self.pending.pop(message.id)))
                    scope.cancel()
                    return
                if self.transport is not None:
                    self.transport.answered(message.id)
                request = self.pending.pop(message.id, None)
                answered = request is not None and request.method == "initialize"
                if answered and isinstance(message, JSONRPCResponse):
                    self.initialized = True
                    self.protocol_version = message.result.get("protocolVersion")
            await self.stdout.send(item)
        scope.cancel()  # the transport closed its stream

    async def _replay_initialize(
        self, read: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage]
    ) -> None:
        assert self.initialize is not None
        replay = self.initialize.model_copy(update={"id": _REPLAY_ID})
        await write.send(SessionMessage(replay))
        async for item in read:
            message = getattr(item, "message", None)
            if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id == _REPLAY_ID:
                if isinstance(message, JSONRPCError):
                    raise RuntimeError(f"the shared server refused the session: {message.error.message}")
                break
        initialized = JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
        await write.send(SessionMessage(initialized))
        logger.info("reconnected to the shared Smriti server")

    async def _session_lost(self) -> None:
        """Answer what a dead server may have run; keep what it never got for the next session."""
        # A request the client sent just as the server died may never have left the relay.
        never_ran = (
            self.transport.never_ran(self.pending) if self.transport is not None else set(self.pending)
        )
        for key in [key for key in self.pending if key in never_ran]:
            self.unsent.append(SessionMessage(self.pending.pop(key)))
        resend = {getattr(item.message, "id", None) for item in self.unsent}
        uncertain = [request for key, request in self.pending.items() if key not in resend]
        self.pending.clear()
        await self._fail(
            uncertain,
            "the shared Smriti server stopped before answering; the request may or may not have been "
            "carried out (the next request starts the server again)",
        )

    async def _fail(self, requests: list[JSONRPCRequest], text: str) -> None:
        """Answer each of ``requests`` with a JSON-RPC error saying ``text``."""
        for request in requests:
            error = ErrorData(code=CONNECTION_CLOSED, message=text)
            await self.stdout.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=request.id, error=error)))


def _first_cause(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


async def run_relay(settings: Settings) -> None:
    """Serve the stdio client through the shared server until stdin closes."""
    quiet_cancelled_socket_reads()
    async with answering_stdio() as (stdin, stdout):
        await Relay(settings, stdout).run(stdin)


def serve_relay(settings: Settings) -> None:
    """``smriti-mcp`` on stdio with SMRITI_SHARED on: relay until the client closes stdin."""
    from smriti.server.logs import configure_logging

    configure_logging(settings.log_level)
    logger.info("smriti-mcp: relaying stdio to the shared Smriti server of user %s", settings.accessing_user)
    # The SDK's access log names every HTTP exchange: chatter on the client's stderr.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(run_relay, settings)
