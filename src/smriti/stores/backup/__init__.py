"""Backups of one user's memory: ``none``, ``github`` (system git) and ``s3`` (boto3).

What is pushed is always a consistent snapshot, never a database file copied mid-write:
the portable JSON Lines export (:mod:`smriti.stores.records`), taken under the memory's
write lock into a local file, hashed, and only then sent to the remote with the lock
released, so a slow or dead remote never blocks local writes. A sync whose export hash
equals the last pushed one is skipped (``pushed: false, reason: "unchanged"``).

Each remote holds two files per user: ``memory.jsonl`` (the snapshot) and
``manifest.json`` (sha256, counts and time of that snapshot, written last). Providers only
move those files (:class:`Remote`); retries, hashing, bookkeeping and restore live in
:class:`Backup`. What each sync did is kept in ``STORAGE_LOCATION/{user}/backup-state.json``
so a restart neither re-pushes an unchanged memory nor forgets the last error.

The package's seam is this module; inside it:

* :mod:`.remote`: the file names, the :class:`Remote` protocol and the errors;
* :mod:`.sync`: :class:`Backup` (snapshot, sync, status) and :func:`make_backup`;
* :mod:`.restore`: pulling a backup into the local store, safely;
* :mod:`.git` and :mod:`.s3`: the two providers (imported when BACKUP_TYPE selects them).
"""

from smriti.stores.backup.remote import (
    MANIFEST_NAME,
    SNAPSHOT_NAME,
    BackupError,
    NoBackupFound,
    Remote,
    RemoteError,
    RestoreRefused,
)
from smriti.stores.backup.sync import Backup, RetryPolicy, SyncResult, make_backup

__all__ = [
    "MANIFEST_NAME",
    "SNAPSHOT_NAME",
    "Backup",
    "BackupError",
    "NoBackupFound",
    "Remote",
    "RemoteError",
    "RestoreRefused",
    "RetryPolicy",
    "SyncResult",
    "make_backup",
]
