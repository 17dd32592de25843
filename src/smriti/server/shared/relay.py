"""The stdio ``smriti-mcp`` as a relay to the user's shared server, in the standard library only.

An MCP client (Claude Desktop, Cursor, Windsurf, ...) starts ``smriti-mcp`` on stdio and waits
for it before its first answer; langchain-mcp-adapters starts one per tool call. So this
process imports nothing heavy (no MCP SDK, no pydantic, no HTTP library: ~0.1 s of Python
start-up) and does little: it starts the user's shared server at once if none runs
(:func:`smriti.server.shared.client.ensure_server`, in a thread), connects to its lines socket
(:mod:`smriti.server.shared.lines`) and passes lines both ways unchanged. The session is the
server's, as on an in-process stdio server: the handshake era or the 2026-07-28 per-request
envelope, notifications and server requests, and every malformed line answered by the server's
reader (:func:`smriti.server.stdio.read_message`).

What the relay adds:

* **Answers kept from last time** (:mod:`smriti.server.shared.kept`): ``initialize``,
  ``server/discover`` and ``tools/list`` are answered at once from the server's last answers to
  the same requests, before the server is up. Once connected, the relay replays the client's
  ``initialize`` (its answer is not passed on) and sends ``notifications/initialized`` itself
  (the client's own is dropped: the server gets one, in the right place). It compares the
  server's answer with the kept one the client got: when the protocol version or the
  capabilities differ (an SDK changed under the same Smriti version, say), the client holds a
  promise the server does not keep, so the relay answers every request with an error that says
  so and exits 1, and the client's next start gets the server's own answer; a difference in
  ``serverInfo`` or the instructions is logged. A ``tools/list`` answered from the kept answers
  is asked again of the server; a different list is kept and the client is sent
  ``notifications/tools/list_changed``.
* **Reconnection**: when the shared server goes away (killed, stopped, idle exit) the session is
  lost, not the client. A request the server was running is answered with an error saying it
  may or may not have been carried out; the next request starts a server again, the relay
  replays the client's ``initialize`` (only one the server accepted: a 2026-07-28 session has
  none to replay) and sends the request. A request that never reached a
  server (the connection was already gone) is sent to the new one.
* **Every request answered once, and a prompt exit**: when stdin ends, the relay waits for the
  answers due (at most ``ANSWER_GRACE`` seconds), then exits.

One place decides what the relay does with a client's line before passing it on: the
``check_line`` hook of :class:`Relay` (:func:`pass_on` by default: the server's reader answers
malformed lines). A rule the relay itself must enforce (a line too long to pass on, say) goes
there: it returns the answer to write instead of forwarding the line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from smriti import __version__
from smriti.errors import SmritiError
from smriti.server.shared.client import (
    Attachment,
    SharedPaths,
    ensure_server,
    read_state,
    shared_paths,
    spawn_settled,
)
from smriti.server.shared.kept import KeptAnswers, answer_depends_on, reply_line
from smriti.server.wire import LineSplitter, readable_id

logger = logging.getLogger("smriti.server.shared.relay")

CONNECTION_CLOSED = -32000  # mcp_types.CONNECTION_CLOSED (the SDK is not imported here)
# Seconds the answers due get once stdin has ended, as in-process (smriti.server.stdio).
ANSWER_GRACE = 10.0
REPLY_TIMEOUT = 60.0  # seconds for the server's answer to the relay's replayed initialize
END_SESSION_WITHIN = 0.5  # seconds for the server to close the session once stdin has ended
REFUSE_WITHIN = 1.0  # seconds a relay that gave up its client goes on refusing, then exits 1
_CONNECT_ATTEMPTS = 3  # connections lost before a message reached a server: then give up on it
_REPLAY_ID = "smriti-relay-initialize"
_TOOLS_ID = "smriti-relay-tools"
_READ_CHUNK = 1 << 16
MAY_HAVE_RUN = (
    "the shared Smriti server stopped before answering; the request may or may not have been "
    "carried out (the next request starts the server again)"
)


# ----------------------------------------------------------------------------- one line
@dataclass(frozen=True)
class Line:
    """One line from the client or the server, parsed once: ``message`` is the JSON object on
    it, None when there is none (invalid JSON, an array: the server answers those)."""

    raw: bytes
    message: dict[str, Any] | None

    @classmethod
    def of(cls, raw: bytes) -> Line:
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):
            value = None
        return cls(raw, value if isinstance(value, dict) else None)

    @property
    def method(self) -> str | None:
        method = self.message.get("method") if self.message is not None else None
        return method if isinstance(method, str) else None

    @property
    def id(self) -> str | int | None:
        """The message's id when JSON-RPC allows it to be answered (a string or an integer)."""
        key = self.message.get("id") if self.message is not None else None
        return key if isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool)) else None

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.id is not None

    @property
    def is_answer(self) -> bool:
        message = self.message or {}
        return self.method is None and "id" in message and ("result" in message or "error" in message)


