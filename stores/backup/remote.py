"""What a backup remote is: the two files it moves, the :class:`Remote` protocol the
providers (:mod:`~smriti.stores.backup.git`, :mod:`~smriti.stores.backup.s3`) implement,
and the errors every part of a backup raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from smriti.stores.base import StoreError

SNAPSHOT_NAME = "memory.jsonl"
MANIFEST_NAME = "manifest.json"


class BackupError(StoreError):
    """A backup operation failed; the message is one line meant for the user."""


class RemoteError(BackupError):
    """The remote failed (network, auth, conflict): worth retrying, local data untouched."""


class NoBackupFound(BackupError):
    """The remote holds no backup for this user yet."""


class RestoreRefused(BackupError):
    """Restoring would overwrite a non-empty local memory and ``force`` was not given."""


class Remote(Protocol):
    """Moves the two backup files to and from one remote location."""

    location: str

    def push(self, snapshot: Path, manifest: dict[str, Any]) -> dict[str, Any]:
        """Store ``snapshot`` then ``manifest``; idempotent; returns at least ``revision``.

        Raises:
            RemoteError: retryable failure. BackupError: anything else.
        """
        ...

    def fetch(self, target: Path) -> dict[str, Any] | None:
        """Write the latest good snapshot to ``target``; its manifest, or None if there is none."""
        ...

    def manifest(self) -> dict[str, Any] | None:
        """The latest manifest without downloading the snapshot (None: no backup yet)."""
        ...
