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

A client whose ``initialize`` was answered before the SDK was imported, from the answer the
server gave last time (:mod:`smriti.server.shared.handshake`), is relayed the same way from its
first session on: the relay replays the ``initialize`` and sends ``notifications/initialized``
itself (the client's own is dropped, so the server gets one). It then compares the server's
answer with the one the client was given, and keeps the server's for next time when they
differ. If the protocol version or the capabilities differ (an SDK changed under the same
Smriti version, say), the client holds a promise the server does not keep: the relay answers
every request it holds with an error that says so and exits, as a server that stopped would,
so the client's next start gets the server's own answer. A difference in ``serverInfo`` or the
instructions alone is logged, and the session goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
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

from smriti import __version__
from smriti.errors import SmritiError
from smriti.server.shared.client import MCP_URL, SharedPaths, ensure_server, quiet_cancelled_socket_reads
from smriti.server.shared.handshake import DISCOVER, EarlyAnswer, InitializeCache, cache_key, reply_of
from smriti.server.stdio import answering_stdio

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
    from mcp.client._transport import ReadStream, WriteStream

    from smriti.config import Settings

logger = logging.getLogger("smriti.server.shared.relay")

_REPLAY_ID = "smriti-relay-initialize"
END_SESSION_WITHIN = 0.4  # seconds to close the session once stdin has ended and been answered
REFUSE_WITHIN = 1.0  # seconds a relay that gives up its client waits for the next message to refuse
EXIT_AFTER = 1.0  # seconds for the last answers to be written before a relay that gave up exits
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

    def __init__(
        self,
        settings: Settings,
        stdout: MemoryObjectSendStream[SessionMessage],
        early: EarlyAnswer | None = None,
    ) -> None:
        self.settings = settings
        self.stdout = stdout
        self.initialize: JSONRPCRequest | None = None  # the client's, replayed on reconnection
        self.initialized = False  # a session was established once (reconnections replay)
        self.protocol_version: str | None = None
        self.pending: dict[Any, JSONRPCRequest] = {}  # requests sent, not yet answered
        self.unsent: list[SessionMessage] = []  # to send once connected
        self.transport: RestartingTransport | None = None
        self.barren = 0  # sessions lost in a row with no message from the server
        self.cache = InitializeCache.of(settings)
        self.promised: dict[str, Any] | None = None  # the cached result the client was given
        self.ended: str | None = None  # why the relay gave up the client (see the docstring)
        if early is not None and early.request is not None and early.result is not None:
            self.initialize = JSONRPCRequest.model_validate(early.request)
            self.initialized = True  # the first session replays, as a reconnection does
            self.protocol_version = early.result.get("protocolVersion")
            self.promised = early.result
        self.drop_initialized = self.promised is not None

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
                if self.ended is not None:
                    await self._refuse_waiting(stdin, self.ended)
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
                    if self.ended is None:
                        tasks.start_soon(self._down, read, tasks.cancel_scope)
                        while self.unsent:
                            await self._send(write, self.unsent.pop(0))
                        async for item in stdin:
                            if isinstance(item, SessionMessage):
                                await self._send(write, item)
                        outcome["eof"] = True  # and the last answers are written (answering_stdio)
                    # The client is gone (or given up): end the session (the SDK's DELETE on
                    # leaving), but never wait on the server more than END_SESSION_WITHIN for that.
                    session.deadline = anyio.current_time() + END_SESSION_WITHIN
                    tasks.cancel_scope.cancel()
        except Exception as error:  # the transport failed (inside exception groups): a lost session
            logger.warning("the session with the shared Smriti server ended: %s", _first_cause(error))
        if outcome["eof"]:
            return True
        if self.ended is not None:  # before anything was sent in this session
            requests = [m.message for m in self.unsent if isinstance(m.message, JSONRPCRequest)]
            await self._fail(requests, self.ended)
            self.unsent.clear()
            return True
        self.barren += 1
        await self._session_lost()
        return False

    async def _send(self, write: WriteStream[SessionMessage], item: SessionMessage) -> None:
        message = item.message
        if self._drops(message):
            return
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
            message = item.message
            if isinstance(message, JSONRPCError) and _abandoned(message) and message.id in self.pending:
                # The MCP SDK's own answer to a request whose stream ended unanswered: the server
                # is gone. Passed on, it told the client less than the relay knows, and the
                # client's next request went into the dead session. The session is lost here:
                # _session_lost answers the request in the relay's words (or sends it again
                # when it never reached the server).
                scope.cancel()
                return
            self.barren = 0  # the server answered: this session was alive
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
                if request is not None:
                    self._keep(request, message)
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
                if self.promised is not None:
                    self._check_promise(message)
                    if self.ended is not None:
                        return
                break
        initialized = JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")
        await write.send(SessionMessage(initialized))
        logger.info("reconnected to the shared Smriti server")

    # ------------------------------------------------------------------------- the cached answer
    def _drops(self, message: Any) -> bool:
        """The client's ``notifications/initialized`` after an answer from the cache: the replay
        sends its own (before any request), so the server gets one, in the right place."""
        if not (self.drop_initialized and isinstance(message, JSONRPCNotification)):
            return False
        if message.method != "notifications/initialized":
            return False
        self.drop_initialized = False
        return True

    def _keep(self, request: JSONRPCRequest, answer: JSONRPCResponse | JSONRPCError) -> None:
        """Keep the server's answer to a handshake request for the next start: an ``initialize``
        result from a server of this version (an older one still running is not what the next
        start gets), a ``server/discover`` error (see :mod:`smriti.server.shared.handshake`)."""
        if request.method == "initialize" and isinstance(answer, JSONRPCResponse):
            keep = (answer.result.get("serverInfo") or {}).get("version") == __version__
        else:
            keep = request.method == DISCOVER and isinstance(answer, JSONRPCError)
        if keep:
            self.cache.put(cache_key(self.settings, request.model_dump(mode="json")), reply_of(answer))

    def _check_promise(self, answer: JSONRPCResponse) -> None:
        """Compare the server's answer with the cached one the client got; see the docstring."""
        promised, self.promised = self.promised or {}, None
        result = answer.result
        if result == promised:
            return
        assert self.initialize is not None
        self._keep(self.initialize, answer)
        changed = [key for key in sorted({*result, *promised}) if result.get(key) != promised.get(key)]
        if {"protocolVersion", "capabilities"} & set(changed):
            self.ended = (
                f"the shared Smriti server's answer to initialize ({', '.join(changed)}) is not the one "
                "this client was given from the cache (the MCP SDK changed?); it is kept now: start "
                "this MCP server again"
            )
            logger.error("%s", self.ended)
        else:
            logger.warning(
                "the shared Smriti server's answer to initialize differs in %s from the cached one "
                "this client was given; the session goes on, and the server's answer is kept",
                ", ".join(changed),
            )

    async def _refuse_waiting(
        self, stdin: MemoryObjectReceiveStream[SessionMessage | Exception], text: str
    ) -> None:
        """Answer the requests the client sent before the relay gave it up with ``text``: those
        already in the pipe are read at once; stop at a pause of ``REFUSE_WITHIN`` seconds."""
        while True:
            with anyio.move_on_after(REFUSE_WITHIN):
                try:
                    item = await stdin.receive()
                except anyio.EndOfStream:
                    return
                if isinstance(item, SessionMessage) and isinstance(item.message, JSONRPCRequest):
                    await self._fail([item.message], text)
                continue
            return

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


def _abandoned(error: JSONRPCError) -> bool:
    """An error the MCP SDK's client made up for a request whose stream ended without an answer
    (``CONNECTION_CLOSED``: the server never sends that code; the relay's own go straight to
    stdout)."""
    return error.error.code == CONNECTION_CLOSED


def _first_cause(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


async def run_relay(settings: Settings, early: EarlyAnswer | None = None) -> str | None:
    """Serve the stdio client through the shared server until stdin closes; returns why the
    relay gave the client up (a broken promise of the cached ``initialize``), None otherwise."""
    quiet_cancelled_socket_reads()
    async with answering_stdio(early.head if early is not None else b"") as (stdin, stdout):
        relay = Relay(settings, stdout, early)
        await relay.run(stdin)
        if relay.ended is not None:
            # The client still holds stdin open and a worker thread is blocked reading it, so
            # the transport cannot end by itself: exit once its last answers are written.
            _exit_soon(1)
    return relay.ended


def serve_relay(settings: Settings, early: EarlyAnswer | None = None) -> None:
    """``smriti-mcp`` on stdio with SMRITI_SHARED on: relay until the client closes stdin.

    ``early``: what :func:`smriti.server.shared.handshake.answer_handshake_early` read from
    stdin (and answered) before this module was imported; logging is configured by then.
    """
    logger.info("smriti-mcp: relaying stdio to the shared Smriti server of user %s", settings.accessing_user)
    # The SDK's access log names every HTTP exchange: chatter on the client's stderr.
    logging.getLogger("httpx2").setLevel(logging.WARNING)
    ended = None
    with contextlib.suppress(KeyboardInterrupt):
        ended = anyio.run(run_relay, settings, early)
    if ended is not None:  # stdin closed meanwhile: the transport ended, its answers written
        _exit_soon(1, after=0.0)


def _exit_soon(code: int, after: float = EXIT_AFTER) -> None:
    """End the process with ``code`` in ``after`` seconds, whatever threads still block."""

    def exit_now() -> None:
        time.sleep(after)
        logger.info("smriti-mcp: gave up the client, exiting")
        logging.shutdown()
        os._exit(code)

    if after <= 0:
        exit_now()
    threading.Thread(target=exit_now, name="smriti-exit", daemon=True).start()
