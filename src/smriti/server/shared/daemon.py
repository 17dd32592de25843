"""The shared server: one process per user that every local client of that user talks to.

An embedded database admits one process, and people run several MCP clients (and the CLI, and
hooks) at once. So the stdio ``smriti-mcp`` is a relay (:mod:`smriti.server.shared.relay`) and this process,
started on demand by the first client (:func:`smriti.server.shared.client.ensure_server`), holds the
database and serves two unix sockets with mode 0600 under ``STORAGE_LOCATION/{user}/`` (only the
OS user who owns them can connect, so they need no token): MCP's own streamable HTTP transport
(the CLI's) on ``smriti.sock``, and stdio MCP sessions, one per connection, on
``smriti-lines.sock`` (the relays': :mod:`smriti.server.shared.lines`).

Besides ``/mcp`` it answers ``GET /status`` (pid, uptime, sessions, requests: ``smriti status``),
``POST /shutdown`` (``smriti stop``) and the CLI's routes (:mod:`smriti.server.shared.routes`:
resolving an id, exporting, lending the database to ``import``/``view``/``restore``). It exits
by itself after ``SHARED_IDLE_TIMEOUT`` seconds with no HTTP request in flight and no relay
connected, so it lives as long as any
client is attached.

Run it in the foreground with ``smriti-mcp --shared-daemon`` (clients start it detached, with
its stderr in ``smriti-server.log``). Under the user's service manager (``smriti service
install``: :mod:`smriti.server.shared.service`) it runs as ``--shared-daemon --service``: it
never exits when idle, and when a server a client started already holds the lock it waits for
that one to exit (its idle exit, or ``smriti stop``) and takes over, instead of failing and being
restarted in a loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from smriti.config import load_settings, setting_env_names
from smriti.config.reference import setting_rows
from smriti.errors import SmritiError, StoreError
from smriti.server.http_limits import uvicorn_limits
from smriti.server.sdk import session_count
from smriti.server.shared.client import (
    SharedPaths,
    environment_digest,
    prepare_folders,
    read_state,
    remove_stale,
    shared_paths,
)
from smriti.server.shared.lines import LineSessions, lines_lifespan
from smriti.server.shared.routes import add_cli_routes
from smriti.server.shared.starting import forget_marker
from smriti.server.wire import MAX_MESSAGE_BYTES
from smriti.stores.paths import process_lock, try_lock

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.requests import Request
    from starlette.responses import Response

    from smriti.config import Settings
    from smriti.runtime import Runtime

logger = logging.getLogger("smriti.shared")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
FIRST_REQUEST_GRACE = 60.0  # seconds a server nobody has talked to yet stays up (see _exit_when_idle)
_UNTRACKED = {"/status"}  # `smriti status` must not keep an idle server alive


class Activity:
    """ASGI middleware that counts HTTP requests in flight and remembers the last one's end."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.active = 0
        self.requests = 0
        self.last = time.monotonic()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") in _UNTRACKED:
            await self.app(scope, receive, send)
            return
        self.active += 1
        self.requests += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.last = time.monotonic()

    def idle_seconds(self) -> float:
        return 0.0 if self.active else time.monotonic() - self.last

    def connection(self, change: int) -> None:
        """A relay's connection on the lines socket opened (+1) or closed (-1): while open it
        is activity, as an HTTP request in flight is."""
        self.active += change
        if change > 0:
            self.requests += 1
        else:
            self.last = time.monotonic()


def bind_socket(path: Path) -> socket.socket:
    """A listening unix socket at ``path`` that only this OS user can connect to.

    The umask makes it 0600 from the moment it exists (a chmod afterwards would leave a window).
    Call only while holding the server lock: a socket file left there is a dead server's.
    """
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as error:  # a file system without sockets (some network or Windows mounts)
        sock.close()
        raise StoreError(
            f"cannot create the shared server's socket {path}: {error.strerror}; "
            "set SMRITI_SHARED=false to serve each client in its own process"
        ) from None
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(128)
    return sock


def _add_routes(
    server: MCPServer,
    status: Callable[[], dict[str, Any]],
    stop: Callable[[], None],
    counts: Callable[[], dict[str, Any] | None],
) -> None:
    from starlette.responses import JSONResponse

    @server.custom_route("/status", methods=["GET"], include_in_schema=False)
    async def _status(request: Request) -> Response:
        answer = status()
        # The memory's counts only when asked (`smriti status`): the relays read /status on
        # their start, which must not wait on the database.
        if request.query_params.get("memory"):
            try:
                answer["memory"] = await anyio.to_thread.run_sync(counts)
            except Exception as error:  # why: the status still answers; the count says why not
                answer["memory"] = {"error": str(error)}
        return JSONResponse(answer)

    @server.custom_route("/shutdown", methods=["POST"], include_in_schema=False)
    async def _shutdown(_: Request) -> Response:
        logger.info("shutdown requested (smriti stop)")
        stop()
        return JSONResponse({"stopping": os.getpid()}, status_code=202)


