"""Vector search of the in-memory caches: :class:`VectorCache` (exact, then HNSW) and :func:`cosine`.

Small caches answer by exact cosine over one float32 matrix. Past ``ann_threshold`` vectors a
daemon thread (nice 19; at the caller's priority when ``smriti import`` waits for it) builds a
usearch HNSW graph from the cache's vectors on every core; until it is built, exact search
answers (an import of a quantised graph builds it from batches instead: :meth:`build_streamed`).
Once built, a query asks the graph for ``max(4k, 50)`` candidates (with a beam that widens past
100k vectors: :func:`search_beam`), re-scores them exactly from the graph's float32 copies (or,
for a quantised graph, from the exact vectors the owner reads back: ``exact``), adds the exact
scores of the vectors added since (the not-yet-indexed tail, which the thread indexes in
batches: an insert into the graph costs ~2 ms, too slow for the store path) and sorts by
(-score, id). Every path breaks ties by id, so the insertion order (a restore, a re-import)
never changes what comes back.

Measured in-process on the 2-core development machine (load average 3-5: shared), hashing
embeddings (1,536 dims) of HotpotQA passages and sentences and LoCoMo turns, 300 questions:

=====================  ==========  ===========
                       10k         100k
=====================  ==========  ===========
exact p50              4.4 ms      57 ms
HNSW p50 (es 256)      ~3-8 ms     4.5 ms (5.3 ms memory-mapped)
recall@10 es 64/128    0.981/0.996 0.951/0.976
recall@10 es 256       0.998       0.990
build (nice 19)        20 s        241 s
saved file             66 MB       606 MB
=====================  ==========  ===========

``add`` costs ~40 us p50 (a graph insert ~2 ms): 2,000 adds take 0.4 s on the store path and
the thread indexes them in ~4 s (load average 7). RSS at 100k: the exact matrix ~640 MB; the
build inserts its rows in place (no second copy: the process stayed under 690 MB while
building); a graph reloaded into RAM ~645 MB; keeping the matrix beside the graph would add
614 MB. Opening the saved 100k graph takes 0.2-0.3 s and needs ~67 MB of
anonymous memory (the rest is the file's page cache); its first query takes ~25 ms with the
file in the page cache and ~0.6 s after dropping the caches.

Keys: each add gets the next integer key; usearch stores vectors under these keys. Keys below
``_indexed`` live in the graph (or are dead), keys from ``_indexed`` on live in ``_matrix``
(row ``key - _indexed``): indexed vectors are not kept twice in RAM.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from smriti import blas
from smriti.stores import ann
from smriti.stores.ann import AnnParams

if TYPE_CHECKING:
    from usearch.index import Index

logger = logging.getLogger(__name__)

ANN_THRESHOLD = 20_000
RARE = 2_000  # a memory type with at most this many indexed vectors is scored exactly
PROGRESS_SECONDS = 30.0  # a long build logs how far it got this often
BATCH = 256  # vectors per background insert (~0.5 s on 2 cores; queries wait at most that)


class VectorCache:
    """Embeddings as stored (float32) with ids and memory types, grown in place.

    Args:
        dims: the embedding dimension.
        ann_threshold: build an HNSW graph once the cache holds at least this many vectors;
            None (the default, what the Kuzu/LadybugDB store gets) keeps it exact. Owners opt in
            with :data:`ANN_THRESHOLD`. Not by default: once usearch is loaded, LadybugDB's
            offline ``INSTALL`` of its extensions crashes the process.
        index_path: where to keep the built graph between runs (e.g. ``memory.sqlite.vectors``
            beside the database); None keeps it in memory only.
        params: HNSW parameters; ``params.dtype`` other than f32 keeps quantised vectors in
            the graph, and then ``exact`` is required.
        exact: the exact vectors of some ids, as {id: float32 vector} (ids it no longer has are
            left out): re-scores a quantised graph's candidates, so results stay exact-ranked.

    The owner fills the cache with :meth:`load` (all embeddings) or, when a saved graph
    exists, :meth:`open` (ids and memory types only: no embeddings read), follows its writes
    with :meth:`add`, :meth:`remove` and :meth:`retype`, and calls :meth:`close` when it
    closes (stops the thread, saves the graph). ``generation`` is an opaque token the owner
    may set (before :meth:`load`/:meth:`open` and whenever it re-embeds memories in place);
    a saved graph with another token is not opened.
    """

    def __init__(
        self,
        dims: int,
        *,
        ann_threshold: int | None = None,
        index_path: str | os.PathLike[str] | None = None,
        params: AnnParams | None = None,
        exact: Callable[[list[str]], dict[str, np.ndarray]] | None = None,
    ) -> None:
        self.dims = dims
        self.ann_threshold = ann_threshold
        self.index_path = Path(index_path) if index_path is not None else None
        self.params = params or AnnParams()
        self.quantised = self.params.dtype != "f32"
        if self.quantised and exact is None:
            raise ValueError(f"a {self.params.dtype} vector index needs the exact vectors to re-score from")
        self.exact = exact
        self.generation: str | None = None
        # The thread runs at nice 19 so a serving process keeps its cores for queries; a caller
        # that waits for the graph (``smriti import``: :meth:`SearchIndex.finish`) clears this
        # first, or the build starves on a busy machine (319 s at 100k under load 6, measured).
        self.background = True
        self.loaded = False
        self._lock = threading.RLock()  # the cache's state
        self._ann_lock = threading.Lock()  # usearch calls: graph changes never overlap a query
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._worker: threading.Thread | None = None
        self._closed = False
        self._epoch = 0
        self._reset()

    # -- state -------------------------------------------------------------------------------
    def _reset(self) -> None:
        self._epoch += 1  # background work started before this is discarded
        self._ids: list[str | None] = []  # by key; None once removed
        self._keys: dict[str, int] = {}
        self._codes = np.zeros(0, dtype=np.int32)  # by key
        self._alive = np.zeros(0, dtype=bool)  # by key
        self._prints = np.zeros(0, dtype=np.float32)  # by key (see ann.fingerprints)
        self._type_codes: dict[str, int] = {}
        self._matrix = np.zeros((0, self.dims), dtype=np.float32)  # keys _indexed.. (+ capacity)
        self._norms = np.zeros(0, dtype=np.float32)
        self._index: Index | None = None
        self._build_done = 0  # vectors in the graph being built (index_progress)
        self._pinned: list[np.ndarray] = []  # arrays whose rows the graph uses in place
        self._view = False  # the graph is a read-only memory map of index_path
        self._indexed = 0
        self._unremoved: list[int] = []  # dead keys still in the graph
        self._changed = 0  # keys indexed or removed since the graph was last saved
        self._save_due = False

    def __len__(self) -> int:
        return len(self._keys)

    def _code(self, memory_type: str) -> int:
        return self._type_codes.setdefault(memory_type, len(self._type_codes))

    def invalidate(self) -> None:
        """Forget everything (frees the matrix and the graph); the next search reloads."""
        with self._lock:
            self.loaded = False
            self._reset()

    def load(self, rows: Iterable[tuple[str, str, Sequence[float]]]) -> None:
        """Replace the contents with (id, memory_type, embedding) rows. A saved graph that
        covers them (same ids and vectors) is opened instead of rebuilt."""
        ids, types, vectors = [], [], []
        for id_, memory_type, embedding in rows:
            ids.append(id_)
            types.append(memory_type)
            vectors.append(embedding)
        self.load_matrix(ids, types, np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dims))

    def load_matrix(self, ids: list[str], types: list[str], matrix: np.ndarray) -> None:
        """:meth:`load` from parallel lists and a float32 matrix (row i is ``ids[i]``'s),
        which the cache keeps without a copy."""
        if matrix.shape != (len(ids), self.dims) or len(types) != len(ids):
            raise ValueError(f"load_matrix: {len(ids)} ids, {len(types)} types, a {matrix.shape} matrix")
        blas.prepare()  # the scans ahead need it: found here, not in a first query
        with self._lock:
            self._reset()
            saved = self._open_saved()
            if saved is not None and not self._adopt(saved, ids, types, matrix):
                saved = None
            if saved is None:
                unique = dict(zip(ids, range(len(ids)), strict=True))  # the last row of an id wins
                if len(unique) < len(ids):
                    keep = list(unique.values())
                    ids, types, matrix = list(unique), [types[i] for i in keep], matrix[keep]
                self._append_rows(ids, types, matrix)
            self.loaded = True
            self._kick()

    def open(self, rows: Iterable[tuple[str, str]]) -> bool:
        """Fill the cache from a saved graph, given the store's (id, memory_type) rows.

        True when the graph at ``index_path`` covers exactly these ids (and ``generation``):
        the cache is then loaded without reading an embedding. False changes nothing: the
        owner calls :meth:`load`.
        """
        blas.prepare()
        with self._lock:
            saved = self._open_saved()
            if saved is None:
                return False
            types = dict(rows)
            key_of = {id_: key for key, id_ in enumerate(saved.ids) if id_ is not None}
            if key_of.keys() != types.keys():
                return False
            self._reset()
            self._install_saved(saved)
            for id_, key in key_of.items():
                self._codes[key] = self._code(types[id_])
            self.loaded = True
            self._kick()
            return True

    def build_streamed(
        self,
        batches: Iterable[tuple[list[str], list[str], np.ndarray]],
        total: int,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> bool:
        """Fill the cache and build its quantised graph in the calling thread, one batch of
        (ids, memory types, float32 rows) at a time, then save it: the build holds the graph
        and one batch, never every vector (at 1M x 1,536 the float32 matrix :meth:`load`
        holds is 6.1 GB, an i8 graph 1.6 GB). For ``smriti import``, which waits for the graph.

        False changes nothing (the owner calls :meth:`load`): an f32 graph (it uses the loaded
        matrix in place, so streaming saves nothing), fewer than ``ann_threshold`` vectors, or
        a saved graph of these parameters (:meth:`load` keeps what it still covers).
        ``total`` is the expected number of rows (for the progress; more or fewer may come).
        """
        if not self.quantised or self.ann_threshold is None or total < self.ann_threshold:
            return False
        blas.prepare()  # as load_matrix: for the scans of the tail added after the build
        with self._lock:
            if self._open_saved() is not None:
                return False
            self._reset()
            epoch = self._epoch
        graph = ann.new_index(self.dims, self.params)
        ids: list[str] = []
        codes, prints = [], []
        started = reported = time.monotonic()
        for batch_ids, batch_types, rows in batches:
            start = len(ids)
            ids.extend(batch_ids)
            codes.append(np.fromiter((self._code(t) for t in batch_types), dtype=np.int32, count=len(rows)))
            prints.append(ann.fingerprints(rows))
            keys = np.arange(start, len(ids), dtype=np.uint64)
            graph.add(keys, rows, copy=True, threads=build_threads())
            self._build_done = len(ids)
            if on_progress is not None:
                on_progress(len(ids), max(total, len(ids)))
            if time.monotonic() - reported >= PROGRESS_SECONDS:
                reported = time.monotonic()
                logger.info(
                    "indexing vectors: %d of %d in %.0f s", len(ids), max(total, len(ids)), reported - started
                )
        with self._lock:
            if epoch != self._epoch or self._closed:
                return False
            if len(set(ids)) != len(ids):
                raise ValueError("build_streamed: an id came twice")
            size = len(ids)
            self._ids = list(ids)
            self._keys = dict(zip(ids, range(size), strict=True))
            self._codes = np.concatenate([np.zeros(0, dtype=np.int32), *codes])
            self._prints = np.concatenate([np.zeros(0, dtype=np.float32), *prints])
            self._alive = np.ones(size, dtype=bool)
            with self._ann_lock:
                self._index, self._view, self._indexed = graph, False, size
            self._changed = size
            self.loaded = True
        logger.info("built the HNSW vector index over %d vectors in %.0f s", size, time.monotonic() - started)
        self._save()
        return True

    def _open_saved(self) -> ann.Saved | None:
        if self.index_path is None or self.ann_threshold is None:
            return None
        saved = ann.open_saved(self.index_path, self.dims, self.params)
        if saved is not None and saved.generation != self.generation:
            logger.info("saved vector index %s is of another generation: rebuilding", self.index_path)
            return None
        return saved

    def _install_saved(self, saved: ann.Saved) -> None:
        """Keys and liveness from the sidecar; the graph memory-mapped; an empty tail."""
        size = len(saved.ids)
        self._ids = list(saved.ids)
        self._keys = {id_: key for key, id_ in enumerate(saved.ids) if id_ is not None}
        self._alive = np.array([id_ is not None for id_ in saved.ids], dtype=bool)
        self._codes = np.zeros(size, dtype=np.int32)
        self._prints = saved.prints.copy()
        self._index, self._view, self._indexed = saved.index, True, size

    def _adopt(self, saved: ann.Saved, ids: list[str], types: list[str], matrix: np.ndarray) -> bool:
        """Use ``saved`` for the loaded rows it holds unchanged; the others become the tail."""
        prints = ann.fingerprints(matrix)
        saved_key = {id_: key for key, id_ in enumerate(saved.ids) if id_ is not None}
        covered, fresh = {}, []
        for row, id_ in enumerate(ids):
            key = saved_key.get(id_)
            if key is not None and np.isclose(saved.prints[key], prints[row], rtol=1e-5, atol=1e-6):
                covered[id_] = (key, row)
            else:
                fresh.append(row)
        if len(covered) < 0.5 * len(ids):
            return False
        self._install_saved(saved)
        for id_, key in list(self._keys.items()):
            if id_ not in covered:  # removed or re-embedded since the save: dead in the graph
                del self._keys[id_]
                self._kill(key)
        for key, row in covered.values():
            self._codes[key] = self._code(types[row])
        fresh_rows = {ids[row]: row for row in fresh}  # the last row of an id wins
        chosen = list(fresh_rows.values())
        self._append_rows(list(fresh_rows), [types[row] for row in chosen], matrix[chosen])
        return True

    def _append_rows(self, ids: list[str], types: list[str], matrix: np.ndarray) -> None:
        """Append rows with fresh keys (no id may be present)."""
        start, count = len(self._ids), len(ids)
        self._ids.extend(ids)
        self._keys.update(zip(ids, range(start, start + count), strict=True))
        codes = np.fromiter((self._code(t) for t in types), dtype=np.int32, count=count)
        self._codes = np.concatenate([self._codes[:start], codes])
        self._alive = np.concatenate([self._alive[:start], np.ones(count, dtype=bool)])
        self._prints = np.concatenate([self._prints[:start], ann.fingerprints(matrix)])
        used = start - self._indexed
        # No copy of a freshly loaded matrix (at 100k it is 614 MB).
        self._matrix = np.concatenate([self._matrix[:used], matrix]) if used else matrix
        self._norms = row_norms(self._matrix)

    def _kill(self, key: int) -> None:
        self._ids[key] = None
        self._alive[key] = False
        if key < self._indexed:
            self._unremoved.append(key)
            self._changed += 1

    def add(self, id_: str, memory_type: str, embedding: Sequence[float]) -> None:
        """Append one vector (amortised O(1), never a graph insert); ignored while not loaded."""
        with self._lock:
            if not self.loaded:
                return
            self.remove(id_)
            key = len(self._ids)
            row = key - self._indexed
            if row == self._matrix.shape[0]:  # double the capacity: O(1) copies per row
                capacity = max(16, 2 * row)
                self._matrix = _grow(self._matrix, capacity)
                self._norms = _grow(self._norms, capacity)
            if key == self._codes.shape[0]:
                capacity = max(16, 2 * key)
                self._codes, self._alive = _grow(self._codes, capacity), _grow(self._alive, capacity)
                self._prints = _grow(self._prints, capacity)
            vector = np.asarray(embedding, dtype=np.float32)
            self._matrix[row] = vector
            self._norms[row] = row_norms(self._matrix[row : row + 1])[0]
            self._codes[key] = self._code(memory_type)
            self._alive[key] = True
            self._prints[key] = ann.fingerprints(self._matrix[row : row + 1])[0]
            self._ids.append(id_)
            self._keys[id_] = key
            self._kick()

    def remove(self, id_: str) -> None:
        with self._lock:
            key = self._keys.pop(id_, None)
            if key is not None:
                self._kill(key)
                self._kick()

    def retype(self, id_: str, memory_type: str) -> None:
        with self._lock:
            key = self._keys.get(id_)
            if key is not None:
                self._codes[key] = self._code(memory_type)

    def vector(self, id_: str) -> list[float] | None:
        """The stored embedding of ``id_`` (None when it has none or is unknown)."""
        with self._lock:
            key = self._keys.get(id_)
            if key is None:
                return None
            if key >= self._indexed:
                return self._matrix[key - self._indexed].tolist()
            if self.quantised:
                assert self.exact is not None
                found = self.exact([id_]).get(id_)
                return None if found is None else np.asarray(found, dtype=np.float32).tolist()
            assert self._index is not None
            with self._ann_lock:
                return np.asarray(self._index.get(key), dtype=np.float32).tolist()

    # -- search ------------------------------------------------------------------------------
    def search(self, query: np.ndarray, k: int, memory_type: str | None = None) -> list[tuple[str, float]]:
        """Top-k (id, cosine) for a query vector, best first; ties broken by id on every path."""
        with self._lock:
            size = len(self._ids)
            if not self._keys or k <= 0 or not np.any(query):
                return []
            code = None
            if memory_type is not None:
                code = self._type_codes.get(memory_type)
                if code is None:
                    return []
            # Exact over the tail (everything when there is no graph).
            tail = size - self._indexed
            wanted = self._alive[self._indexed : size]
            if code is not None:
                wanted = wanted & (self._codes[self._indexed : size] == code)
            rows, key_scores = best_rows(
                query, self._matrix[:tail], self._norms[:tail], np.flatnonzero(wanted), k
            )
            keys = rows + self._indexed
            if self._index is not None and self._indexed:
                graph_keys, graph_scores = self._graph_search(query, k, code)
                keys = np.concatenate([keys, graph_keys])
                key_scores = np.concatenate([key_scores, graph_scores])
            return self._top(keys, key_scores, k)

    def _graph_search(self, query: np.ndarray, k: int, code: int | None) -> tuple[np.ndarray, np.ndarray]:
        """HNSW candidates among the indexed keys, re-scored exactly from the graph's vectors."""
        assert self._index is not None
        usable = self._alive[: self._indexed]
        if code is not None:
            usable = usable & (self._codes[: self._indexed] == code)
        matching = int(np.count_nonzero(usable))
        if not matching:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        in_graph = len(self._index)
        if matching <= RARE and matching * 20 < in_graph:
            # A rare memory type: most graph candidates would be of other types. Scoring its
            # few vectors exactly is cheaper and exact.
            found = np.flatnonzero(usable)
        else:
            found = self._graph_candidates(query, k, usable, matching, in_graph)
        if not len(found):
            return found, np.zeros(0, dtype=np.float32)
        if self.quantised:
            found, vectors = self._exact_rows(found)
        else:
            with self._ann_lock:
                vectors = np.asarray(self._index.get(found.astype(np.uint64)), dtype=np.float32)
        norms = row_norms(vectors)
        return found, cosine(query, vectors, norms)

    def _exact_rows(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The exact vectors of ``keys`` (a quantised graph's candidates), read from the owner;
        a key whose vector the owner no longer has is dropped."""
        assert self.exact is not None
        ids = [str(self._ids[key]) for key in keys.tolist()]
        vectors = self.exact(ids)
        kept = [row for row, id_ in enumerate(ids) if id_ in vectors]
        matrix = np.zeros((len(kept), self.dims), dtype=np.float32)
        for out, row in enumerate(kept):
            matrix[out] = vectors[ids[row]]
        return keys[kept], matrix

    def _graph_candidates(
        self, query: np.ndarray, k: int, usable: np.ndarray, matching: int, in_graph: int
    ) -> np.ndarray:
        assert self._index is not None
        # Dead keys and other memory types take places among the candidates: ask for more.
        fetch = min(in_graph, int(candidate_count(k) * max(1.0, in_graph / matching)))
        beam = search_beam(self.params.expansion_search, in_graph)
        while True:
            with self._ann_lock:
                if self._index.expansion_search != beam:
                    self._index.expansion_search = beam  # type: ignore[misc]  # usearch's setter exists
                found = np.asarray(self._index.search(query, fetch).keys, dtype=np.int64)
            found = found[(found < self._indexed) & (found >= 0)]
            found = found[usable[found]]
            if len(found) >= min(k, matching) or fetch >= in_graph:
                break
            fetch = min(in_graph, 4 * fetch)
        return found

    def _top(self, keys: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The k best (id, score), ties by id: every key scoring at least the k-th best score
        is a candidate, so argpartition's arbitrary choice among equals never decides."""
        if k < len(scores):
            kth = np.partition(scores, len(scores) - k)[len(scores) - k]
            chosen = np.flatnonzero(scores >= kth)
            keys, scores = keys[chosen], scores[chosen]
        pairs = zip(keys.tolist(), scores.tolist(), strict=True)
        hits = [(str(self._ids[key]), float(score)) for key, score in pairs]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits[:k]

    # -- the background thread ---------------------------------------------------------------
    @property
    def ann_ready(self) -> bool:
        """True once queries go to the HNSW graph."""
        return self._index is not None

    def index_progress(self) -> tuple[int, int]:
        """(vectors in the HNSW graph or in its build so far, vectors in the cache)."""
        with self._lock:
            return (self._indexed if self._index is not None else self._build_done), len(self._ids)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until the thread has nothing left to do (tests, benchmarks)."""
        with self._lock:
            if self._worker is None or not self._needs_work():
                return True
        return self._idle.wait(timeout)

    def close(self) -> None:
        """Stop the thread (after its current batch) and save the graph if it changed."""
        worker = self._worker
        self._closed = True
        self._wake.set()
        if worker is not None:
            worker.join()
        self._worker = None
        if self._changed:
            self._save()

    def _needs_work(self) -> bool:
        if self.ann_threshold is None or not self.loaded or self._closed:
            return False
        if self._index is None:
            return len(self._keys) >= self.ann_threshold
        return len(self._ids) > self._indexed or bool(self._unremoved)

    def _kick(self) -> None:
        if not self._needs_work():
            return
        self._idle.clear()
        self._wake.set()
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="smriti-vector-index", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        # Lowest priority for this thread (Linux: per thread; usearch's helpers inherit it).
        if self.background:
            with contextlib.suppress(AttributeError, OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            try:
                while not self._closed and self._step():
                    if self._save_due:
                        self._save()
            except Exception:  # the exact path still answers
                logger.exception("the vector index thread failed: exact search from now on")
                with self._lock:
                    self.ann_threshold = None
                    self._index, self._view = None, False
                    self._reset()
                    self.loaded = False
            with self._lock:
                if not self._needs_work():
                    self._idle.set()

    def _step(self) -> bool:
        """One unit of background work; False when there is none."""
        with self._lock:
            if not self._needs_work():
                return False
            epoch = self._epoch
            if self._index is None:
                return self._build(epoch)
            path = self.index_path if self._view else None
        if path is not None:  # a memory map takes no inserts: copy it into RAM first
            graph = ann.restore(path, self.params)
            with self._lock:
                if epoch == self._epoch:
                    with self._ann_lock:
                        self._index, self._view, self._pinned = graph, False, []
            return True
        self._apply_batch(epoch)
        return True

    def _build(self, epoch: int) -> bool:
        """Build a graph over every vector (called with the lock held; releases it while adding)."""
        graph = ann.new_index(self.dims, self.params)
        pinned: list[np.ndarray] = []
        done = 0
        while True:
            with self._lock:
                if epoch != self._epoch or self._closed:  # close() does not wait for a build
                    return False
                size = len(self._ids)
                start = done
                end = min(size, done + 8 * BATCH)
                if end - start < BATCH // 4:
                    break  # the rest goes in with the lock held, then the graph takes over
                # An f32 graph uses these rows in place (copy=False): no second copy of the
                # vectors while it is built (a quantised one keeps its own, smaller, copies).
                # Dead rows go in too and are removed at the end.
                if not self.quantised and not any(array is self._matrix for array in pinned):
                    pinned.append(self._matrix)
                vectors = self._matrix[start:end]
            self._lock.release()
            try:
                graph.add(
                    np.arange(start, end, dtype=np.uint64),
                    vectors,
                    copy=self.quantised,
                    threads=build_threads(),
                )
            finally:
                self._lock.acquire()
            done = self._build_done = end
        # Still holding the lock: add the last few, drop the dead, and switch over.
        keys = np.arange(done, size)
        keys = keys[self._alive[done:size]]
        if len(keys):
            graph.add(keys.astype(np.uint64), self._matrix[keys - self._indexed])
        dead = np.flatnonzero(~self._alive[:size])
        dead = dead[np.isin(dead, np.asarray(graph.keys, dtype=np.int64))] if len(dead) else dead
        if len(dead):
            graph.remove(dead.astype(np.uint64))
        # Nothing is left in the tail (the lock was held since ``size`` was read); spare
        # capacity is not copied (it would touch hundreds of MB of untouched zero pages).
        self._matrix = np.zeros((0, self.dims), dtype=np.float32)
        self._norms = np.zeros(0, dtype=np.float32)
        with self._ann_lock:
            self._index, self._view, self._indexed, self._pinned = graph, False, size, pinned
        self._changed = size
        self._save_due = self.index_path is not None
        logger.info("built the HNSW vector index over %d vectors", len(self._keys))
        return True

    def _apply_batch(self, epoch: int) -> None:
        """Index up to BATCH tail vectors and apply pending removals."""
        with self._lock:
            if epoch != self._epoch or self._index is None:
                return
            graph = self._index
            start = self._indexed
            end = min(len(self._ids), start + BATCH)
            keys = np.arange(start, end)
            alive = self._alive[start:end]
            vectors = self._matrix[: end - start][alive].copy()
            keys = keys[alive]
            removals, self._unremoved = self._unremoved, []
        with self._ann_lock:
            if removals:
                graph.remove(np.asarray(removals, dtype=np.uint64))
            if len(keys):
                graph.add(keys.astype(np.uint64), vectors)
        with self._lock:
            if epoch != self._epoch:
                return
            count = end - start
            self._matrix, self._norms = self._matrix[count:], self._norms[count:]
            self._indexed = end
            # Removed while being inserted: in the graph now, so remove it from there too.
            self._unremoved += [key for key in keys.tolist() if not self._alive[key]]
            self._changed += count + len(removals)
            idle = not self._needs_work()
            self._save_due = self.index_path is not None and idle and self._changed >= 1_000

    def _save(self) -> None:
        """Save the graph and its sidecar. Only the thread (or :meth:`close`, after it stopped)
        changes the graph, so it is written without the lock: queries go on meanwhile."""
        with self._lock:
            self._save_due = False
            if self._index is None or self.index_path is None or self._view or not self._changed:
                return
            graph, path, indexed, changed = self._index, self.index_path, self._indexed, self._changed
            ids, prints = self._ids[:indexed], self._prints[:indexed].copy()
            # A key removed but still in the graph is listed as dead (None): that is what it is.
        try:
            ann.save(graph, path, ids, prints, self.generation, self.params)
        except OSError as error:
            logger.warning("could not save the vector index to %s: %s", path, error)
            return
        with self._lock:
            self._changed -= min(self._changed, changed)


def candidate_count(k: int) -> int:
    """How many candidates a top-``k`` query asks of the graph (before widening for dead keys
    and other memory types). Not grown with the graph: past 100k the beam is (search_beam)."""
    return max(4 * k, 50)


BEAM_BASE_SIZE = 100_000  # the configured beam up to this many vectors, then wider with size
BEAM_MAX_FACTOR = 4  # at most 4x the configured beam (1,024 for the default 256)


def search_beam(expansion: int, size: int) -> int:
    """The beam width (usearch ``expansion_search``) of a query over a graph of ``size``
    vectors: the configured one (``AnnParams.expansion_search``) up to 100k vectors, growing
    in proportion to the size past it, at most 4x.

    recall@10 at a fixed beam of 256 fell with size (i8 graphs, hashing embeddings, bench/
    RESULTS.md "1M memories"): 0.963 at 100k, 0.930 at 250k, 0.818 at 1M; a wider beam takes
    it back to 0.957 (512) at 250k and 0.883 (1,024) at 1M for ~10 ms more at 1M; 2,048 and
    4,096 gain 0.02 and 0.03 more at 1M for 2x and 4x that cost. Asking for more candidates
    (200 instead of 50) at the same beam gained nothing and cost their BLOB reads.
    """
    grown = expansion * size // BEAM_BASE_SIZE
    return max(expansion, min(grown, BEAM_MAX_FACTOR * expansion))


def build_threads() -> int:
    """usearch threads of a graph build: every core this process may run on (usearch's own
    default, 0, counts the machine's cores, not the process's affinity or cgroup)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _grow(array: np.ndarray, capacity: int) -> np.ndarray:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown


def row_norms(matrix: np.ndarray) -> np.ndarray:
    """Each row's L2 norm, without the matrix-sized temporary of ``np.linalg.norm(axis=1)``
    (614 MB at 100k x 1,536). Every norm the cache keeps or re-computes comes from here, so
    the exact and the re-scored HNSW paths give equal scores."""
    return np.sqrt(np.einsum("ij,ij->i", matrix, matrix))


def cosine(
    query: Sequence[float] | np.ndarray,
    matrix: np.ndarray,
    norms: np.ndarray | None = None,
    *,
    rough: bool = False,
) -> np.ndarray:
    """Cosine similarity of ``query`` with each row of ``matrix``, in the matrix's dtype.

    A zero row (or a zero query) scores 0. ``norms`` are the rows' norms when the caller
    keeps them (the vector cache does); computed here otherwise. The one brute-force cosine:
    the embedded store's cache calls it on float32 rows, the Cypher fallback on float64 rows.

    The exact score (the default) is numpy's ``einsum`` loop, which gives a row the same value
    wherever it sits, in a 10k matrix or among 50 gathered candidates, so every path ranks
    alike. ``rough`` computes it with a BLAS product instead, ~1.8x faster (2.2 against 3.9 ms
    for 10k x 1,536 float32), but a row's last bits then depend on its place in the matrix:
    :func:`best_rows` uses it only to find candidates, within :func:`rounding_margin`.
    """
    if not len(matrix):
        return np.zeros(0, dtype=matrix.dtype)
    q = np.asarray(query, dtype=matrix.dtype)
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return np.zeros(len(matrix), dtype=matrix.dtype)
    if norms is None:
        norms = np.linalg.norm(matrix, axis=1)
    if rough:
        with blas.one_blas_thread():  # two spinning OpenBLAS threads made it 8 ms (smriti/blas.py)
            dots = matrix @ (q / norm)
    else:
        dots = np.einsum("ij,j->i", matrix, q / norm)
    # Cosine: divide by each row's norm; a zero row scores 0 against anything.
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)


def rounding_margin(matrix: np.ndarray) -> float:
    """A bound on how far a rough cosine (:func:`cosine`) can be from the exact one.

    Each is a sum of ``d`` products of float numbers followed by a division: its relative error
    is at most ``(d + 2) * eps`` times the sum of the products' magnitudes, which is at most the
    two norms (Cauchy-Schwarz), so at most ``(d + 2) * eps`` of a cosine; the two differ by at
    most twice that (7.3e-4 for 1,536 float32 dims, against score gaps of ~1e-2 in a top 10).
    """
    return 2.0 * (matrix.shape[1] + 2) * float(np.finfo(matrix.dtype).eps)


def best_rows(
    query: np.ndarray, matrix: np.ndarray, norms: np.ndarray, rows: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ``rows`` of ``matrix`` that can be among the ``k`` best by cosine, with their exact
    cosines (every row whose exact score ties the k-th best included).

    A rough BLAS scan over the matrix finds the candidates: with R the k-th best rough score
    and m the :func:`rounding_margin`, the k-th best exact score is at least R - m, so a row of
    the exact top k has a rough score of at least R - 2m; only those are scored exactly.
    """
    if k >= len(rows):
        candidates = rows
    else:
        rough = cosine(query, matrix, norms, rough=True)[rows]
        kth = np.partition(rough, len(rough) - k)[len(rough) - k]
        candidates = rows[rough >= kth - 2.0 * rounding_margin(matrix)]
    if 2 * len(candidates) > len(matrix):  # nearly all (ties, a small matrix): no gather
        return candidates, cosine(query, matrix, norms)[candidates]
    return candidates, cosine(query, matrix[candidates], norms[candidates])
