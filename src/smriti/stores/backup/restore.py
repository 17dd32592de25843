"""Restore: pull the latest backup into the local store.

Order matters so that no step can leave the user with less than they had:

1. download the snapshot to a local file (retried like a sync) and check it completely
   (JSON, record kinds, embedding dimension, sha256 against the manifest);
2. under the write lock: an empty store is filled; a store already equal to the backup is
   left alone; any other store is refused unless ``force``, in which case its current
   content is first exported next to it (``before-restore-<time>.jsonl``) and then cleared;
3. import, then export again to check the round trip (``verified``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.stores.backup.remote import BackupError, NoBackupFound, RestoreRefused
from smriti.stores.base import utcnow
from smriti.stores.records import RecordDimensionError, RecordFormatError, import_into, parse_lines

if TYPE_CHECKING:
    from smriti.stores.backup.sync import Backup
    from smriti.stores.base import GraphStore


def restore(backup: Backup, force: bool) -> dict[str, Any]:
    """Restore ``backup``'s latest snapshot into its store (the caller serialises syncs and restores).

    Raises:
        NoBackupFound: nothing was ever pushed for this user.
        RestoreRefused: the local memory is not empty and differs from the backup.
        BackupError: the remote failed after retries, or the backup is damaged.
    """
    store, location = backup.store, backup.remote.location
    download = backup.state_dir / ".backup-restore.jsonl"
    current = backup.state_dir / ".backup-local.jsonl"
    try:
        manifest, attempts = backup.retrying(backup.remote.fetch, download)
        if manifest is None:
            raise NoBackupFound(
                f"no backup of user {store.user!r} at {location} yet: run `smriti sync` first"
            )
        sha = _sha256(download)
        if manifest.get("sha256") and manifest["sha256"] != sha:
            raise BackupError(
                f"the backup at {location} is damaged: memory.jsonl does not match its manifest"
            )
        records = read_snapshot(download, backup.embedding_dims)
        saved_to = ""
        with backup.write_lock:
            if not _is_empty(store):
                local_sha, local_counts = backup.snapshot(current)
                if local_sha == sha:
                    backup.save_state(last_pushed_sha256=sha)
                    return {"restored": False, "reason": "already up to date", "location": location}
                if not force:
                    raise RestoreRefused(
                        f"the local memory of user {store.user!r} is not empty "
                        f"({local_counts['engrams']} memories, {local_counts['cues']} cues) and differs "
                        f"from the backup: refusing to overwrite it; use `smriti restore --force`"
                    )
                stamp = utcnow().strftime("%Y%m%dT%H%M%S")
                saved = backup.state_dir / f"before-restore-{stamp}.jsonl"
                current.replace(saved)
                saved_to = str(saved)
                clear_store(store)
            import_into(store, records)
            restored_sha, counts = backup.snapshot(current)
    finally:
        download.unlink(missing_ok=True)
        current.unlink(missing_ok=True)
    verified = restored_sha == sha
    now = utcnow().isoformat()
    record = {"time": now, "revision": str(manifest.get("revision", "")), "backup_time": manifest.get("time")}
    # A verified restore equals the backup, so the next sync has nothing to push.
    backup.save_state(last_restore=record, **({"last_pushed_sha256": sha} if verified else {}))
    return {
        "restored": True,
        "location": location,
        "backup_time": manifest.get("time"),
        "revision": record["revision"],
        "counts": counts,
        "verified": verified,
        "forced": bool(saved_to),
        "previous_memory_saved_to": saved_to,
        "attempts": attempts,
    }


def _is_empty(store: GraphStore) -> bool:
    return store.count_engrams() == 0 and store.stats().cues == 0


def clear_store(store: GraphStore) -> None:
    """Delete every engram (with its edges), then the cues left without engrams."""
    for state in store.engram_states():
        store.delete_engram(state.id)
    store.delete_orphan_cues()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_snapshot(path: Path, embedding_dims: int | None) -> list[dict[str, Any]]:
    """Parse a downloaded snapshot completely before anything is written.

    Raises:
        BackupError: a line is not a Smriti record, or embeddings have another dimension.
    """
    try:
        with path.open(encoding="utf-8") as stream:
            return parse_lines(stream, embedding_dims)
    except RecordFormatError as error:
        hint = ": restore with the same embedding model" if isinstance(error, RecordDimensionError) else ""
        raise BackupError(f"backup {error}{hint}") from None
