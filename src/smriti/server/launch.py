"""Starting ``smriti-mcp``: arguments, logging, and the transport that serves the app.

``main()`` is the console script (``python -m smriti.server`` runs it too). On stdio it relays
to the user's shared server (:mod:`smriti.server.shared.relay`, started on demand by
:mod:`smriti.server.shared.client`) unless ``SMRITI_SHARED=false``: that path reads no settings
and imports nothing heavy (the relay must answer in milliseconds); ``--shared-daemon`` runs that
shared server (:mod:`smriti.server.shared.daemon`). Otherwise :func:`serve` runs the app that
:func:`smriti.server.app.build_server` builds, on stdio or streamable HTTP.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from smriti import __version__
from smriti.errors import SettingsError, SmritiError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from smriti.config import Settings
    from smriti.server.auth import HttpAuth

# The settings (pydantic), the MCP SDK's server and the app are imported where they are used:
# the stdio relay, what MCP clients start (one per tool call for some), needs none of them.

logger = logging.getLogger("smriti.server")

INTERNAL_ERROR = -32603  # JSON-RPC's code for a server that cannot do what was asked


async def _serve_stdio(server: MCPServer, closed: threading.Event) -> None:
    """Serve on stdio until stdin closes or SIGINT/SIGTERM arrives.

    After a signal the lifespan still syncs and closes the database (shielded), but the
    SDK's stdin reader sits in a thread that cannot be interrupted until the client writes
    or closes stdin. Once the database is closed we therefore exit the process ourselves.
    """
    import anyio

    from smriti.server.stdio import run_stdio

    async def exit_when_closed() -> None:
        while not closed.is_set():
            await anyio.sleep(0.05)
        await anyio.sleep(1.0)  # a normal exit (stdin closed too) wins this race
        logger.info("smriti-mcp: shut down cleanly")
        logging.shutdown()
        os._exit(0)

    async def stop_on_signal(serving: anyio.CancelScope, outer: anyio.abc.TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                logger.info("received %s: shutting down", signal.Signals(signum).name)
                outer.start_soon(exit_when_closed)
                serving.cancel()
                return

    async with anyio.create_task_group() as outer:
        async with anyio.create_task_group() as serving:
            serving.start_soon(stop_on_signal, serving.cancel_scope, outer)
            await run_stdio(server)
            serving.cancel_scope.cancel()
        outer.cancel_scope.cancel()


async def _serve_http(
    server: MCPServer, host: str, port: int, settings: Settings, auth: HttpAuth | None
) -> None:
    import uvicorn

    from smriti.server.http_limits import uvicorn_limits
    from smriti.server.workers import http_app

    app = http_app(server, host, auth)
    log_level = settings.log_level
    # log_config=None: uvicorn's default config would send access logs to stdout.
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level.lower(), log_config=None, **uvicorn_limits(settings)
    )
    # uvicorn handles SIGINT/SIGTERM itself and runs the lifespan shutdown (final sync, close),
    # then re-raises the signal under the handler it found: make that a no-op, so a clean
    # shutdown exits 0 instead of dying from the re-raised signal.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: None)
    await uvicorn.Server(config).serve()


def serve(
    settings: Settings,
    transport: Literal["stdio", "streamable-http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    no_auth: bool = False,
    workers: int = 1,
) -> None:
    """Run the server until the client disconnects (stdio) or a signal arrives.

    ``workers`` > 1 (streamable HTTP only) runs that many processes on the port
    (:mod:`smriti.server.workers`).

    Over streamable HTTP every request is authenticated (server/auth.py) unless ``no_auth``,
    which only a loopback ``host`` allows; a refused configuration exits 2 with one line.

    Raises:
        StartupError-like exceptions (store locked, embedding mismatch, unsafe user name)
        are not raised: they are printed as one line on stderr and the process exits 1.
    """
    if transport == "stdio" and settings.shared and hasattr(socket, "AF_UNIX"):
        from smriti.server.shared.client import Attachment

        return _relay(Attachment.of(settings))
    if transport == "streamable-http" and workers > 1:
        from smriti.server.workers import serve_workers

        return serve_workers(settings, host, port, no_auth, workers)
    return _serve_in_process(settings, transport, host, port, no_auth)


def _serve_in_process(
    settings: Settings, transport: Literal["stdio", "streamable-http"], host: str, port: int, no_auth: bool
) -> None:
    """Run the app in this process on ``transport``; a start-up failure exits 1 with one line."""
    import anyio

    from smriti.runtime import startup_error
    from smriti.server.app import build_server
    from smriti.server.auth import plan_http_auth
    from smriti.server.logs import configure_logging

    configure_logging(settings.log_level)
    auth: HttpAuth | None = None
    if transport == "streamable-http":
        try:
            auth = plan_http_auth(settings, host, port, no_auth)
        except SmritiError as error:
            print(f"smriti-mcp: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    refused = storage_refusal(settings, one_user=auth is None)
    if refused is not None:
        print(f"smriti-mcp: {refused}", file=sys.stderr, flush=True)
        if transport == "stdio":
            refuse_on_stdio(refused)
        raise SystemExit(1)
    closed = threading.Event()
    from smriti.blas import one_thread_for_this_process

    one_thread_for_this_process()  # the server's own process: see smriti/blas.py
    server = build_server(settings, on_shutdown=closed.set, auth=auth)
    where = "stdio" if transport == "stdio" else f"http://{host}:{port}/mcp"
    logger.info(
        "smriti-mcp %s: %s on %s, serving %s",
        __version__,
        f"user {settings.accessing_user}" if auth is None else "authenticated users",
        settings.db_type,
        where,
    )
    if transport == "streamable-http" and auth is None:
        logger.warning("serving without authentication (--no-auth): any local process can use this memory")
    runner: Callable[[], Awaitable[None]]
    if transport == "stdio":
        runner = functools.partial(_serve_stdio, server, closed)
    else:
        runner = functools.partial(_serve_http, server, host, port, settings, auth)
    try:
        anyio.run(runner)
    except KeyboardInterrupt:
        pass
    except BaseException as error:
        message = startup_error(error)
        if message is None:
            raise
        print(f"smriti-mcp: {message}", file=sys.stderr)
        raise SystemExit(1) from None
    logger.info("smriti-mcp: shut down cleanly")


def storage_refusal(settings: Settings, one_user: bool = True) -> str | None:
    """Why the memory's folder cannot be used (one line), else None; creates it if needed.

    Checked before anything opens, so a folder this process cannot write (a volume Docker
    created as root's) is one line, not a traceback from the first write. ``one_user``: the
    folder of ACCESSING_USER (stdio, --no-auth); else STORAGE_LOCATION, where each
    authenticated user's folder goes. The database servers (Neo4j, FalkorDB) keep no files there.
    """
    from smriti.errors import make_folder, validate_user_name

    if settings.db_type in ("neo4j", "falkordb"):
        return None
    try:
        folder = settings.storage_location
        if one_user:
            folder = folder / validate_user_name(settings.accessing_user)
        make_folder(folder)
    except SmritiError as error:
        return str(error)
    return None


def refuse_on_stdio(message: str) -> NoReturn:
    """Answer every request the client sends with ``message`` until it closes stdin, then exit 1.

    A client that gets no answer to ``initialize`` shows a timeout or "server disconnected",
    not the reason: this way the reason is what it shows. Notifications and lines that are not
    JSON-RPC requests get no answer (nothing else of the session can run).
    """
    import json

    for raw in sys.stdin.buffer:
        try:
            message_in = json.loads(raw)
        except ValueError:
            continue
        if isinstance(message_in, dict) and "method" in message_in and "id" in message_in:
            error = {"code": INTERNAL_ERROR, "message": f"Smriti cannot start: {message}"}
            reply = {"jsonrpc": "2.0", "id": message_in["id"], "error": error}
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()
    raise SystemExit(1)


class _Parser(argparse.ArgumentParser):
    """The epilog names the settings' sections, read from the settings (pydantic) only when the
    help is shown: parsing the arguments is on the relay's path, which must not import them."""

    def format_help(self) -> str:
        from smriti.config import SECTIONS

        self.epilog = (
            "Settings, by section: "
            + ", ".join(f"{section.slug} ({section.title})" for section in SECTIONS)
            + ". `smriti config [SECTION]` shows each value in effect and where it came from; "
            "docs/settings.md describes every variable."
        )
        return super().format_help()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog="smriti-mcp",
        description="Smriti graph memory MCP server. Configuration comes from environment variables.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="bind address for streamable-http")
    parser.add_argument("--port", type=int, default=8000, help="port for streamable-http (default 8000)")
    parser.add_argument(
        "--no-auth",
        action="store_true",
        help="streamable-http without bearer tokens, as ACCESSING_USER (loopback binds only)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="streamable-http: server processes on the port, sharing each user's memory "
        "(default HTTP_WORKERS, 1; SQLite, FalkorDB or Neo4j)",
    )
    parser.add_argument(
        "--shared-daemon",
        action="store_true",
        help="run the user's shared server on its unix socket in the foreground (stdio clients start it)",
    )
    parser.add_argument(
        "--service",
        action="store_true",
        help="with --shared-daemon: as the user's service manager runs it (`smriti service install`): "
        "no idle exit, and it waits for a server a client started to exit instead of failing",
    )
    args = parser.parse_args(argv)
    if args.service and not args.shared_daemon:
        parser.error("--service goes with --shared-daemon")
    return args


def _relay(attachment: Any) -> None:
    """Relay stdio to the user's shared server (one server per user, shared by every client)."""
    from smriti.server.logs import configure_logging
    from smriti.server.shared.relay import serve_relay

    configure_logging(attachment.log_level)
    serve_relay(attachment)


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``smriti-mcp``: settings errors exit 2 with one message, no traceback.

    On stdio in shared mode (the default) no settings are read here: the relay reads where the
    user's server is from the environment and the server validates the settings when it starts
    (a refused setting is its start-up error, which the relay answers requests with).
    """
    args = _parse_args(argv)
    if args.shared_daemon:
        from smriti.server.shared.daemon import main as run_shared

        return run_shared(service=args.service)
    if args.transport == "stdio" and args.workers in (None, 1):
        from smriti.server.shared.client import Attachment

        attachment = Attachment.from_environment()
        if attachment is not None:
            return _relay(attachment)
    from smriti.config import load_settings

    try:
        settings = load_settings()
        workers = worker_count(settings, args.transport, args.workers)
    except SmritiError as error:
        print(f"smriti-mcp: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    serve(settings, args.transport, args.host, args.port, no_auth=args.no_auth, workers=workers)


def worker_count(settings: Settings, transport: str, requested: int | None) -> int:
    """The server processes to run: ``--workers`` when given, else HTTP_WORKERS over streamable
    HTTP (stdio is one process whatever HTTP_WORKERS says).

    Raises:
        SettingsError: fewer than 1, or more than 1 on stdio.
    """
    http = transport == "streamable-http"
    workers = requested if requested is not None else settings.http_workers if http else 1
    if workers < 1 or (workers > 1 and not http):
        raise SettingsError(
            "--workers takes a number >= 1, and more than 1 only with --transport streamable-http"
        )
    return workers
