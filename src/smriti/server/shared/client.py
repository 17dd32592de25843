"""Finding, starting and stopping a user's shared Smriti server (the client side).

Every stdio ``smriti-mcp`` of one OS user and one ``STORAGE_LOCATION/{user}`` talks to one
server process, which alone opens the embedded database (see :mod:`smriti.server.shared.daemon`).
The files that coordinate them live in the user's storage folder:

* ``smriti.sock``: the server's unix socket (0600: only this OS user can connect);
* ``smriti-server.lock``: held (``flock``) by the running server for its whole life, so a
  crashed server's lock is free again at once and "socket there, nobody holds the lock" means
  stale;
* ``smriti-start.lock``: held by a client while it starts a server, so two clients starting at
  the same moment start one;
* ``smriti-server.json`` (pid, start time) and ``smriti-server.log`` (the server's stderr);
* ``smriti-initialize.json``: the server's answers to ``initialize``, which a relay gives a
  client before the server (or the MCP SDK) is ready (:mod:`smriti.server.shared.handshake`).

A socket path longer than a unix socket address allows (about 100 bytes) is replaced by one in
a private folder of the temporary directory, named after the storage folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import filelock

from smriti.config import path_environment, validate_user_name
from smriti.errors import StoreError, UserError

if TYPE_CHECKING:
    from smriti.config import Settings

logger = logging.getLogger("smriti.shared")

SOCKET_NAME = "smriti.sock"
BASE_URL = "http://localhost"  # the Host header the server admits; the socket decides where it goes
MCP_URL = f"{BASE_URL}/mcp"
START_TIMEOUT = 90.0  # a first start imports the pipelines and opens (maybe repairs) the database
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
_LOG_ROTATE_BYTES = 5 * 1024 * 1024


@dataclass(frozen=True)
class SharedPaths:
    """Where one user's shared server listens, locks, logs and records its state."""

    folder: Path
    socket: Path
    server_lock: Path
    start_lock: Path
    state: Path
    log: Path
    handshake: Path


def shared_paths(settings: Settings) -> SharedPaths:
    """The shared server's files for ``settings``' user (the user name is validated first).

    Raises:
        UnsafeUserError: the user name cannot be a folder name.
    """
    folder = settings.storage_location / validate_user_name(settings.accessing_user)
    sock = folder / SOCKET_NAME
    if len(os.fsencode(sock)) > _MAX_SOCKET_PATH:
        digest = hashlib.sha256(os.fsencode(folder.resolve())).hexdigest()[:20]
        sock = Path(tempfile.gettempdir()) / f"smriti-{os.getuid()}" / f"{digest}.sock"
    return SharedPaths(
        folder=folder,
        socket=sock,
        server_lock=folder / "smriti-server.lock",
        start_lock=folder / "smriti-start.lock",
        state=folder / "smriti-server.json",
        log=folder / "smriti-server.log",
        handshake=folder / "smriti-initialize.json",
    )


def prepare_folders(paths: SharedPaths) -> None:
    """Create the storage folder (and a private socket folder) with owner-only permissions."""
    paths.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if paths.socket.parent != paths.folder:
        paths.socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = paths.socket.parent.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise UserError(f"{paths.socket.parent} must belong to you with mode 0700 (it holds a socket)")


# ----------------------------------------------------------------------------- locks
def server_running(paths: SharedPaths) -> bool:
    """True while a shared server process holds its lock (alive, maybe still starting)."""
    if not paths.server_lock.exists():
        return False
    from smriti.stores.paths import process_lock, try_lock  # here: the relay's start skips numpy

    lock = process_lock(paths.server_lock)
    try:
        return not try_lock(lock)
    finally:
        lock.release()


