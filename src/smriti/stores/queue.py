"""The LLM analysis queue, kept in the store's own metadata so it is as durable as the memories.

A store answers after the offline analysis; a memory whose LLM analysis is still to come has
one metadata entry, ``analysis-queue/<engram id>``, holding a small JSON job::

    {"status": "pending" | "failed", "attempts": 2, "due": "<ISO time>", "error": "...",
     "queued_at": "<ISO time>", "store_time": "<ISO time>" | ""}

``store_time`` is the memory's time when it was stored without a caller's ``occurred_at``:
the model resolves relative times ("yesterday") against it and may set the memory's time to
the one it states. It is "" when the caller gave the time (which the model never overwrites)
and in entries queued before it existed. Kept in the job, not read from the memory, so a
replayed job resolves against the same moment even after an earlier landing moved the time.

Why metadata and not a table of its own: every backend already keeps a durable key/value
``Meta`` (SQLite table, Kuzu node table, a Cypher label filtered by user), so the queue is one
implementation over four narrow protocol methods (``get_meta``, ``set_meta``, ``meta_items``,
``delete_meta``) instead of one per backend. The queue only ever holds the memories still
waiting (or parked), so listing it by key prefix stays small. On SQLite the job is written in
the store's transaction: a memory and its job commit together, and ``kill -9`` leaves both or
neither. Forget removes a memory's job (:meth:`StoreBase.delete_engram`).

A job is pending until its analysis lands (:meth:`finish` removes it), or failed ("parked")
after ``max_attempts`` failures, with the last error kept for ``stats``; :meth:`retry_failed`
puts parked jobs back. Several processes sharing one Neo4j or FalkorDB may both analyse the
same memory: harmless, since an analysis replaces the memory's links rather than adding to them.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any, Literal

from smriti.stores.base import ANALYSIS_QUEUE_PREFIX
from smriti.stores.parts import MetaPart

Status = Literal["pending", "failed"]
MAX_ERROR_CHARS = 300  # an error is shown in stats: on one line, bounded


@dataclass(slots=True)
class Job:
    """One memory waiting for (or parked without) its LLM analysis."""

    engram_id: str
    queued_at: str  # ISO times: the JSON form, and they sort as times (all UTC)
    due: str
    status: Status = "pending"
    attempts: int = 0
    error: str = ""
    store_time: str = ""  # "" = the model may not set the memory's time (see the module doc)

    def due_at(self) -> datetime:
        return datetime.fromisoformat(self.due)


class AnalysisQueue:
    """The queue of one user's store (every method is a few metadata reads or writes: it needs
    only the store's :class:`~smriti.stores.parts.MetaPart`)."""

    def __init__(self, store: MetaPart) -> None:
        self.store = store

    def enqueue(self, engram_id: str, now: datetime, store_time: datetime | None = None) -> None:
        """Queue ``engram_id`` for analysis now (again from scratch when it was queued).

        ``store_time``: the memory's time when the caller gave none (see the module doc).
        """
        moment = now.isoformat()
        stored = "" if store_time is None else store_time.isoformat()
        self._save(Job(engram_id=engram_id, queued_at=moment, due=moment, store_time=stored))

    def get(self, engram_id: str) -> Job | None:
        raw = self.store.get_meta(ANALYSIS_QUEUE_PREFIX + engram_id)
        return None if raw is None else _job(engram_id, raw)

    def jobs(self) -> list[Job]:
        """Every job, pending and parked, oldest queued first."""
        found = [
            _job(key.removeprefix(ANALYSIS_QUEUE_PREFIX), raw)
            for key, raw in self.store.meta_items(ANALYSIS_QUEUE_PREFIX).items()
        ]
        return sorted(found, key=lambda job: (job.queued_at, job.engram_id))

    def pending(self) -> list[Job]:
        """Pending jobs, soonest due first (ties: oldest queued)."""
        waiting = [job for job in self.jobs() if job.status == "pending"]
        return sorted(waiting, key=lambda job: (job.due_at(), job.queued_at, job.engram_id))

    def next_due(self, now: datetime) -> Job | None:
        """The pending job to run now, or None when none is due yet."""
        for job in self.pending():
            return job if job.due_at() <= now else None
        return None

    def finish(self, engram_id: str) -> None:
        """The analysis landed: the memory leaves the queue."""
        self.store.delete_meta(ANALYSIS_QUEUE_PREFIX + engram_id)

    def fail(self, job: Job, error: str, retry_at: datetime, max_attempts: int) -> Job:
        """Count a failed attempt: due again at ``retry_at``, or parked after ``max_attempts``."""
        attempts = job.attempts + 1
        updated = replace(
            job,
            due=retry_at.isoformat(),
            status="failed" if attempts >= max_attempts else "pending",
            attempts=attempts,
            error=_one_line(error),
        )
        self._save(updated)
        return updated

    def defer(self, job: Job, until: datetime) -> None:
        """Move a job's due time without counting an attempt (the endpoint asked to wait)."""
        self._save(replace(job, due=until.isoformat()))

    def retry_failed(self, now: datetime) -> int:
        """Put every parked job back in the queue, due now, its attempts reset; returns how many."""
        parked = [job for job in self.jobs() if job.status == "failed"]
        for job in parked:
            self._save(replace(job, due=now.isoformat(), status="pending", attempts=0))
        return len(parked)

    def summary(self, parked_shown: int = 10) -> dict[str, Any]:
        """What ``stats`` shows: how many wait, how many are parked and why (the first few)."""
        jobs = self.jobs()
        pending = [job for job in jobs if job.status == "pending"]
        failed = [job for job in jobs if job.status == "failed"]
        return {
            "pending": len(pending),
            "failed": len(failed),
            "next_due": min((job.due for job in pending), default=None),
            "failed_memories": [
                {"id": job.engram_id, "attempts": job.attempts, "error": job.error}
                for job in failed[:parked_shown]
            ],
        }

    def _save(self, job: Job) -> None:
        data = asdict(job)
        del data["engram_id"]  # it is the key
        self.store.set_meta(ANALYSIS_QUEUE_PREFIX + job.engram_id, json.dumps(data, sort_keys=True))


def _job(engram_id: str, raw: str) -> Job:
    data = json.loads(raw)
    return Job(
        engram_id=engram_id,
        queued_at=str(data.get("queued_at", "")),
        due=str(data.get("due") or data.get("queued_at", "")),
        status="failed" if data.get("status") == "failed" else "pending",
        attempts=int(data.get("attempts", 0)),
        error=str(data.get("error", "")),
        store_time=str(data.get("store_time") or ""),
    )


def _one_line(error: str) -> str:
    # A validation error's reason is on its second line ("Invalid JSON: ..."): keep it, joined.
    return " ".join(error.split())[:MAX_ERROR_CHARS]
