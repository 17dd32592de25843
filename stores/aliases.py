"""Cue aliases: the stored cues whose names mean nearly what a query's cue means.

A question and the memory that answers it often name one thing in two words: "destress" and
"relax", "kids" and "children", "hosted" and "organised". Keyword search and exact cue matching
miss the pair; a sentence embedding of the whole question blurs it among the other words.
HippoRAG 2 links phrase nodes whose embeddings are close (synonym edges) and walks them. Here
the edges are found at recall, between the query's cues and every stored cue: the same edges
for cues the memory already has, and edges for query words it has never stored as a cue.

Cue embeddings are the embedder's vectors of the cue *names*, filled by consolidation for cues
created without one (``nodes/index.py``'s ``embed_cues``). This module keeps one process's copy
of them (:class:`AliasIndex`): read from the store in one query, reloaded in the background when
older than ``CUE_ALIAS_REFRESH_SECONDS`` (another process may have consolidated), or at once after
this process embedded cues. A stale copy only misses aliases of the newest cues; exact cue
matches are read from the store at every recall.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from smriti.stores.base import GraphStore

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], Sequence[Sequence[float]]]


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


class AliasIndex:
    """The stored cue embeddings of one memory, in this process, and the nearest cues to a query's.

    The first lookup reads them from the store; a lookup finding the copy older than
    ``refresh_seconds`` answers from it and starts one background reload (a few thousand
    cues a memory, ~60 MB of 1,536-dimension vectors at 10k memories: no recall waits for
    that read). After :meth:`invalidate` (this process embedded cues) the next lookup reloads
    before it answers.

    Args:
        store: the memory's store.
        refresh_seconds: how old the copy may grow before a lookup starts a reload.
        clock: monotonic seconds (tests move it by hand).
    """

    def __init__(
        self, store: GraphStore, refresh_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.store = store
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._loaded_at: float | None = None
        self._generation = 0  # bumped by invalidate: a reload begun before it is stale at once
        self._reloading: threading.Thread | None = None
        self._names: list[str] = []
        self._position: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)

    def invalidate(self) -> None:
        """Reload at the next lookup, before it answers (this process just embedded cues)."""
        with self._lock:
            self._loaded_at = None
            self._generation += 1

    def _load(self) -> None:
        with self._lock:
            started, generation = self.clock(), self._generation
        names, matrix = self.store.cue_vectors()
        unit = unit_rows(matrix)
        with self._lock:
            self._names, self._matrix = names, unit
            self._position = {name: i for i, name in enumerate(names)}
            if generation == self._generation:
                self._loaded_at = started

    def _reload_in_background(self) -> None:
        try:
            self._load()
        except Exception:  # a closed store or a passing error: the next lookup tries again
            logger.debug("reloading the cue vectors failed", exc_info=True)
        finally:
            self._reloading = None

    def _current(self) -> tuple[list[str], dict[str, int], np.ndarray]:
        with self._lock:
            loaded_at, reloading = self._loaded_at, self._reloading
            stale = loaded_at is not None and self.clock() - loaded_at > self.refresh_seconds
            if stale and reloading is None:
                self._reloading = threading.Thread(
                    target=self._reload_in_background, name="smriti-cue-vectors", daemon=True
                )
                self._reloading.start()
        if loaded_at is None:
            self._load()
        with self._lock:
            return self._names, self._position, self._matrix

    def wait(self) -> None:
        """Wait for a background reload to end (tests, and closing the store)."""
        reloading = self._reloading
        if reloading is not None:
            reloading.join()

    def aliases(
        self, cues: Sequence[str], embed: Embed, threshold: float, per_cue: int
    ) -> dict[str, list[tuple[str, float]]]:
        """Query cue -> up to ``per_cue`` other stored cues with cosine >= ``threshold``, best first.

        A query cue that is stored uses its stored embedding; the others are embedded in one
        call of ``embed`` (only when some cue has no stored vector). Ties go to the smaller name.
        """
        cues = list(dict.fromkeys(cues))
        if not cues or per_cue <= 0:
            return {}
        names, position, matrix = self._current()
        if not names:
            return {}
        unknown = [cue for cue in cues if cue not in position]
        embedded = dict(zip(unknown, unit_rows(np.asarray(embed(unknown))), strict=True)) if unknown else {}
        query = np.stack([matrix[position[c]] if c in position else embedded[c] for c in cues])
        similarity = query @ matrix.T
        found: dict[str, list[tuple[str, float]]] = {}
        for row, cue in enumerate(cues):
            scores = similarity[row]
            close = np.flatnonzero(scores >= threshold)
            ranked = sorted(
                ((names[i], float(scores[i])) for i in close if names[i] != cue), key=lambda p: (-p[1], p[0])
            )
            found[cue] = ranked[:per_cue]
        return found
