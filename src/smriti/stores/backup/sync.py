"""Sync of one user's memory to a :class:`~smriti.stores.backup.remote.Remote`: snapshot,
hash, push with retries, and the local bookkeeping (see the package docstring).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential,
)
from tenacity.stop import stop_base

from smriti.stores.backup.remote import BackupError, Remote, RemoteError
from smriti.stores.base import utcnow, validate_user_name
from smriti.stores.records import LOCAL_META_KEYS

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.stores.base import GraphStore

logger = logging.getLogger("smriti.backup")

EDGE_KINDS = ("encoded_by", "associated_with", "co_occurs", "relates_to")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failing remote is retried (tests shrink the delays)."""

    attempts: int = 3
    initial_delay: float = 1.0
    max_delay: float = 15.0


@dataclass
class SyncResult:
    """What one sync did; ``revision`` is the git commit sha or the S3 VersionId (else ETag)."""

    pushed: bool
    reason: str
    sha256: str = ""
    counts: dict[str, int] = field(default_factory=dict)
    time: str = ""
    revision: str = ""
    location: str = ""
    attempts: int = 0
    error: str = ""


class Backup:
    """Sync and restore one user's store through a :class:`Remote`.

    Args:
        store: the user's open store.
        remote: where the files go.
        state_dir: local folder for ``backup-state.json`` and temporary snapshots.
        kind: BACKUP_TYPE, for status.
        lock: the memory's write lock; held only while the snapshot is taken or restored.
        on_restored: called after a restore (e.g. to drop caches built from the old graph).
        retry: retry policy for the remote.
        embedding_dims: checked against the backup before anything is restored.
    """

    def __init__(
        self,
        store: GraphStore,
        remote: Remote,
        state_dir: Path,
        *,
        kind: str,
        lock: AbstractContextManager[Any] | None = None,
        on_restored: Callable[[], Any] | None = None,
        retry: RetryPolicy | None = None,
        embedding_dims: int | None = None,
        sync_timeout: float = 60.0,
    ) -> None:
        self.store, self.remote, self.kind = store, remote, kind
        self.sync_timeout = sync_timeout
        self.state_dir = Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.write_lock = lock if lock is not None else nullcontext()
        self._on_restored = on_restored
        self.retry = retry or RetryPolicy()
        self.embedding_dims = embedding_dims
        self._busy = threading.Lock()  # one sync or restore at a time (periodic vs on demand)
        self._state_path = self.state_dir / "backup-state.json"
        self._state = self._load_state()

    # ------------------------------------------------------------------ state
    def _load_state(self) -> dict[str, Any]:
        try:
            return json.loads(self._state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def save_state(self, **changes: Any) -> None:
        self._state.update(changes)
        partial = self._state_path.with_name(self._state_path.name + ".partial")
        partial.write_text(json.dumps(self._state, indent=2), encoding="utf-8")
        os.replace(partial, self._state_path)

    def status(self) -> dict[str, Any]:
        """Location, last success and last error, from local bookkeeping (no network)."""
        keys = ("last_success", "last_error", "last_error_at", "last_sync", "last_restore")
        return {"location": self.remote.location, **{key: self._state.get(key) for key in keys}}

    # ------------------------------------------------------------------ snapshot
    def snapshot(self, target: Path) -> tuple[str, dict[str, int]]:
        """Export the store to ``target`` under the write lock; returns (sha256, counts).

        Metadata describing the physical store (schema version, index state) is left out,
        as import would ignore it anyway; that keeps a restored store's export identical.
        """
        digest = hashlib.sha256()
        counts = {"engrams": 0, "cues": 0, "edges": 0, **{kind: 0 for kind in EDGE_KINDS}}
        partial = target.with_name(target.name + ".partial")
        try:
            with self.write_lock, partial.open("wb") as stream:
                for record in self.store.export_records():
                    kind = record.get("kind")
                    if kind == "meta" and record.get("key") in LOCAL_META_KEYS:
                        continue
                    line = (json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n").encode()
                    stream.write(line)
                    digest.update(line)
                    if kind == "engram":
                        counts["engrams"] += 1
                    elif kind == "cue":
                        counts["cues"] += 1
                    elif kind in EDGE_KINDS:
                        counts[kind] += 1
                        counts["edges"] += 1
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return digest.hexdigest(), counts

    def retrying(self, func: Callable[..., Any], *args: Any) -> tuple[Any, int]:
        attempts = 0

        def attempt() -> Any:
            nonlocal attempts
            attempts += 1
            return func(*args)

        def log_retry(state: Any) -> None:
            logger.warning(
                "backup remote failed (attempt %d): %s", state.attempt_number, state.outcome.exception()
            )

        policy = self.retry
        deadline = getattr(self.remote, "deadline", None)
        stop: stop_base = stop_after_attempt(max(1, policy.attempts))
        if deadline is not None:  # no new attempt once the sync's time is up
            stop = stop | stop_before_delay(max(0.0, deadline - time.monotonic()))
        retrying = Retrying(
            stop=stop,
            wait=wait_exponential(multiplier=policy.initial_delay, max=policy.max_delay),
            retry=retry_if_exception_type(RemoteError),
            before_sleep=log_retry,
            reraise=True,
        )
        try:
            return retrying(attempt), attempts
        except BackupError as error:
            error.attempts = attempts  # type: ignore[attr-defined]
            raise

    # ------------------------------------------------------------------ sync
    def sync(self, timeout: float | None = None) -> SyncResult:
        """Push a snapshot if the memory changed since the last push.

        Never raises for a failing remote or export: the failure is recorded (``status()``)
        and returned in the result with ``error`` set; the local store is never touched.
        The remote gets ``timeout`` seconds (default ``sync_timeout``), retries included.
        """
        with self._busy, self.remote_deadline(timeout if timeout is not None else self.sync_timeout):
            now, location = utcnow().isoformat(), self.remote.location
            snapshot = self.state_dir / ".backup-snapshot.jsonl"
            try:
                sha, counts = self.snapshot(snapshot)
                if sha == self._state.get("last_pushed_sha256") and self._remote_still_has_it():
                    return SyncResult(False, "unchanged", sha, counts, now, location=location)
                if self._would_erase_backup(counts):
                    raise BackupError(_empty_local_message(location))
                manifest = {"format": 1, "user": self.store.user, "sha256": sha, "counts": counts}
                pushed, attempts = self.retrying(self.remote.push, snapshot, {**manifest, "time": now})
            except Exception as error:  # why: a failed sync must be reported, never lose local state
                if not isinstance(error, BackupError):
                    logger.exception("backup snapshot failed")
                message, attempts = _one_line(error), getattr(error, "attempts", 0)
                self.save_state(last_error=message, last_error_at=now)
                return SyncResult(
                    False, "failed", time=now, location=location, attempts=attempts, error=message
                )
            finally:
                snapshot.unlink(missing_ok=True)
            revision = str(pushed.get("revision", ""))
            record = {"revision": revision, "time": now, "sha256": sha, "counts": counts}
            self.save_state(last_pushed_sha256=sha, last_success=now, last_error=None, last_sync=record)
            logger.info("backup pushed to %s (%s)", location, revision)
            return SyncResult(True, "pushed", sha, counts, now, revision, location, attempts)

    @contextmanager
    def remote_deadline(self, seconds: float) -> Iterator[None]:
        """Every remote call made inside ends by ``seconds`` from now (the remote reads its
        ``deadline``: git caps each command's timeout by it)."""
        self.remote.deadline = time.monotonic() + seconds
        try:
            yield
        finally:
            self.remote.deadline = None

    def _remote_still_has_it(self) -> bool:
        """False when the remote holds no backup although we pushed one (a repository or bucket
        re-created empty): the unchanged memory is pushed again instead of "unchanged" forever.

        A remote holding another snapshot (another machine synced since) is left alone.
        """
        manifest, _ = self.retrying(self.remote.manifest)
        if manifest is None:
            logger.warning(
                "backup at %s is empty although this memory was pushed: pushing again", self.remote.location
            )
            return False
        return True

    def _would_erase_backup(self, counts: dict[str, int]) -> bool:
        """An empty store that never synced here must not overwrite a real backup (new machine)."""
        if counts["engrams"] or self._state.get("last_pushed_sha256"):
            return False
        manifest, _ = self.retrying(self.remote.manifest)
        return bool(manifest and manifest.get("counts", {}).get("engrams"))

    # ------------------------------------------------------------------ restore
    def restore(self, force: bool = False) -> dict[str, Any]:
        """Replace the local memory with the latest backup (see :mod:`smriti.stores.backup.restore`)."""
        from smriti.stores.backup.restore import restore

        with self._busy:
            result = restore(self, force)
        if result.get("restored") and self._on_restored is not None:
            self._on_restored()
        return result


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:500]


def _empty_local_message(location: str) -> str:
    return (
        f"not pushing an empty memory over the backup at {location}: run `smriti restore` "
        "(or set BACKUP_RESTORE_ON_START=true), or store a memory first"
    )


def make_backup(
    settings: Settings,
    store: GraphStore,
    *,
    lock: AbstractContextManager[Any] | None = None,
    on_restored: Callable[[], Any] | None = None,
    retry: RetryPolicy | None = None,
) -> Backup | None:
    """The backup of ``store``'s user for BACKUP_TYPE (None for ``none``).

    Raises:
        BackupError: a required setting is missing (normally caught earlier by Settings).
    """
    kind = settings.backup_type
    if kind == "none":
        return None
    user = validate_user_name(store.user)
    state_dir = Path(settings.storage_location).expanduser() / user
    if kind == "github":
        from smriti.stores.backup.git import GitRemote

        if not settings.git_base_url:
            raise BackupError("BACKUP_TYPE=github needs GIT_BASE_URL")
        remote: Remote = GitRemote(settings.git_base_url, user, state_dir / "backup-git")
    elif kind == "s3":
        from smriti.stores.backup.s3 import S3Remote

        remote = S3Remote.from_settings(settings, user)
    else:
        raise BackupError(f"unknown BACKUP_TYPE {kind!r}: use none, github or s3")
    return Backup(
        store,
        remote,
        state_dir,
        kind=kind,
        lock=lock,
        on_restored=on_restored,
        retry=retry,
        embedding_dims=settings.embedding_dims,
        sync_timeout=settings.backup_sync_timeout,
    )