class SharedServer:
    """One run of the shared server: the MCP app on its sockets, and what its routes report.

    Built whole before it serves (the app, its routes, the lines socket, uvicorn), so every
    attribute exists by the time a request or the idle check reads it; ``runtime`` is the user's
    memory once the app's lifespan has opened it, ``startup_error`` what failed that lifespan, if
    anything did. Call only while holding the server lock (the sockets' files are replaced).
    """

    def __init__(self, settings: Settings, paths: SharedPaths, service: bool = False) -> None:
        from smriti.server.app import build_server

        self.settings, self.paths = settings, paths
        self.service = service  # run by the user's service manager: no idle exit
        self.started = time.time()
        # The settings' names are published (state file, status) and the digest is taken over
        # the raw environment, as a relay, which reads no settings, digests its own.
        self.setting_names = setting_env_names()
        self.digest = environment_digest(self.setting_names)
        self.changed_settings = {
            row.variable: row.value for row in setting_rows(settings) if not row.is_default
        }
        self.runtime: Runtime | None = None
        self.startup_error: BaseException | None = None
        self.mcp = build_server(settings, on_open=self._opened)
        _add_routes(self.mcp, self.status, self.stop, self.memory_counts)
        add_cli_routes(self.mcp)
        app = self._http_app()
        self.activity = Activity(app)
        # The relays' connections run in the app's lifespan, which opened the memory.
        self.lines = LineSessions(self.mcp, bind_socket(paths.lines), self.activity.connection)
        app.router.lifespan_context = lines_lifespan(app.router.lifespan_context, self.lines)
        self.uvicorn = self._uvicorn_server()

    def _opened(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def _http_app(self) -> Any:
        from mcp.server.transport_security import TransportSecuritySettings

        app = self.mcp.streamable_http_app(
            host="localhost",
            # A session with nothing in flight this long is gone (a relay killed without a goodbye).
            session_idle_timeout=self.settings.shared_idle_timeout,
            # The CLI's HTTP requests. (A relay's lines go to the lines socket, where the wire
            # refuses one over MAX_MESSAGE_BYTES with the answer in-process gives.)
            max_request_body_size=4 * MAX_MESSAGE_BYTES,
            # Browsers cannot reach a unix socket, but keep the SDK's Host check: it costs nothing.
            transport_security=TransportSecuritySettings(allowed_hosts=["localhost"], allowed_origins=[]),
        )
        self._keep_startup_error(app)
        return app

    def _keep_startup_error(self, app: Any) -> None:
        """Keep the exception that fails the app's start-up (uvicorn reports only its exit)."""
        inner = app.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(starlette_app: Any) -> AsyncIterator[Any]:
            started = False
            try:
                async with inner(starlette_app) as state:
                    started = True
                    yield state
            except BaseException as error:
                if not started:
                    self.startup_error = error
                raise

        app.router.lifespan_context = lifespan

    def _uvicorn_server(self) -> Any:
        import uvicorn

        config = uvicorn.Config(
            self.activity,
            log_level=self.settings.log_level.lower(),
            log_config=None,  # uvicorn's own config would log to stdout
            timeout_graceful_shutdown=3,  # attached relays' open streams must not hold the exit
            ws="none",  # MCP has no WebSocket transport; "auto" imports websockets at every start
            **uvicorn_limits(self.settings),
        )
        return uvicorn.Server(config)

    def status(self) -> dict[str, Any]:
        """What ``GET /status`` answers (``smriti status``)."""
        from smriti import __version__

        activity, settings, runtime = self.activity, self.settings, self.runtime
        return {
            "pid": os.getpid(),
            "user": settings.accessing_user,
            "socket": str(self.paths.socket),
            "log": str(self.paths.log),
            "version": __version__,
            # What the memory opened with (DB_TYPE=auto resolves per user folder) and the setting
            "db_type": runtime.memory.context.store.backend if runtime is not None else settings.db_type,
            "db_type_setting": settings.db_type,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.started)),
            "uptime_s": round(time.time() - self.started, 1),
            # HTTP sessions (the CLI's) and relays' connections on the lines socket
            "sessions": session_count(self.mcp) + self.lines.count,
            "requests_in_flight": activity.active,
            "requests": activity.requests,
            "idle_s": round(activity.idle_seconds(), 1),
            "idle_timeout_s": None if self.service else settings.shared_idle_timeout,
            "service": self.service,
            # What `smriti context` (a hook, reading no settings) fits its block to
            "context_budget_chars": settings.context_budget_chars,
            "settings": self.digest,
            # The settings this server runs with that differ from their defaults (secrets
            # masked): what `smriti status` shows of them.
            "changed_settings": self.changed_settings,
            "setting_names": self.setting_names,
        }

    def memory_counts(self) -> dict[str, Any] | None:
        """The open memory's counts (a blocking read: call it in a worker thread), or None
        before the memory is open."""
        if self.runtime is None:
            return None
        stats = self.runtime.memory.context.store.stats()
        return {
            "memories": stats.engrams,
            "cues": stats.cues,
            "associations": stats.associations,
            "clusters": stats.clusters,
            "location": stats.location,
        }

    def stop(self) -> None:
        self.uvicorn.should_exit = True

    async def serve(self, sock: socket.socket) -> None:
        """Serve on ``sock`` until stopped or (unless run as a service) idle for
        ``SHARED_IDLE_TIMEOUT``."""
        async with anyio.create_task_group() as tasks:
            if not self.service:
                tasks.start_soon(self._exit_when_idle)
            await self.uvicorn.serve(sockets=[sock])
            tasks.cancel_scope.cancel()

    async def _exit_when_idle(self) -> None:
        idle_timeout, userver = self.settings.shared_idle_timeout, self.uvicorn
        while not userver.should_exit:
            await anyio.sleep(min(1.0, idle_timeout / 4))
            # Before its first request a server waits at least FIRST_REQUEST_GRACE: a relay starts
            # it before importing the MCP SDK (seconds on a loaded machine), then connects.
            limit = idle_timeout if self.activity.requests else max(idle_timeout, FIRST_REQUEST_GRACE)
            if userver.started and self.activity.idle_seconds() >= limit:
                logger.info("idle for %.0f s: exiting", limit)
                userver.should_exit = True


