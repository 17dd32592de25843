"""Finding, starting and stopping a user's shared Smriti server (the client side).

Every stdio ``smriti-mcp`` of one OS user and one ``STORAGE_LOCATION/{user}`` talks to one
server process, which alone opens the embedded database (see :mod:`smriti.server.shared.daemon`).
The files that coordinate them live in the user's storage folder:

* ``smriti.sock``: the server's unix socket (0600: only this OS user can connect), serving MCP's
  streamable HTTP (the CLI) and ``/status``;
* ``smriti-lines.sock``: the same server's JSON-RPC lines socket (0600), one MCP connection per
  socket connection, newline-delimited as on stdio: what the stdio relay passes its client's
  lines to unchanged (:mod:`smriti.server.shared.relay`);
* ``smriti-server.lock``: held (``flock``) by the running server for its whole life, so a
  crashed server's lock is free again at once and "socket there, nobody holds the lock" means
  stale;
* ``smriti-start.lock``: held by a client while it starts a server, so two clients starting at
  the same moment start one;
* ``smriti-starting.json``: the pid of the server a client started and when, until it serves: a
  client that exits before its server is up (it listed the tools from the kept answers and
  left) lets go of the start lock, and the next client waits for that server while its process
  lives instead of starting a second one;
* ``smriti-server.json`` (pid, start time) and ``smriti-server.log`` (the server's stderr);
* ``smriti-answers.json``: the server's answers to ``initialize`` and ``tools/list``, which a
  relay gives a client before the server is ready (:mod:`smriti.server.shared.kept`).

A socket path longer than a unix socket address allows (about 100 bytes) is replaced by one in
a private folder of the temporary directory, named after the storage folder.

This module imports only the standard library (and :mod:`smriti.errors`): the stdio relay,
whose start a client waits for, uses it, and so does the CLI (:mod:`smriti.server.shared.calls`);
``http_client`` (``smriti stop``) imports httpx2 when called.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from smriti.errors import StoreError, UserError, default_user, make_folder, validate_user_name
from smriti.server.shared.starting import alive, starting_pid, write_marker

logger = logging.getLogger("smriti.shared")

SOCKET_NAME = "smriti.sock"
LINES_SOCKET_NAME = "smriti-lines.sock"
BASE_URL = "http://localhost"  # the Host header the server admits; the socket decides where it goes
MCP_URL = f"{BASE_URL}/mcp"
START_TIMEOUT = 90.0  # a first start imports the pipelines and opens (maybe repairs) the database
_MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
_LOG_ROTATE_BYTES = 5 * 1024 * 1024
SPAWNING = threading.Lock()  # held from a server's spawn until its start marker is written


class UserPlace(Protocol):
    """Whose shared server, and where: :class:`~smriti.config.Settings` or :class:`Attachment`."""

    @property
    def accessing_user(self) -> str: ...

    @property
    def storage_location(self) -> Path: ...


_TRUE = frozenset(("1", "on", "t", "true", "y", "yes"))  # what pydantic reads as a bool
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


@dataclass(frozen=True)
class Attachment:
    """What a stdio relay reads from the environment: whose server, where, and how to log.

    Read without :class:`~smriti.config.Settings` (pydantic alone costs a cold relay ~0.4 s);
    the shared server validates every setting when it starts and reports what it refuses.
    """

    accessing_user: str
    storage_location: Path
    log_level: str

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Attachment | None:
        """The relay's attachment, or None when stdio must be served in-process: SMRITI_SHARED
        (or SHARED) is off, or not a boolean (the full settings then say so), or no unix sockets.
        """
        env = _lowered(os.environ if environ is None else environ)
        shared = env.get("smriti_shared", env.get("shared", "true")).strip().lower()
        if shared not in _TRUE or not hasattr(socket, "AF_UNIX"):  # off, or not a boolean
            return None
        level = env.get("log_level", "INFO")
        if level not in _LOG_LEVELS:  # refused by the settings: let them say so
            return None
        return cls(
            accessing_user=env.get("accessing_user") or default_user(),
            # absolute: the server it starts runs in the user folder (see _spawn)
            storage_location=Path(absolute_path(env.get("storage_location") or "~/.smriti")),
            log_level=level,
        )

    @classmethod
    def of(cls, settings: Any) -> Attachment:
        """The attachment of validated :class:`~smriti.config.Settings`."""
        return cls(settings.accessing_user, settings.storage_location, settings.log_level)


def absolute_path(text: str) -> str:
    """A path setting as every process reads it: ``~`` expanded and made absolute here. The rule
    of :func:`smriti.config.section.absolute_path`, in the standard library (the relay reads no
    settings): ``abspath``, so ".." is folded but a symlinked folder keeps its name."""
    return os.path.abspath(os.path.expanduser(text))


# The path settings (names as Settings reads them): a server started elsewhere must get them
# absolute. tests/test_paths.py checks this is every Path field of Settings.
PATH_SETTINGS = ("STORAGE_LOCATION", "SMRITI_TOKENS_FILE")


def path_environment(environ: Mapping[str, str], storage_location: Path) -> dict[str, str]:
    """``environ`` for the shared server this client starts: ``storage_location`` (this client's,
    already absolute) and every other path setting that is set, made absolute where this client
    runs (the server starts in the user folder). Variants of a name in another case are dropped,
    since the settings read names case-insensitively."""
    env = _lowered(environ)
    paths = {"STORAGE_LOCATION": str(storage_location)}
    for name in PATH_SETTINGS:
        if name not in paths and env.get(name.lower()):
            paths[name] = absolute_path(env[name.lower()])
    child = {key: value for key, value in environ.items() if key.upper() not in paths}
    return {**child, **paths}


def _lowered(environ: Mapping[str, str]) -> dict[str, str]:
    # Settings reads the environment case-insensitively (and a later name wins, as there).
    return {key.lower(): value for key, value in environ.items()}


def environment_digest(names: list[str], environ: Mapping[str, str] | None = None) -> str:
    """A digest of the settings that change what a server does (``names``: see
    :func:`smriti.config.setting_env_names`), read raw from ``environ``.

    Raw, not validated: the relay never imports the settings. The shared server inherits the
    environment of the relay that started it, so the two digests agree when the settings do.
    """
    env = _lowered(os.environ if environ is None else environ)
    values = {name: env.get(name) for name in sorted(set(names))}
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class SharedPaths:
    """Where one user's shared server listens, locks, logs and records its state."""

    folder: Path
    socket: Path
    lines: Path
    server_lock: Path
    start_lock: Path
    state: Path
    log: Path
    answers: Path
    starting: Path


