"""What other processes changed in a shared SQLite file: the ``change_log`` table and :class:`ChangeFeed`.

Why: several HTTP workers may serve one ``memory.sqlite`` (``smriti-mcp --workers N``, WAL, one
writer at a time). Each keeps caches beside the file (the vector matrix or HNSW graph, the
cue cache), which follow this process's own commits only. A memory stored through worker A
must be found by worker B's next search, and one forgotten through A must not come back from
B's cache.

How: triggers in the file (so every writer logs, whatever process or version) append a row to
``change_log`` for each engram inserted, deleted or given another embedding or memory type,
and for each cue deleted (its rowid may be reused, which the cue cache keys on) or renamed or
retyped (the cue cache holds names and types). A reader
first asks for the newest ``seq`` (an index lookup, microseconds); when it moved, the engrams
named since are read back in one committed snapshot and the caches set to what the file holds
now (present: added again; absent: removed). Replaying the current state rather than each
logged event makes the order of events irrelevant and every replay idempotent.

The log keeps its last ~``schema.CHANGE_LOG_KEEP`` rows (a trigger trims it every 1,000 rows): a process that
fell further behind (its last ``seq`` was trimmed away) reloads its caches whole.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from smriti.stores.sqlite.connection import Database

logger = logging.getLogger(__name__)

NEWEST = "SELECT IFNULL(max(seq), 0) FROM change_log"
IN_CHUNK = 500  # ids per IN (...) read, below SQLite's parameter limit

EngramState = tuple[str, str, bytes | None]  # id, memory_type, embedding BLOB


class ChangeFeed:
    """Brings this process's caches up to the file's newest committed state (see the module doc).

    Args:
        db: the shared database.
        engrams_changed: called with the current (id, memory_type, embedding) of the changed
            engrams that exist and the ids of those that no longer do.
        cues_deleted: called when a cue was deleted, renamed or retyped since the last catch-up.
        reset: called when the log no longer reaches back to the last catch-up (reload all).
    """

    def __init__(
        self,
        db: Database,
        engrams_changed: Callable[[Sequence[EngramState], Sequence[str]], None],
        cues_deleted: Callable[[], None],
        reset: Callable[[], None],
    ) -> None:
        self.db = db
        self._engrams_changed, self._cues_deleted, self._reset = engrams_changed, cues_deleted, reset
        self._lock = threading.Lock()  # one catch-up at a time; the others wait and find nothing new
        self.seen = self._newest()

    def _newest(self) -> int:
        return int(self.db.read_committed(NEWEST)[0][0])

    def caught_up(self, read: Callable[[str, Any], list[Any]]) -> bool:
        """True when the snapshot ``read`` reads from holds no change the caches have not applied."""
        return int(read(NEWEST, ())[0][0]) <= self.seen

    def catch_up(self) -> None:
        """Apply every change committed since the last call (by any process, this one included)."""
        if self._newest() == self.seen:  # the common case: one indexed lookup
            return
        with self._lock, self.db.committed_snapshot() as read:
            newest, oldest = read("SELECT IFNULL(max(seq), 0), IFNULL(min(seq), 0) FROM change_log", ())[0]
            if newest == self.seen:
                return
            if oldest > self.seen + 1:  # trimmed past what this process saw
                logger.info(
                    "%s: more changes than the log keeps since the last read: reloading caches", self.db.path
                )
                self._reset()
                self.seen = int(newest)
                return
            rows = read(
                "SELECT DISTINCT kind, engram FROM change_log WHERE seq > ? AND seq <= ?", (self.seen, newest)
            )
            ids = sorted({engram for kind, engram in rows if kind == "engram"})
            present = _current(read, ids)
            if any(kind == "cue" for kind, _ in rows):
                self._cues_deleted()
            found = {row[0] for row in present}
            self._engrams_changed(present, [id_ for id_ in ids if id_ not in found])
            self.seen = int(newest)


def _current(read: Callable[[str, Any], list[Any]], ids: Sequence[str]) -> list[EngramState]:
    rows: list[EngramState] = []
    for start in range(0, len(ids), IN_CHUNK):
        chunk = ids[start : start + IN_CHUNK]
        marks = ", ".join("?" for _ in chunk)
        rows.extend(read(f"SELECT id, memory_type, embedding FROM engram WHERE id IN ({marks})", chunk))
    return rows
