"""The cues recall reads, by rowid: :class:`CueCache`.

Recall reads the cues of every candidate (~1,200 encoded_by rows for the ~110 candidates of a
recall at 10k). Looking each cue row up by rowid cost more than the rest of that read (2.2 ms
against 0.9 ms from this cache). A cue row is never updated (cues are inserted with
``ON CONFLICT DO NOTHING``), only deleted, and a deleted cue's rowid may be given to the next
new cue: so a delete clears the cache, and a reader whose snapshot may predate the delete
does not store what it read (see :attr:`CueCache.generation`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

from smriti.stores.base import Cue

# ~250 bytes a cue: at most ~50 MB however many cues recalls touch (a 100k store has ~300k cues).
MAX_CUES = 200_000


class CueCache:
    """Cue rowid -> :class:`Cue` (id, name, type; no embedding), filled by recall's reads.

    The cached cues are shared between readers: treat them as read-only.
    """

    def __init__(self, limit: int = MAX_CUES) -> None:
        self.limit = limit
        self._cues: dict[int, Cue] = {}
        self._lock = threading.Lock()
        # Bumped by every clear. A reader takes it before its snapshot and stores what it read
        # only if no clear came in between: a cue it read may have been deleted since, and its
        # rowid reused by another cue.
        self.generation = 0

    def __len__(self) -> int:
        return len(self._cues)

    def known(self, rowids: Iterable[int]) -> tuple[dict[int, Cue], list[int]]:
        """The cached cues among ``rowids`` and the rowids not cached (each once)."""
        found: dict[int, Cue] = {}
        missing: dict[int, None] = {}
        cues = self._cues
        for rowid in rowids:
            cue = cues.get(rowid)
            if cue is None:
                missing[rowid] = None
            else:
                found[rowid] = cue
        return found, list(missing)

    def store(self, cues: Mapping[int, Cue], generation: int) -> None:
        """Keep cues read from a snapshot taken at ``generation`` (dropped if a clear came since)."""
        with self._lock:
            if generation != self.generation:
                return
            if len(self._cues) + len(cues) > self.limit:
                self._cues.clear()  # full: start again rather than track which cues are used
            self._cues.update(cues)

    def clear(self) -> None:
        """Forget every cue (a cue was deleted or is about to be)."""
        with self._lock:
            self.generation += 1
            self._cues.clear()
