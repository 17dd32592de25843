"""What a backup remote is: the two files it moves, the :class:`Remote` protocol the
providers (:mod:`~smriti.stores.backup.git`, :mod:`~smriti.stores.backup.s3`) implement,
and the errors every part of a backup raises.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

# Defined with every other error in smriti.errors; re-exported here for the backup modules.
from smriti.errors import BackupError as BackupError
from smriti.errors import NoBackupFound as NoBackupFound
from smriti.errors import RemoteError as RemoteError
from smriti.errors import RestoreRefused as RestoreRefused

SNAPSHOT_NAME = "memory.jsonl"
MANIFEST_NAME = "manifest.json"


class Remote(Protocol):
    """Moves the two backup files to and from one remote location."""

    location: str
    # Set by the backup around a sync (time.monotonic() seconds): no call may run past it.
    deadline: float | None

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
