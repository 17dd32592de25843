"""``smriti-mcp --transport streamable-http --workers N``: N processes on one port sharing each memory.

Why processes: one Python process serves one recall at a time on the CPU (the GIL), so eight
HTTP clients got no more recalls per second than one. uvicorn's supervisor binds the socket
once, starts N workers that accept from it (the kernel spreads the connections), and starts a
worker again if one dies. Each worker builds the same app (:func:`make_app`).

What they share, and how it stays correct:

* SQLite (the default): every worker opens the user's file shared (``HTTP_WORKERS`` > 1 makes
  ``open_sqlite`` pass ``shared=True``): WAL, one writer at a time by SQLite's own lock and busy
  timeout, and each worker's caches follow the others' commits through the change log
  (:mod:`smriti.stores.sqlite.changes`). A stdio or shared server, or the CLI, takes the file
  exclusively: the two kinds never run on one file at once (flock shared vs exclusive).
* FalkorDB and Neo4j: every worker is a client of the database server, which is shared
  already (``capabilities.shared``).
* Kuzu and LadybugDB open a database in one process only: refused with more than one worker.
* Periodic consolidation and backup sync: every worker has the timers, one runs each at a time
  (consolidation: the memory's lock, ``Memory.consolidate``, which also holds an on-demand one
  back; sync: :func:`smriti.server.app.one_worker_at_a_time`).

MCP sessions: a session made by ``initialize`` on one worker is unknown to the others, and the
kernel, not the session id, picks the worker of each connection. So workers serve stateless
streamable HTTP (the SDK's ``stateless_http``): each POST is answered on its own, by whichever
worker accepts it. Protocol 2026-07-28 requests are self-contained anyway. What that costs:
no GET stream (no ``resources/subscribe`` notifications for 2025 clients), and a
``subscriptions/listen`` stream hears of changes made through its own worker only.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from smriti.config import Settings, load_settings
from smriti.errors import SmritiError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from smriti.server.auth import HttpAuth

logger = logging.getLogger("smriti.server")

# What each worker needs beyond the settings: {"host", "port", "no_auth"} as JSON. uvicorn's
# workers are spawned: they read the environment the supervisor had when it started them.
WORKER_ENV = "SMRITI_HTTP_WORKER"
ONE_PROCESS_BACKENDS = ("kuzu", "ladybug")


def _refuse(message: str, code: int = 2) -> None:
    print(f"smriti-mcp: {message}", file=sys.stderr)
    raise SystemExit(code)


def check_workers(settings: Settings, workers: int) -> None:
    """Refuse (exit 2) what several workers cannot serve, before any process starts."""
    if workers > 1 and not hasattr(os, "fork"):
        _refuse("--workers needs a POSIX system (shared file locks); run one worker here")
    if workers > 1 and settings.db_type in ONE_PROCESS_BACKENDS:
        _refuse(f"DB_TYPE={settings.db_type} opens a database in one process only: run --workers 1")


def _check_unlocked(settings: Settings) -> None:
    """Exit 1 when a process that must be alone (a stdio or shared server) holds the user's
    SQLite file: each worker would fail to start, and the supervisor would start it again forever."""
    from smriti.stores import resolve_auto
    from smriti.stores.paths import SQLITE_FILE, SharedLock, user_folder

    if settings.db_type not in ("auto", "sqlite"):
        return
    user = settings.accessing_user
    if settings.db_type == "auto" and resolve_auto(settings, user) != "sqlite":
        _refuse(
            f"user {user!r} has a Kuzu or LadybugDB store, which one process alone may open: run --workers 1"
        )
    lock_path = user_folder(settings.storage_location, user) / f"{SQLITE_FILE}.lock"
    if not lock_path.parent.is_dir():
        return  # a new user: nothing can hold it yet
    lock = SharedLock(lock_path)
    if not lock.acquire():
        _refuse(
            f"{SQLITE_FILE} of user {user!r} is held by a smriti server that must be alone (stdio or "
            f"shared); stop it first",
            code=1,
        )
    lock.release()


def serve_workers(settings: Settings, host: str, port: int, no_auth: bool, workers: int) -> None:
    """Run ``workers`` processes serving streamable HTTP on ``host:port`` until a signal arrives."""
    import uvicorn

    from smriti.server.auth import plan_http_auth
    from smriti.server.http_limits import uvicorn_limits
    from smriti.server.logs import configure_logging

    check_workers(settings, workers)
    configure_logging(settings.log_level)
    try:
        auth = plan_http_auth(settings, host, port, no_auth)  # a refused configuration stops here, once
    except SmritiError as error:
        _refuse(str(error))
    if auth is None:
        _check_unlocked(settings)
        logger.warning("serving without authentication (--no-auth): any local process can use this memory")
    os.environ["HTTP_WORKERS"] = str(workers)
    os.environ[WORKER_ENV] = json.dumps({"host": host, "port": port, "no_auth": no_auth})
    logger.info(
        "smriti-mcp: %d workers on %s, serving http://%s:%d/mcp", workers, settings.db_type, host, port
    )
    uvicorn.run(
        "smriti.server.workers:make_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=settings.log_level.lower(),
        log_config=None,  # uvicorn's default config would send access logs to stdout
        **uvicorn_limits(settings),
    )


def http_app(server: MCPServer, host: str, auth: HttpAuth | None, stateless: bool = False) -> Starlette:
    """The streamable HTTP app of ``server`` (stateless: every POST answered on its own, for
    workers that share no sessions; see :mod:`smriti.server.workers`)."""
    from smriti.server.auth import serve_resource_metadata

    app = server.streamable_http_app(host=host, stateless_http=stateless)
    if auth is not None:
        serve_resource_metadata(app, auth)
    return app


def closing_each_connection(app: ASGIApp) -> ASGIApp:
    """``app`` with ``Connection: close`` on every HTTP response, so that each request arrives
    on a new connection, which the kernel hands to whichever worker accepts it first.

    Why: the workers accept from one socket and an MCP client keeps its connection for its whole
    session, so the worker that accepted it served every request of it. Eight clients measured
    8/0, 7/1 and 6/2 connections between two workers, the busy one spending 4.5 CPU seconds on
    their recalls against 0-0.5 for the other; closing after each response split it 5.3 / 5.2
    (bench/RESULTS.md, "Stop 31"). The cost is a TCP handshake a request (~0.1 ms on loopback;
    behind a TLS-terminating proxy, the proxy keeps its clients' connections open).
    """

    async def closing(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        await app(scope, receive, send_closing)

    return closing


def make_app() -> ASGIApp:
    """The ASGI app of one worker (uvicorn calls this in each worker process)."""
    from smriti.server.app import build_server
    from smriti.server.auth import plan_http_auth
    from smriti.server.logs import configure_logging

    options: dict[str, Any] = json.loads(os.environ[WORKER_ENV])
    settings = load_settings()
    configure_logging(settings.log_level)
    auth = plan_http_auth(settings, options["host"], int(options["port"]), bool(options["no_auth"]))
    from smriti.blas import one_thread_for_this_process

    one_thread_for_this_process()  # the server's own process: see smriti/blas.py
    server = build_server(settings, auth=auth)
    return closing_each_connection(http_app(server, options["host"], auth, stateless=True))