def shared_paths(settings: UserPlace) -> SharedPaths:
    """The shared server's files for ``settings``' user (the user name is validated first).

    Raises:
        UnsafeUserError: the user name cannot be a folder name.
    """
    folder = settings.storage_location / validate_user_name(settings.accessing_user)
    sock, lines = folder / SOCKET_NAME, folder / LINES_SOCKET_NAME
    if len(os.fsencode(lines)) > _MAX_SOCKET_PATH:
        digest = hashlib.sha256(os.fsencode(folder.resolve())).hexdigest()[:20]
        private = Path(os.environ.get("TMPDIR") or "/tmp") / f"smriti-{os.getuid()}"
        sock, lines = private / f"{digest}.sock", private / f"{digest}.lines.sock"
    return SharedPaths(
        folder=folder,
        socket=sock,
        lines=lines,
        server_lock=folder / "smriti-server.lock",
        start_lock=folder / "smriti-start.lock",
        state=folder / "smriti-server.json",
        log=folder / "smriti-server.log",
        answers=folder / "smriti-answers.json",
        starting=folder / "smriti-starting.json",
    )


def prepare_folders(paths: SharedPaths) -> None:
    """Create the storage folder (and a private socket folder) with owner-only permissions.

    Raises:
        FolderNotWritable: the storage folder cannot be created or written (one line).
    """
    make_folder(paths.folder, mode=0o700)
    if paths.socket.parent != paths.folder:
        paths.socket.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = paths.socket.parent.stat()
        if info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise UserError(f"{paths.socket.parent} must belong to you with mode 0700 (it holds a socket)")


# ----------------------------------------------------------------------------- locks
# flock on the lock files, as smriti.stores.paths.process_lock (filelock) takes them in the
# server: the same kernel lock, taken here with the standard library only (see the docstring).
def _try_flock(path: Path) -> int | None:
    """An fd holding an exclusive flock on ``path``, or None when another holder has it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def server_running(paths: SharedPaths) -> bool:
    """True while a shared server process holds its lock (alive, maybe still starting)."""
    if not paths.server_lock.exists():
        return False
    fd = _try_flock(paths.server_lock)
    if fd is None:
        return True
    os.close(fd)  # closing releases the flock
    return False


@contextlib.contextmanager
def _start_lock(paths: SharedPaths, timeout: float) -> Iterator[None]:
    deadline = time.monotonic() + timeout
    while (fd := _try_flock(paths.start_lock)) is None:
        if time.monotonic() > deadline:
            raise StoreError(f"another client has been starting the shared server for {timeout:.0f} s")
        time.sleep(0.05)
    try:
        yield
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- talking to it
def http_client(paths: SharedPaths, timeout: float | None = 5.0) -> Any:
    """A synchronous httpx2 client whose every request goes to the server's socket."""
    import httpx2

    return httpx2.Client(
        transport=httpx2.HTTPTransport(uds=str(paths.socket)), base_url=BASE_URL, timeout=timeout
    )