LineCheck = Callable[[Line], dict[str, Any] | None]
"""Decides a client's line before it is passed on: the JSON-RPC message to answer it with
instead (the relay writes it and forwards nothing), or None to pass it on."""


def pass_on(line: Line) -> dict[str, Any] | None:
    """The default :data:`LineCheck`: pass every line on; the server's reader answers the
    unreadable ones (:func:`smriti.server.stdio.read_message`), as it does in-process."""
    return None


def _lines(fd: int) -> Iterator[bytes]:
    """The lines read from ``fd`` (each with its newline; an unfinished last one too)."""
    splitter = LineSplitter()
    while True:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            break
        yield from splitter.feed(chunk)
    if rest := splitter.rest():
        yield rest + b"\n"


def _dumps(message: dict[str, Any]) -> bytes:
    """A line the relay writes itself (ASCII escapes: a lone surrogate cannot break it)."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def _error(message_id: Any, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "error": {"code": CONNECTION_CLOSED, "message": text}}


# ----------------------------------------------------------------------------- one connection
class Session:
    """One connection to the server's lines socket, and the client's requests sent on it."""

    def __init__(self, sock: socket.socket, paths: SharedPaths) -> None:
        self.sock = sock
        self.pending: dict[Any, Line] = {}  # requests sent, not answered yet
        self.lost = False
        self.handshaken = False  # an initialize went over it (the client's or the replay)
        self.replay: dict[str, Any] | None = None  # the server's answer to the replayed initialize
        self.replayed = threading.Event()
        self.closed = threading.Event()  # the server's end closed (the reader saw it)
        self.checked_tools: tuple[Line, dict[str, Any]] | None = None  # a kept tools/list answer, asked again
        state = read_state(paths) or {}
        self.server_version = state.get("version")
        names = state.get("setting_names")
        self.names: list[str] | None = names if isinstance(names, list) else None

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)


# ----------------------------------------------------------------------------- the relay
class Relay:
    """One stdio client's lines to and from the shared server, across reconnections."""

    def __init__(self, attachment: Attachment, check_line: LineCheck = pass_on, stdout: int = 1) -> None:
        self.attachment = attachment
        self.paths = shared_paths(attachment)
        self.kept = KeptAnswers(self.paths.answers)
        self.check_line = check_line
        self.stdout = stdout
        self.write_lock = threading.Lock()  # one line at a time on stdout
        self.lock = threading.Lock()  # the session and its pending requests
        self.connect_lock = threading.Lock()  # one connection attempt at a time
        self.session: Session | None = None
        self.initialize: Line | None = None  # the client's, replayed on every new connection
        self.promised: dict[str, Any] | None = None  # the kept initialize result the client got
        self.drop_initialized = False  # the client's notifications/initialized, after a kept answer
        self.given_tools: list[tuple[Line, dict[str, Any]]] = []  # kept tools/list answers given
        self.ended: str | None = None  # why the relay gave up its client

    # ------------------------------------------------------------------------- stdout
    def write(self, data: bytes) -> None:
        with self.write_lock:
            try:
                while data:
                    data = data[os.write(self.stdout, data) :]
            except OSError:  # the client is gone: its stdin ends too, and the relay with it
                pass

    def answer(self, message: dict[str, Any], request: Line | None = None) -> None:
        """Write ``message``; as the answer to ``request``, under the id bytes the client sent
        (as the server's wire does: ``\u00e9`` stays an escape, a lone surrogate is kept)."""
        reply = {k: v for k, v in message.items() if k in ("result", "error")}
        token = readable_id(request.raw) if request is not None else None
        if token is not None:
            try:
                body = json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode()
            except UnicodeEncodeError:
                body = json.dumps(reply, separators=(",", ":")).encode()
            self.write(b'{"jsonrpc":"2.0","id":' + token + b"," + body[1:] + b"\n")
            return
        try:
            self.write(reply_line(message.get("id"), reply))
        except UnicodeEncodeError:  # an id with a lone surrogate: answer it as JSON escapes
            self.write(_dumps({"jsonrpc": "2.0", "id": message.get("id"), **reply}))

    # ------------------------------------------------------------------------- client to server
    def run(self, stdin: int) -> None:
        """Relay until stdin ends, then wait for the answers due (``ANSWER_GRACE`` at most)."""
        for raw in _lines(stdin):
            if not raw.strip():
                continue
            line = Line.of(raw)
            answer = self.check_line(line)
            if answer is not None:
                self.answer(answer, line if answer.get("id") == line.id else None)
            elif self.ended is not None:
                if line.is_request:
                    self.answer(_error(line.id, self.ended), line)
            elif not self._answered_from_kept(line) and not self._dropped(line):
                self._forward(line)
        self._finish()

    def _forward(self, line: Line) -> None:
        """Send ``line`` to the server, connecting (and starting it) when needed."""
        for _ in range(_CONNECT_ATTEMPTS):
            try:
                session = self._ready()
            except SmritiError as error:  # no server could be started: its reason
                logger.error("cannot reach the shared Smriti server: %s", error)
                if line.is_request:
                    self.answer(_error(line.id, str(error)), line)
                _exit_if_settings_refused()
                return
            except OSError as error:  # it went away while connecting: try again
                logger.warning("connecting to the shared Smriti server failed: %s", error)
                continue
            if self.ended is not None:
                if line.is_request:
                    self.answer(_error(line.id, self.ended), line)
                return
            with self.lock:
                if session.lost:
                    continue
                if line.is_request:
                    session.pending[line.id] = line
            if line.method == "initialize":
                session.handshaken = True
                self.initialize = line
            try:
                session.send(line.raw)
                return
            except OSError:
                with self.lock:  # never reached the server, unless the reader answered it already
                    unsent = session.pending.pop(line.id, None) if line.is_request else line
                    self._lose(session)
                if unsent is None:
                    return
        if line.is_request:
            self.answer(_error(line.id, "the shared Smriti server does not answer (see its log)"), line)

    def _ready(self) -> Session:
        """The connected session, connecting, replaying the handshake and checking the kept
        answers first when needed.

        Raises:
            SmritiError: no server could be started.
            OSError: the server went away while connecting.
        """
        with self.connect_lock:
            session = self.session
            if session is None or session.lost:
                paths = ensure_server(self.attachment)
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(str(paths.lines))
                except OSError:
                    sock.close()
                    raise
                session = Session(sock, paths)
                threading.Thread(
                    target=self._down, args=(session,), name="smriti-relay-down", daemon=True
                ).start()
                with self.lock:
                    self.session = session
            if self.initialize is not None and not session.handshaken:
                self._replay(session)
            if self.given_tools and self.ended is None:
                self._check_tools(session)
            return session

    def _replay(self, session: Session) -> None:
        """The client's ``initialize`` on a new connection (see the module docstring)."""
        assert self.initialize is not None and self.initialize.message is not None
        session.send(_dumps({**self.initialize.message, "id": _REPLAY_ID}))
        if not session.replayed.wait(REPLY_TIMEOUT) or session.replay is None:
            raise OSError("the shared Smriti server did not answer the replayed initialize")
        answer = session.replay
        if "result" not in answer:
            message = (answer.get("error") or {}).get("message")
            raise OSError(f"the shared Smriti server refused the session: {message}")
        if self.promised is not None:
            self._check_promise(session, answer["result"])
            if self.ended is not None:
                return
        session.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        session.handshaken = True
        logger.info("connected to the shared Smriti server")

    # ------------------------------------------------------------------------- kept answers
    def _answered_from_kept(self, line: Line) -> bool:
        """Answer a handshake or ``tools/list`` request from the kept answers, when known."""
        if not line.is_request or line.message is None:
            return False
        if line.method in ("initialize", "server/discover") and self.initialize is None:
            reply = self.kept.get(line.message)
            if reply is None or (line.method == "initialize" and "result" not in reply):
                return False
            self.answer({"id": line.id, **reply}, line)
            if line.method == "initialize":
                self.initialize, self.promised, self.drop_initialized = line, reply["result"], True
                self.connect_early()  # the replay goes on while the client reads its answer
            logger.info("answered %s from the answer kept in %s", line.method, self.kept.path)
            return True
        if line.method == "tools/list":
            reply = self.kept.get(line.message, self._context())
            if reply is None or "result" not in reply:
                return False
            self.answer({"id": line.id, **reply}, line)
            self.given_tools.append((line, reply["result"]))
            self.connect_early()  # asked again of the server in the background
            logger.info("answered tools/list from the answer kept in %s", self.kept.path)
            return True
        return False

    def _context(self) -> Any:
        """What a kept ``tools/list`` answer depends on besides its request: the protocol
        version the client's ``initialize`` asked for (None without a handshake)."""
        message = self.initialize.message if self.initialize is not None else None
        return answer_depends_on(message) if message is not None else None

    def _dropped(self, line: Line) -> bool:
        """The client's ``notifications/initialized`` after a kept answer: the replay sends its
        own (before any request), so the server gets one, in the right place."""
        if self.drop_initialized and line.method == "notifications/initialized" and line.id is None:
            self.drop_initialized = False
            return True
        return False

    def _keep(self, session: Session, request: Line, answer: Line) -> None:
        """Keep a server's answer to a kept method for the next start (only from a server of
        this version: an older one still running is not what the next start gets)."""
        if session.server_version != __version__ or session.names is None or request.message is None:
            return
        reply = {k: v for k, v in (answer.message or {}).items() if k in ("result", "error")}
        method = request.method
        if (method == "initialize" and "result" in reply) or method == "server/discover":
            self.kept.put(request.message, reply, session.names)
        elif method == "tools/list" and "result" in reply:
            self.kept.put(request.message, reply, session.names, self._context())

    def _check_promise(self, session: Session, result: dict[str, Any]) -> None:
        """Compare the server's answer with the kept one the client got; see the docstring."""
        promised, self.promised = self.promised or {}, None
        if result == promised:
            return
        assert self.initialize is not None
        self._keep(session, self.initialize, Line(b"", {"result": result}))
        changed = [key for key in sorted({*result, *promised}) if result.get(key) != promised.get(key)]
        if {"protocolVersion", "capabilities"} & set(changed):
            self._give_up(
                f"the shared Smriti server's answer to initialize ({', '.join(changed)}) is not the one "
                "this client was given from the kept answers (the MCP SDK changed?); it is kept now: "
                "start this MCP server again"
            )
        else:
            logger.warning(
                "the shared Smriti server's answer to initialize differs in %s from the kept one this "
                "client was given; the session goes on, and the server's answer is kept",
                ", ".join(changed),
            )

    def _check_tools(self, session: Session) -> None:
        """Ask the server again for the tools list the client was given from the kept answers
        (the last one given: a client asks the same each time)."""
        line, given = self.given_tools[-1]
        self.given_tools = []
        assert line.message is not None
        with self.lock:
            session.pending[_TOOLS_ID] = line
            session.checked_tools = (line, given)
        session.send(_dumps({**line.message, "id": _TOOLS_ID}))

    def _tools_checked(self, session: Session, answer: Line) -> None:
        result = (answer.message or {}).get("result")
        if session.checked_tools is None or not isinstance(result, dict):
            return
        request, given = session.checked_tools
        if result == given:
            return
        self._keep(session, request, answer)
        logger.warning("the shared Smriti server's tools changed since they were kept: telling the client")
        self.write(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n')

    def _give_up(self, why: str) -> None:
        """Refuse every request from now on with ``why``, and exit 1 soon (see the docstring)."""
        self.ended = why
        logger.error("%s", why)

        def exit_soon() -> None:
            time.sleep(REFUSE_WITHIN)
            logger.info("smriti-mcp: gave up the client, exiting")
            logging.shutdown()
            os._exit(1)

        threading.Thread(target=exit_soon, name="smriti-exit", daemon=True).start()

    # ------------------------------------------------------------------------- server to client
    def _down(self, session: Session) -> None:
        """Pass the server's lines to stdout until the connection ends, then answer what it
        left unanswered."""
        for raw in _socket_lines(session.sock):
            line = Line.of(raw)
            if line.is_answer and line.id == _REPLAY_ID:
                session.replay = line.message
                session.replayed.set()
                continue
            if line.is_answer and line.id is not None:
                with self.lock:
                    request = session.pending.pop(line.id, None)
                if line.id == _TOOLS_ID:
                    self._tools_checked(session, line)
                    continue
                if (
                    request is not None
                    and request.method == "initialize"
                    and "result" not in (line.message or {})
                ):
                    self._handshake_refused(request)
                if request is not None and request.method in ("initialize", "server/discover", "tools/list"):
                    self._keep(session, request, line)
            self.write(raw)
        with self.lock:
            unanswered = self._lose(session)
        session.replayed.set()
        session.closed.set()
        for request in unanswered:
            if request.id != _TOOLS_ID:
                self.answer(_error(request.id, MAY_HAVE_RUN), request)

    def _handshake_refused(self, request: Line) -> None:
        """The server refused the client's ``initialize``: the session is not of the handshake era,
        so no later connection may be opened with it.

        How a real client gets there: the SDK's ``mode="auto"`` probes ``server/discover``, and
        when the answer takes longer than its 10 s (a shared server starting on a loaded machine)
        it sends ``initialize``. The probe reached the server first and opened the connection in
        the 2026-07-28 era, so the handshake is refused (-32022) and the client probes again
        and goes on in that era. Replayed after a restart, that ``initialize`` would open the new
        connection in the handshake era, and every enveloped request on it would be refused
        ("this connection serves the handshake protocol era").
        """
        with self.lock:
            if self.initialize is request:
                self.initialize = None

    def _lose(self, session: Session) -> list[Line]:
        """Mark ``session`` lost (call holding ``self.lock``); the requests it left unanswered."""
        session.lost = True
        unanswered = list(session.pending.values())
        session.pending.clear()
        if self.session is session:
            self.session = None
        with contextlib.suppress(OSError):
            session.sock.shutdown(socket.SHUT_RDWR)
        return unanswered

    def _finish(self) -> None:
        """Stdin ended: wait for the answers due, then end the session."""
        deadline = time.monotonic() + ANSWER_GRACE
        while time.monotonic() < deadline:
            with self.lock:
                session = self.session
                due = [key for key in session.pending if key != _TOOLS_ID] if session is not None else []
            if not due:
                break
            time.sleep(0.01)
        with self.lock:
            session = self.session
        if session is not None:
            # Half-close, and let the server end the session (its count falls) before exiting.
            with contextlib.suppress(OSError):
                session.sock.shutdown(socket.SHUT_WR)
            session.closed.wait(END_SESSION_WITHIN)
            with self.lock:
                self._lose(session)

    def connect_early(self) -> None:
        """Connect in the background as soon as the server serves, so the client's first call
        finds the session ready (a failure is left to the first message to report)."""

        def connect() -> None:
            try:
                self._ready()
            except Exception as error:  # why: the client's first request reports it
                logger.debug("connecting early failed: %s", error)

        threading.Thread(target=connect, name="smriti-relay-connect", daemon=True).start()


def _exit_if_settings_refused() -> None:
    """The server could not start: when the settings are what it refused, say so on stderr and
    exit 2, as ``smriti-mcp`` does in-process (the relay reads no settings on its way up; a
    failure may import them)."""
    from smriti.config import load_settings

    try:
        load_settings()
    except SmritiError as error:
        print(f"smriti-mcp: {error}", file=sys.stderr, flush=True)
        logging.shutdown()
        os._exit(2)


def _socket_lines(sock: socket.socket) -> Iterator[bytes]:
    """The whole lines the shared server sends (an unfinished one at the end is dropped)."""
    splitter = LineSplitter()
    while True:
        try:
            chunk = sock.recv(_READ_CHUNK)
        except OSError:
            break
        if not chunk:
            break
        yield from splitter.feed(chunk)


def _claim_stdin() -> int:
    """A private copy of fd 0 to read the client's lines from; fd 0 itself reads the null
    device, so that no child process (the shared server's spawn) can read them."""
    private = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return private


def serve_relay(attachment: Attachment, check_line: LineCheck = pass_on) -> None:
    """``smriti-mcp`` on stdio with SMRITI_SHARED on: relay until the client closes stdin."""
    logger.info(
        "smriti-mcp: relaying stdio to the shared Smriti server of user %s", attachment.accessing_user
    )
    relay = Relay(attachment, check_line)
    stdin = _claim_stdin()  # before the spawn: the server must not inherit the client's stdin
    relay.connect_early()  # starts the server if none runs: its start overlaps the handshake
    with contextlib.suppress(KeyboardInterrupt):
        relay.run(stdin)
    spawn_settled()  # a server this relay is starting is on record before the relay is gone
    logging.shutdown()
    os._exit(1 if relay.ended is not None else 0)  # threads may still block on the socket
