"""Recall's reinforcement written without making a recall wait behind other writers.

Every recall strengthens what it returned (``access_count + 1``, ``last_accessed_at = now``,
``decay_factor + boost``). Written inline, that put each recall behind the write lock: behind a
store, behind each 2,000-memory chunk of a consolidation, and behind every other recall's
reinforcement when eight HTTP clients recall at once. Reinforcement is a usage signal, not
something a client was promised, so it may land a moment later:

* when the write lock is free (a single client, a test, a notebook), the recall writes at once
  and reports the stored values, exactly as before;
* when another writer holds it, the recall queues its ids and reports the values it will
  write; a background thread writes the queue, in order, as soon as the lock is free.

The queue is bounded (:data:`MAX_PENDING` recalls); past it the oldest entries are dropped
with a warning rather than growing without end under a writer that never lets go. ``close``
writes what is left.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from smriti.stores.base import GraphStore

logger = logging.getLogger(__name__)

MAX_PENDING = 10_000  # recalls waiting to be written


class Reinforcer:
    """Writes reinforcements for one store; share one per :class:`MemoryContext`."""

    def __init__(self, store: GraphStore, write_lock: threading.RLock, boost: float) -> None:
        self.store, self.write_lock, self.boost = store, write_lock, boost
        self._pending: deque[tuple[list[str], datetime]] = deque()
        self._guard = threading.Lock()  # the queue and the thread
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self.dropped = 0

    def reinforce(self, ids: Sequence[str], at: datetime) -> dict[str, tuple[int, float]] | None:
        """Reinforce ``ids`` now if no one else is writing (returns the stored (access_count,
        decay_factor) per id found), else queue them and return None."""
        ids = list(ids)
        if not ids:
            return {}
        if self.write_lock.acquire(blocking=False):
            try:
                self._write_pending()  # keep the order: older recalls first
                return self.store.reinforce(ids, at, self.boost)
            finally:
                self.write_lock.release()
        self._queue(ids, at)
        return None

    def _queue(self, ids: list[str], at: datetime) -> None:
        with self._guard:
            if self._closed:
                return
            if len(self._pending) >= MAX_PENDING:
                self._pending.popleft()
                self.dropped += 1
                if self.dropped == 1 or self.dropped % 1_000 == 0:
                    logger.warning(
                        "reinforcement queue full: dropped %d recalls' reinforcement", self.dropped
                    )
            self._pending.append((ids, at))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="smriti-reinforce", daemon=True)
                self._thread.start()
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._guard:
                if self._closed:
                    return
            try:
                with self.write_lock:
                    self._write_pending()
            except Exception:  # why: a failed write loses a usage signal, never the thread
                logger.exception("writing queued reinforcement failed")

    def _write_pending(self) -> None:
        """Write every queued reinforcement in one transaction (caller holds the write lock)."""
        with self._guard:
            batch = list(self._pending)
            self._pending.clear()
        if not batch:
            return
        with self.store.transaction():
            for ids, at in batch:
                self.store.reinforce(ids, at, self.boost)

    def pending(self) -> int:
        with self._guard:
            return len(self._pending)

    def close(self) -> None:
        """Write what is queued and stop the thread (the store must still be open)."""
        with self._guard:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None:
            thread.join(timeout=5.0)
        try:
            with self.write_lock:
                self._write_pending()
        except Exception:
            logger.exception("writing queued reinforcement at close failed")
