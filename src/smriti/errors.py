"""Every error Smriti raises on purpose, under one root.

Entry points (the MCP server, the CLI, the LangChain tools) catch :class:`SmritiError` once
and word it for people; anything else is a bug and keeps its traceback in the log.

Two branches tell the caller what to do next:

* :class:`UserError`: the request, the configuration or the data given cannot be used as
  it is. Nothing was changed; the user must change something. CLI exit code 2.
* :class:`OperationError`: a store, a model provider or a backup remote failed while doing
  what was asked. The request was fine; retrying later may work. CLI exit code 1.

The classes live here so every module agrees on the tree; the modules that used to define
them (``smriti.stores.base``, ``smriti.stores.backup``, ``smriti.config``, ...) re-export
them, so existing imports keep working.
"""

from __future__ import annotations

import getpass
import os
import re
from pathlib import Path


class SmritiError(Exception):
    """Root of every error Smriti raises on purpose."""

    exit_code = 1


# ----------------------------------------------------------------------------- user errors
class UserError(SmritiError):
    """Bad input, configuration or a refused request: nothing was changed."""

    exit_code = 2


class InvalidInput(UserError, ValueError):
    """A request that cannot be carried out as asked (nothing was changed)."""


class NotFound(UserError, LookupError):
    """No memory with that id for this user."""

    exit_code = 1  # like grep: the request was well formed, nothing matched


class SettingsError(UserError, ValueError):
    """One or more environment variables are invalid (one line per variable)."""


class UnsafeUserError(UserError, ValueError):
    """The user name cannot be used as a folder, database or graph name."""


class FolderNotWritable(UserError, PermissionError):
    """The memory's folder cannot be created or written by this process (see :func:`make_folder`)."""


class RecordFormatError(InvalidInput):
    """A line of a JSON Lines export that is not a valid Smriti record."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class RecordDimensionError(RecordFormatError):
    """An imported embedding has another dimension than the store's."""


class EmbedderUnknown(SettingsError):
    """A store with memories records no embedding model, and none was configured (only an
    offline fallback could open it, and recording that guess would lock the store to it)."""


class BackupDisabled(InvalidInput):
    """A backup operation was asked for while ``BACKUP_TYPE=none``."""


# ----------------------------------------------------------------------------- operation errors
class OperationError(SmritiError, RuntimeError):
    """A store, model or backup failure while carrying out a valid request."""

    exit_code = 1


class StoreError(OperationError):
    """A backend failed in a way the caller should report (not a bug in the caller)."""


class EmbeddingMismatchError(StoreError):
    """The store was written with another embedding model or dimension."""


class StoreFull(StoreError):
    """The disk holding an embedded store is full, or nearly (below MIN_FREE_DISK_MB): nothing
    was written, what was stored before is intact, and writes work again once space is freed."""


class Busy(OperationError):
    """Another process holds the memory for the same work (a consolidation) and did not finish
    within the wait: nothing was done; trying again once it is done works."""


class TooManyUsers(OperationError):
    """A multi-user server has MAX_OPEN_USERS memories open, each with a request in flight."""


class ProviderError(OperationError):
    """A chat or embedding model could not be built or called."""


class BackupError(StoreError):
    """A backup or restore failed; the local memory is intact."""


class RemoteError(BackupError):
    """The backup remote could not be reached or refused the operation."""


class NoBackupFound(BackupError):
    """The remote holds no backup for this user."""


class RestoreRefused(UserError, BackupError):
    """A restore would overwrite local memories and was not forced: nothing was changed, and
    the user decides (``--force``), so it is a user error (exit 2) that backup code still
    catches as a :class:`BackupError`."""


def first_smriti_error(error: BaseException) -> SmritiError | None:
    """``error`` itself or the first SmritiError inside (nested) exception groups, else None.

    Task groups (the server's lifespan) wrap what they raise in exception groups; the
    message a person needs is the Smriti error inside.
    """
    if isinstance(error, SmritiError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = first_smriti_error(inner)
            if found is not None:
                return found
    return None


# ----------------------------------------------------------------------------- user names
# Here rather than in config: the stdio relay (server/shared/relay.py) resolves the user's
# folder without importing pydantic, and these are the only rules it needs.

# A user name becomes a folder, a database or a graph name: keep it to a conservative
# alphabet so it can never escape its folder or name somebody else's graph.
_USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def validate_user_name(user: str) -> str:
    """Return ``user`` if it is safe as a folder, database and graph name.

    Refuses empty names, absolute paths, path separators, ``..`` and anything outside
    ``[A-Za-z0-9._-]`` (at most 64 characters, first character alphanumeric).

    Raises:
        UnsafeUserError: naming the problem.
    """
    if not user or not user.strip():
        raise UnsafeUserError("user name is empty (set ACCESSING_USER)")
    if "/" in user or "\\" in user or user.startswith("~"):
        raise UnsafeUserError(f"user name {user!r} contains a path separator")
    if ".." in user:
        raise UnsafeUserError(f"user name {user!r} contains '..'")
    if not _USER_NAME.fullmatch(user):  # why fullmatch: "$" also matches before a final newline
        raise UnsafeUserError(
            f"user name {user!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return user


def default_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (some containers): still start, as a named default
        return "default"


# ----------------------------------------------------------------------------- the memory's folder
# Here for the same reason: the relay creates the user's folder (its sockets live there) with
# the standard library only, and the servers and stores apply the same check.


def make_folder(folder: Path, mode: int = 0o777) -> Path:
    """Create ``folder`` (and its parents; ``mode`` less the umask) if needed and check this
    process can write in it.

    A folder this process cannot write fails at once with one line that says whose it is and
    what to do, rather than a traceback from whichever write comes first: Docker creates a
    missing volume folder as root's, and the image's user cannot write it.

    Raises:
        FolderNotWritable: it cannot be created, or is not writable and searchable.
    """
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=mode)
    except FileExistsError:
        raise FolderNotWritable(f"the memory folder {folder} is a file, not a folder") from None
    except PermissionError:
        raise FolderNotWritable(_not_writable(folder)) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise FolderNotWritable(_not_writable(folder))
    return folder


def _not_writable(folder: Path) -> str:
    """Whose the blocking folder is (the nearest that exists) and what would let this user in."""
    existing = folder
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    try:
        info = existing.stat()
        owner = f"owned by uid {info.st_uid} with mode {info.st_mode & 0o777:o}"
    except OSError:
        owner = "not readable"
    uid = os.getuid() if hasattr(os, "getuid") else "this user"
    return (
        f"cannot write the memory folder {folder}: {existing} is {owner} and this process runs as "
        f"uid {uid}; make it writable for uid {uid} (chown -R {uid} {existing}; for a container's "
        "volume, the host folder mounted there) or set STORAGE_LOCATION to a folder it can write"
    )
