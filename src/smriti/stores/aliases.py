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

Up to :data:`EXACT_CUES` (2,048) cues a lookup is one matrix product with all of them. Past that it goes
through an HNSW graph of the cue vectors (usearch, as engram vectors do past their threshold),
built in the background after a load: at 10k memories (30k cues of 1,536 dimensions) the exact
product took 20-150 ms of a recall on the shared, loaded 2-core machine (4,000 cues: 20 ms). Until
the graph is built the exact product answers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti.blas import one_blas_thread

if TYPE_CHECKING:
    from smriti.stores.base import GraphStore

logger = logging.getLogger(__name__)

Embed = Callable[[list[str]], Sequence[Sequence[float]]]

# Up to this many cues a lookup multiplies with every one; past it, an HNSW graph answers.
EXACT_CUES = 2048
# The graph's beam while searching: wide, since a lookup asks for a handful of neighbours.
GRAPH_EXPANSION = 64


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (a zero row stays zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


class CueSpace:
    """One loaded copy of the cue vectors: names, unit rows, and the HNSW graph once built."""

    def __init__(self, names: list[str], unit: np.ndarray) -> None:
        self.names = names
        self.position = {name: i for i, name in enumerate(names)}
        self.matrix: np.ndarray | None = unit
        self.graph: Any = None  # usearch Index; when set, ``matrix`` is dropped

    def build_graph(self) -> None:
        """Build the HNSW graph of the rows (both cores), then let go of the matrix."""
        from smriti.stores.ann import AnnParams, new_index

        matrix = self.matrix
        if matrix is None or not len(matrix):
            return
        graph = new_index(matrix.shape[1], AnnParams(expansion_search=GRAPH_EXPANSION))
        graph.add(np.arange(len(matrix), dtype=np.uint64), matrix, threads=0)
        self.graph, self.matrix = graph, None

    # A lookup may run while the graph is being swapped in: each reads ``matrix`` once.
    def vector(self, name: str) -> np.ndarray:
        """The stored unit vector of a cue of this copy."""
        matrix = self.matrix
        if matrix is not None:
            return matrix[self.position[name]]
        return np.asarray(self.graph.get(np.uint64(self.position[name])), dtype=np.float32)

    def nearest(self, query: np.ndarray, count: int) -> list[list[tuple[str, float]]]:
        """Per query row, up to ``count`` (name, cosine) of the closest cues, best first."""
        matrix = self.matrix
        if matrix is not None:
            with one_blas_thread():  # small products: one thread is faster (smriti/blas.py)
                similarity = (matrix @ query.T).T  # rows of the stored matrix: ~7x faster than query @ m.T
            found = []
            for scores in similarity:
                top = np.argsort(-scores, kind="stable")[:count]
                found.append([(self.names[i], float(scores[i])) for i in top])
            return found
        matches = self.graph.search(query, count)
        keys, distances = np.atleast_2d(matches.keys), np.atleast_2d(matches.distances)
        size = len(self.names)
        return [
            [(self.names[int(k)], 1.0 - float(d)) for k, d in zip(ks, ds, strict=True) if k < size]
            for ks, ds in zip(keys, distances, strict=True)
        ]


class AliasIndex:
    """The stored cue embeddings of one memory, in this process, and the nearest cues to a query's.

    The first lookup reads them from the store; a lookup finding the copy older than
    ``refresh_seconds`` answers from it and starts one background reload (30k cues at 10k
    memories, ~190 MB of 1,536-dimension vectors: no recall waits for that read). After
    :meth:`invalidate` (this process embedded cues) the next lookup reloads before it answers.

    Args:
        store: the memory's store.
        refresh_seconds: how old the copy may grow before a lookup starts a reload.
        clock: monotonic seconds (tests move it by hand).
        exact_cues: past this many cues, an HNSW graph is built for lookups (see the module doc).
    """

    def __init__(
        self,
        store: GraphStore,
        refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        exact_cues: int = EXACT_CUES,
    ) -> None:
        self.store = store
        self.refresh_seconds = refresh_seconds
        self.clock = clock
        self.exact_cues = exact_cues
        self._lock = threading.Lock()
        self._loaded_at: float | None = None
        self._generation = 0  # bumped by invalidate: a reload begun before it is stale at once
        self._threads: list[threading.Thread] = []
        self._reloading = False
        self._space = CueSpace([], np.zeros((0, 0), dtype=np.float32))

    def invalidate(self) -> None:
        """Reload at the next lookup, before it answers (this process just embedded cues)."""
        with self._lock:
            self._loaded_at = None
            self._generation += 1

    def _background(self, work: Callable[[], None], name: str) -> None:
        """Start ``work`` in a daemon thread, remembered for :meth:`wait`; never under ``_lock``."""
        thread = threading.Thread(target=work, name=name, daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _load(self) -> None:
        with self._lock:
            started, generation = self.clock(), self._generation
        names, matrix = self.store.cue_vectors()
        space = CueSpace(names, unit_rows(matrix))
        with self._lock:
            self._space = space
            if generation == self._generation:
                self._loaded_at = started
        if len(names) > self.exact_cues:
            self._background(lambda: self._build(space), "smriti-cue-graph")

    @staticmethod
    def _build(space: CueSpace) -> None:
        try:
            space.build_graph()
        except Exception:  # the exact product keeps answering
            logger.warning("building the cue alias graph failed", exc_info=True)

    def _reload(self) -> None:
        try:
            self._load()
        except Exception:  # a closed store or a passing error: the next lookup tries again
            logger.debug("reloading the cue vectors failed", exc_info=True)
        finally:
            with self._lock:
                self._reloading = False

    def _current(self) -> CueSpace:
        with self._lock:
            loaded_at, space = self._loaded_at, self._space  # a reload started now is for later
            stale = loaded_at is not None and self.clock() - loaded_at > self.refresh_seconds
            reload = stale and not self._reloading
            self._reloading = self._reloading or reload
        if reload:
            self._background(self._reload, "smriti-cue-vectors")
        if loaded_at is None:
            self._load()
            with self._lock:
                space = self._space
        return space

    def wait(self) -> None:
        """Wait for the background reloads and graph builds started so far, and those they start."""
        while True:
            with self._lock:
                if not self._threads:
                    return
                thread = self._threads.pop()
            thread.join()

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
        space = self._current()
        if not space.names:
            return {}
        unknown = [cue for cue in cues if cue not in space.position]
        embedded = dict(zip(unknown, unit_rows(np.asarray(embed(unknown))), strict=True)) if unknown else {}
        query = np.stack([embedded[c] if c in embedded else space.vector(c) for c in cues])
        found: dict[str, list[tuple[str, float]]] = {}
        for cue, near in zip(cues, space.nearest(query, per_cue + 1), strict=True):
            close = [(name, score) for name, score in near if score >= threshold and name != cue]
            found[cue] = sorted(close, key=lambda p: (-p[1], p[0]))[:per_cue]
        return found