@contextlib.contextmanager
def _start_lock(paths: SharedPaths, timeout: float) -> Iterator[None]:
    from smriti.stores.paths import process_lock

    lock = process_lock(paths.start_lock)
    try:
        lock.acquire(timeout=timeout, poll_interval=0.05)
    except filelock.Timeout:
        raise StoreError(f"another client has been starting the shared server for {timeout:.0f} s") from None
    try:
        yield
    finally:
        lock.release()


# ----------------------------------------------------------------------------- talking to it
def quiet_cancelled_socket_reads() -> None:
    """Keep a harmless race of anyio's unix socket streams out of the log (call in the loop).

    When a read on a unix socket is cancelled (a stream closed at the end of a session) just as
    data arrives, asyncio runs the reader callback on a future already cancelled and logs an
    ``InvalidStateError`` with a traceback; nothing is lost. TCP streams take another path.
    """
    import asyncio

    loop = asyncio.get_running_loop()

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if isinstance(context.get("exception"), asyncio.InvalidStateError):
            logger.debug("ignored a cancelled socket read: %s", context.get("message"))
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def http_client(paths: SharedPaths, timeout: float | None = 5.0) -> Any:
    """A synchronous httpx2 client whose every request goes to the server's socket."""
    import httpx2

    return httpx2.Client(
        transport=httpx2.HTTPTransport(uds=str(paths.socket)), base_url=BASE_URL, timeout=timeout
    )


def server_status(paths: SharedPaths, timeout: float = 2.0) -> dict[str, Any] | None:
    """The running server's ``/status``, or None when nothing answers on the socket."""
    if not paths.socket.exists():
        return None
    try:
        with http_client(paths, timeout) as client:
            response = client.get("/status")
    except Exception:  # refused, reset, timed out: not (yet) serving
        return None
    if response.status_code != 200:
        return None
    status: dict[str, Any] = response.json()
    return status


def serving(settings: Settings) -> SharedPaths | None:
    """The shared server's paths when one is serving ``settings``' user, else None."""
    if not settings.shared or not hasattr(socket, "AF_UNIX"):
        return None
    paths = shared_paths(settings)
    return paths if server_status(paths) is not None else None


def remove_stale(paths: SharedPaths) -> None:
    """Delete a dead server's socket and state (call only while its lock is free)."""
    for path in (paths.socket, paths.state):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            logger.info("removed %s", path)


# ----------------------------------------------------------------------------- starting it
def ensure_server(
    settings: Settings, timeout: float = START_TIMEOUT, spawned: threading.Event | None = None
) -> SharedPaths:
    """The paths of the user's serving shared server, started (detached) if none runs.
    ``spawned`` is set once a server process is running (started here or by another client),
    before it answers.

    Raises:
        StoreError: it could not be started (the server's own message, e.g. a database locked
            by an in-process ``smriti-mcp``, is in the error and in its log).
    """
    paths = shared_paths(settings)
    if (status := server_status(paths)) is not None:
        _warn_if_other_settings(status, settings)
        return paths
    prepare_folders(paths)
    with _start_lock(paths, timeout):
        deadline = time.monotonic() + timeout
        started: subprocess.Popen[bytes] | None = None
        while time.monotonic() < deadline:
            if server_status(paths) is not None:
                if started is not None:  # reap it when it exits, or it stays a zombie while we run
                    threading.Thread(target=started.wait, name="smriti-reap", daemon=True).start()
                return paths
            if started is not None and started.poll() is not None:
                raise StoreError(f"the shared Smriti server exited at start: {_last_error(paths.log)}")
            if started is None and not server_running(paths):
                remove_stale(paths)
                started = _spawn(paths, settings)
            if spawned is not None:
                spawned.set()
            time.sleep(0.1)
    if started is not None and started.poll() is None:
        started.kill()
    raise StoreError(f"the shared Smriti server did not answer within {timeout:.0f} s (see {paths.log})")