def server_status(paths: SharedPaths, timeout: float = 2.0, memory: bool = False) -> dict[str, Any] | None:
    """The running server's ``/status``, or None when nothing answers on the socket.

    One HTTP/1.0 exchange written by hand: http.client or httpx2 would cost the relay's start
    more than the exchange itself. ``memory`` asks for the memory's counts too (a database
    read: ``smriti status``, never the relay).
    """
    if not paths.socket.exists():
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(paths.socket))
            target = b"/status?memory=1" if memory else b"/status"
            sock.sendall(b"GET " + target + b" HTTP/1.0\r\nHost: localhost\r\n\r\n")
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
    except OSError:  # refused, reset, timed out: not (yet) serving
        return None
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    if head.split(b" ", 2)[1:2] != [b"200"]:
        return None
    try:
        status = json.loads(body)
    except ValueError:
        return None
    return status if isinstance(status, dict) else None


def serving(settings: Any) -> SharedPaths | None:
    """The shared server's paths when one is serving ``settings``' user, else None."""
    if not settings.shared or not hasattr(socket, "AF_UNIX"):
        return None
    paths = shared_paths(settings)
    return paths if server_status(paths) is not None else None


def remove_stale(paths: SharedPaths) -> None:
    """Delete a dead server's sockets and state (call only while its lock is free)."""
    for path in (paths.socket, paths.lines, paths.state, paths.starting):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            logger.info("removed %s", path)


# ----------------------------------------------------------------------------- starting it
def ensure_server(settings: UserPlace, timeout: float = START_TIMEOUT) -> SharedPaths:
    """The paths of the user's serving shared server, started (detached) if none runs.

    Exactly one server per user: under the start lock, a server that holds the server lock
    (serving or not yet) or that a client started and that still lives (``smriti-starting.json``:
    its client may have exited since) is waited for, never doubled. A server this client started
    that exits because another took the server lock first (a service's, say) is no failure: the
    other is waited for.

    Raises:
        StoreError: it could not be started (the server's own message, e.g. a database locked
            by an in-process ``smriti-mcp``, is in the error and in its log).
    """
    paths = shared_paths(settings)
    if (status := server_status(paths)) is not None:
        _warn_if_other_settings(status)
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
                if not server_running(paths):
                    raise StoreError(f"the shared Smriti server exited at start: {_last_error(paths.log)}")
                started = None  # another server took the lock first: wait for that one
            if (
                started is None
                and not server_running(paths)
                and starting_pid(paths.starting, START_TIMEOUT) is None
            ):
                remove_stale(paths)
                with SPAWNING:  # the relay does not exit between the spawn and its marker
                    started = _spawn(paths)
                    write_marker(paths.starting, started.pid)
            time.sleep(0.05)
    if started is not None and started.poll() is None:
        started.kill()
    raise StoreError(f"the shared Smriti server did not answer within {timeout:.0f} s (see {paths.log})")


def spawn_settled(timeout: float = 5.0) -> None:
    """Wait until no spawn of this process is between the child's start and its marker (call
    before ``os._exit``: a marker never written would let the next client start a second)."""
    if SPAWNING.acquire(timeout=timeout):
        SPAWNING.release()


def _warn_if_other_settings(status: dict[str, Any]) -> None:
    # The first client's environment started the server; another client's differing settings
    # (a model, a backend) do not apply until it restarts. Say so rather than surprise later.
    names = status.get("setting_names")
    if isinstance(names, list) and status.get("settings") != environment_digest(names):
        logger.warning(
            "the shared Smriti server (pid %s) runs with other settings than this client's; they "
            "stay in force until it restarts (`smriti stop`; the next client starts it with its own)",
            status.get("pid"),
        )


def _spawn(paths: SharedPaths) -> subprocess.Popen[bytes]:
    """Start the server in a new session (no terminal, survives this client), logging to a file.

    It runs in the user folder, so it gets every path setting as the absolute value this
    client read (a relative STORAGE_LOCATION would otherwise be read again from there):
    :func:`path_environment`.
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
            env=path_environment(os.environ, paths.folder.parent),
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
    pid = status.get("pid")
    # Until that server is gone: a service's server waiting for the lock takes it at once.
    while server_running(paths) and (not isinstance(pid, int) or alive(pid)):
        if time.monotonic() > deadline:
            raise StoreError(f"the shared Smriti server (pid {pid}) still runs after {timeout:.0f} s")
        time.sleep(0.1)
    return status


def read_state(paths: SharedPaths) -> dict[str, Any] | None:
    try:
        state: dict[str, Any] = json.loads(paths.state.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return state
