"""Where a user's store lives, the same for every embedded backend, and the locks that keep
one process on a file (the embedded stores, the shared server) or let several HTTP workers
share it (:class:`SharedLock`, SQLite only).

``STORAGE_LOCATION/{user}/{file}``: ``memory.sqlite`` (SQLite), ``memory.kuzu`` (Kuzu) or
``memory.lbug`` (LadybugDB, the Go original's files). Kept apart from the backends so opening
one never imports another's modules.
"""

from __future__ import annotations

import os
from pathlib import Path

import filelock

from smriti.errors import UnsafeUserError, make_folder
from smriti.stores.base import validate_user_name

SQLITE_FILE = "memory.sqlite"
KUZU_FILE = "memory.kuzu"
LADYBUG_FILE = "memory.lbug"


def user_folder(storage_location: Path | str, user: str) -> Path:
    """The folder of ``user``'s files (not checked or created: see :func:`store_path`)."""
    return Path(storage_location).expanduser() / user


def store_path(storage_location: Path | str, user: str, file_name: str) -> Path:
    """The store file of ``user``, after checking it cannot leave ``storage_location``.

    Creates the user folder (only after the checks).

    Raises:
        UnsafeUserError: the name is refused, or the user folder resolves elsewhere (a symlink).
        FolderNotWritable: the user folder cannot be created or written by this process.
    """
    validate_user_name(user)
    root = Path(storage_location).expanduser().resolve()
    path = (root / user / file_name).resolve()
    if not path.is_relative_to(root) or path.parent.name != user or path.parent.parent != root:
        raise UnsafeUserError(f"the store of user {user!r} would resolve outside {root}: {path}")
    make_folder(path.parent)
    return path


def process_lock(path: Path) -> filelock.BaseFileLock:
    """An exclusive lock on ``path`` (flock on POSIX) that a second process, or a second
    ``process_lock`` in this one, cannot take while it is held; 0600, released when the holder
    dies. Not a singleton (each call is its own holder, as each process is); the file stays
    (unlinking a lock file lets a third process lock a new file while the second holds the
    old one); no soft fallback (a soft lock outlives a killed holder)."""
    return filelock.FileLock(
        path,
        mode=0o600,
        is_singleton=False,
        thread_local=False,
        preserve_lock_file=True,
        fallback_to_soft=False,
    )


def try_lock(lock: filelock.BaseFileLock) -> bool:
    """Take ``lock`` without waiting; False when another holder has it."""
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        return False
    return True


class SharedLock:
    """A shared ``flock`` on ``path``: any number of holders (the HTTP workers serving one
    memory), none while a :func:`process_lock` holds it, and no :func:`process_lock` while one
    is held (flock's shared and exclusive modes, so the two kinds of server never mix).
    Released when the holder dies. POSIX only (``--workers`` is refused elsewhere)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; False when an exclusive holder has it."""
        import fcntl

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases its flock
            self._fd = None