def start_server_early(settings: Settings) -> threading.Event:
    """Start the user's shared server in a background thread, if none serves; the event is set
    once a server process runs (or the attempt ended).

    Called by a stdio ``smriti-mcp`` as it starts, before it imports the MCP SDK: the server's
    start (imports, opening the store) overlaps the relay's instead of following it. The relay
    waits for the event (briefly) before that import: the checks before the spawn are Python,
    and beside the SDK's import, which holds the GIL, they took ~0.4 s instead of ~0.1 s. A
    client that starts the relay is about to talk to it; once attached, a relay still starts a
    stopped server only for a message. A failure here is only logged: the relay's own
    :func:`ensure_server` at the first message (which waits for this start, by the start lock)
    reports it to the client.
    """
    spawned = threading.Event()

    def start() -> None:
        try:
            ensure_server(settings, spawned=spawned)
        except Exception as error:  # why: reported to the client by the relay's own attempt
            logger.debug("starting the shared server early failed: %s", error)
        finally:
            spawned.set()

    threading.Thread(target=start, name="smriti-start-server", daemon=True).start()
    return spawned


def settings_digest(settings: Settings) -> str:
    """A digest of the settings that change what the server does (not how a client attaches)."""
    values = settings.model_dump(mode="json", exclude={"shared", "log_level"})
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


def _warn_if_other_settings(status: dict[str, Any], settings: Settings) -> None:
    # The first client's environment started the server; another client's differing settings
    # (a model, a backend) do not apply until it restarts. Say so rather than surprise later.
    if status.get("settings") not in (None, settings_digest(settings)):
        logger.warning(
            "the shared Smriti server (pid %s) runs with other settings than this client's; they "
            "stay in force until it restarts (`smriti stop`; the next client starts it with its own)",
            status.get("pid"),
        )


def _spawn(paths: SharedPaths, settings: Settings) -> subprocess.Popen[bytes]:
    """Start the server in a new session (no terminal, survives this client), logging to a file.

    It runs in the user folder, so it gets every path setting as the absolute value this
    client read (a relative STORAGE_LOCATION would otherwise be read again from there).
    """
    if paths.log.exists() and paths.log.stat().st_size > _LOG_ROTATE_BYTES:
        paths.log.replace(paths.log.with_suffix(".log.1"))
    fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "smriti.server", "--shared-daemon"],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=paths.folder,
            env=path_environment(settings, os.environ),
            start_new_session=True,  # its own session: a client's Ctrl-C or hang-up is not its
        )
    finally:
        os.close(fd)
    logger.info("started the shared Smriti server (pid %d), logging to %s", process.pid, paths.log)
    return process


def _last_error(log: Path) -> str:
    """The server's one-line start-up error from the end of its log, else its last line."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-50:]
    except OSError:
        return f"no log at {log}"
    for line in reversed(lines):
        if line.startswith("smriti-mcp: "):
            return line.removeprefix("smriti-mcp: ")
    return lines[-1] if lines else f"nothing in {log}"


# ----------------------------------------------------------------------------- stopping it
def stop_server(paths: SharedPaths, timeout: float = 30.0) -> dict[str, Any] | None:
    """Ask the shared server to shut down and wait until it has; returns its last status.

    Returns None when none was running (stale files are removed then).

    Raises:
        StoreError: it still runs after ``timeout`` seconds.
    """
    status = server_status(paths)
    if status is None:
        if not server_running(paths):
            remove_stale(paths)
            return None
        status = read_state(paths) or {}
        pid = status.get("pid")
        if isinstance(pid, int):  # holds the lock but does not answer: the lock's holder is this pid
            os.kill(pid, 15)
    else:
        with http_client(paths) as client:
            client.post("/shutdown")
    deadline = time.monotonic() + timeout
    while server_running(paths):
        if time.monotonic() > deadline:
            pid = status.get("pid")
            raise StoreError(f"the shared Smriti server (pid {pid}) still runs after {timeout:.0f} s")
        time.sleep(0.1)
    return status


def read_state(paths: SharedPaths) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads(paths.state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state