def run(settings: Settings, service: bool = False) -> None:
    """Serve ``settings``' user on the shared socket until idle (unless ``service``) or stopped.

    Raises:
        StoreError: another shared server already serves this user (``service``: waited for).
    """
    paths = shared_paths(settings)
    prepare_folders(paths)
    lock = process_lock(paths.server_lock)
    if not try_lock(lock):
        if not service:
            raise StoreError(f"a shared Smriti server already serves user {settings.accessing_user}")
        other = (read_state(paths) or {}).get("pid", "starting")
        logger.info(
            "a shared Smriti server a client started (pid %s) serves user %s: the service takes "
            "over when it exits (`smriti stop` hands over now)",
            other,
            settings.accessing_user,
        )
        lock.acquire()
    # The server lock is held: a client that started this process needs its marker no more.
    forget_marker(paths.starting, os.getpid())
    from smriti import __version__
    from smriti.blas import one_thread_for_this_process

    one_thread_for_this_process()  # the server's own process: see smriti/blas.py
    server = SharedServer(settings, paths, service)
    sock = bind_socket(paths.socket)
    # A line per HTTP request would grow the log by the thousand in a day of use.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # What a relay reads without asking (read_state): whom it talks to, which version, and the
    # settings' names, over which it digests its own environment (the kept answers' key).
    state = {"pid": os.getpid(), "socket": str(paths.socket), "started": server.started}
    paths.state.write_text(
        json.dumps({**state, "version": __version__, "setting_names": server.setting_names})
    )
    _log_start(settings, paths, service)
    # As launch._serve_http: uvicorn re-raises the signal it caught after its clean shutdown.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: None)
    try:
        anyio.run(server.serve, sock)
    except BaseException:
        # uvicorn exits (3, inside an exception group) when the lifespan fails: the reason (a
        # locked database...) is what a client must show.
        if server.startup_error is not None:
            raise server.startup_error from None
        raise
    finally:
        # Unlinked before the lock is released: a client that then finds the lock free and no
        # socket starts a new server, never connects to this dying one.
        remove_stale(paths)
        sock.close()
        server.lines.sock.close()
        lock.release()
    logger.info("shared Smriti server stopped")


def _log_start(settings: Settings, paths: SharedPaths, service: bool) -> None:
    from smriti import __version__

    logger.info(
        "shared Smriti server %s (pid %d): user %s on %s, serving %s; %s",
        __version__,
        os.getpid(),
        settings.accessing_user,
        settings.db_type,
        paths.socket,
        "run by the service manager, no idle exit"
        if service
        else f"exits after {settings.shared_idle_timeout:.0f} s idle",
    )


def main(service: bool = False) -> None:
    """``smriti-mcp --shared-daemon [--service]`` and ``python -m smriti.server.shared.daemon``."""
    from smriti.runtime import startup_error
    from smriti.server.logs import configure_logging

    try:
        settings = load_settings()
    except SmritiError as error:
        print(f"smriti-mcp: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    configure_logging(settings.log_level)
    try:
        run(settings, service)
    except BaseException as error:
        message = startup_error(error)
        if message is None:
            raise
        print(f"smriti-mcp: {message}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
