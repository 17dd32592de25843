"""The start marker: which shared server a client started, while that server is starting.

A client starts the user's shared server under the start lock and waits for it to serve. A
client that exits first (it listed the tools from the kept answers and left) lets go of the lock
while the server is still importing, before it takes the server lock; the next client would find
neither a server serving nor one holding the lock, and start a second. So the client that
starts a server writes its pid here (``smriti-starting.json``) right after the spawn, and the
next client waits for that process while it lives; the server removes the marker once it holds
the server lock (:mod:`smriti.server.shared.daemon`). The standard library only: the relay
uses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path


def write_marker(path: Path, pid: int) -> None:
    """Record ``pid`` as the server starting now (mode 0600, whole or not at all: a rename)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"pid": pid, "spawned": time.time()}, handle)
    os.replace(temporary, path)


def starting_pid(path: Path, within: float) -> int | None:
    """The pid the marker at ``path`` names, when it was written less than ``within`` seconds
    ago and that process is a shared server still running; else None."""
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
        pid, spawned = int(marker["pid"]), float(marker["spawned"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not 0 <= time.time() - spawned < within or not _is_shared_server(pid):
        return None
    return pid


def forget_marker(path: Path, pid: int) -> None:
    """The server ``pid`` holds the server lock: its marker, if still the one there, goes."""
    try:
        marker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if isinstance(marker, dict) and marker.get("pid") == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _is_shared_server(pid: int) -> bool:
    """Whether ``pid`` runs and, where ``/proc`` tells, is a shared server (a pid reused by
    another program is not)."""
    if not alive(pid):
        return False
    try:
        return b"--shared-daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()  # no /proc (macOS): alive is all we know
    except OSError:
        return False


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return False
    except OSError:
        pass
    else:
        return stat.rpartition(b")")[2].split()[:1] != [b"Z"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
