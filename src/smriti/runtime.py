"""What the server (and the CLI) hold while running: one Memory and, optionally, a backup.

Kept apart from ``server.py`` so the CLI can open the same runtime (``stats``, ``sync``,
``restore``) without importing the MCP SDK, and so both describe the memory the same way.
Everything here is synchronous; the server calls it from worker threads.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from smriti.errors import BackupDisabled as BackupDisabled
from smriti.errors import BackupError, NoBackupFound, first_smriti_error

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.memory import Memory

logger = logging.getLogger(__name__)


# What a sync says when there is nothing to sync to: `smriti sync` and smriti_manage alike.
NOTHING_TO_SYNC = "backups are disabled (BACKUP_TYPE=none): nothing to sync"
BACKUP_DISABLED_MESSAGE = (
    "backups are disabled (BACKUP_TYPE=none): set BACKUP_TYPE=github (with GIT_BASE_URL) "
    "or BACKUP_TYPE=s3 (with S3_REGION, S3_ACCESS_KEY, S3_SECRET_KEY) to enable sync"
)


@dataclass
class Runtime:
    """One user's open memory plus the backup manager (None when backups are disabled)."""

    settings: Settings
    memory: Memory
    backup: Any | None = None

    def consolidate(self, on_step: Any = None, wait: float | None = None) -> dict[str, Any]:
        """Run consolidation now; returns the report (with its trace). ``on_step(name)`` reports
        progress; ``wait`` bounds the wait for another process's consolidation of this memory
        (None: ``Memory.consolidate``'s default; see there)."""
        if wait is None:
            return self.memory.consolidate(on_step=on_step)
        return self.memory.consolidate(on_step=on_step, wait=wait)

    def sync(self, timeout: float | None = None) -> dict[str, Any]:
        """Push the user's memory to the backup now (skipped when unchanged since the last push).

        Raises:
            BackupDisabled: BACKUP_TYPE=none.
            BackupError: the push failed (after retries); also recorded in ``backup_status``.
        """
        if self.backup is None:
            raise BackupDisabled(BACKUP_DISABLED_MESSAGE)
        result = _as_dict(self.backup.sync(timeout))
        if result.get("error"):
            # why: the backup already recorded the failure; on demand the caller must see it too
            attempts = result.get("attempts") or 0
            tries = f" after {attempts} attempt(s)" if attempts > 1 else ""
            raise BackupError(
                f"backup sync failed{tries}: {result['error']} (the local memory is intact; "
                "the next sync will push it)"
            )
        return result

    def restore(self, force: bool = False) -> dict[str, Any]:
        """Replace the local memory with the backup's copy (see ``smriti.stores.backup``).

        Raises:
            BackupDisabled: BACKUP_TYPE=none.
        """
        if self.backup is None:
            raise BackupDisabled(BACKUP_DISABLED_MESSAGE)
        return _as_dict(self.backup.restore(force=force))

    def backup_status(self) -> dict[str, Any]:
        if self.backup is None:
            return {"type": "none", "enabled": False}
        try:
            return {"type": self.settings.backup_type, "enabled": True, **_as_dict(self.backup.status())}
        except Exception as error:  # why: stats must still answer when the remote is unreachable
            logger.warning("backup status unavailable: %s", error)
            return {"type": self.settings.backup_type, "enabled": True, "error": str(error)}


def _as_dict(value: Any) -> dict[str, Any]:
    """Backup results may be dataclasses, mappings or plain values; tools need a dict."""
    from dataclasses import asdict, is_dataclass

    if value is None:
        return {}
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    if isinstance(value, dict):
        return dict(value)
    return {"result": value}


def open_backup(settings: Settings, memory: Memory) -> Any | None:
    """The backup manager for ``settings`` (None when BACKUP_TYPE=none).

    It snapshots under the memory's write lock and drops the memory's caches after a
    restore, so it is built from the whole context, not just the store.
    """
    if settings.backup_type == "none":
        return None
    from smriti.stores import backup

    context = memory.context
    return backup.make_backup(
        settings, context.store, lock=context.write_lock, on_restored=context.cache.clear
    )


def _restore_on_start(backup: Any, memory: Memory) -> None:
    """BACKUP_RESTORE_ON_START: fill an empty memory from the backup (a new machine)."""
    if memory.context.store.count_engrams() > 0:
        return
    try:
        result = backup.restore(force=False)
    except NoBackupFound:
        logger.info("BACKUP_RESTORE_ON_START: no backup yet, starting with an empty memory")
        return
    logger.info("BACKUP_RESTORE_ON_START: restored %s", result.get("counts"))


def open_runtime(settings: Settings, user: str | None = None, with_backup: bool = True) -> Runtime:
    """Open the memory of ``user`` (default ACCESSING_USER) and, if asked, its backup manager.

    With BACKUP_RESTORE_ON_START an empty memory is first restored from the backup; a
    failing remote then fails the start (rather than silently starting empty).
    """
    from smriti.memory import Memory

    memory = Memory.open(settings, user=user)
    # The memory's settings carry the embedder resolved for its store (EMBEDDING_PROVIDER=auto):
    # the backup checks a restore against that dimension.
    settings = memory.context.settings
    try:
        backup = open_backup(settings, memory) if with_backup else None
        if backup is not None and settings.backup_restore_on_start:
            _restore_on_start(backup, memory)
    except BaseException:
        memory.close()
        raise
    return Runtime(settings=settings, memory=memory, backup=backup)


def close_runtime(runtime: Runtime, final_sync: bool = True) -> None:
    """Final backup sync (when enabled), then close the database; never raises for the sync."""
    try:
        if final_sync and runtime.backup is not None:
            # bounded: a remote that never answers must not hold the shutdown for minutes
            runtime.sync(timeout=runtime.settings.backup_shutdown_timeout)
            logger.info("final backup sync done")
    except Exception:
        logger.exception("final backup sync failed; the local database is intact")
    finally:
        runtime.memory.close()
        logger.info("memory database closed")


def _describe_model(model: Any, offline: str) -> str:
    if model is None:
        return offline
    name = getattr(model, "model_name", None) or getattr(model, "model", None)
    return f"{type(model).__name__}({name})" if name else type(model).__name__


def describe_status(runtime: Runtime) -> dict[str, Any]:
    """Counts, clusters, index state, models in use and backup status, JSON-ready."""
    settings = runtime.settings
    context = runtime.memory.context
    stats = runtime.memory.stats()
    return {
        **stats,
        "user": context.store.user,
        "llm": _describe_model(context.llm, "heuristic (offline)"),
        "embedder": _describe_model(context.embedder, "none"),
        "embedding_dims": settings.embedding_dims,
        "consolidation_interval": settings.consolidation_interval,
        "backup": runtime.backup_status(),
        "executor": runtime.memory.executor(),
    }


def startup_error(error: BaseException) -> str | None:
    """A one-line message for a known start-up failure (inside exception groups too), else None."""
    known = first_smriti_error(error)
    return None if known is None else str(known)
