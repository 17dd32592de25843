"""Vector and keyword search of the SQLite store: :class:`SearchIndex`.

Vectors: :class:`smriti.stores.search.VectorCache` (exact cosine; an approximate tier may
live behind the same interface), filled lazily from the embedding BLOBs at the first search
and kept in step by committed writes only (see ``Database.after_commit``), so a concurrent
search never sees a memory whose store may still roll back. Its own lock, not the
database's: a search must not wait for a store transaction that is embedding text.

Keywords: the FTS5 table ``engram_fts`` (see :mod:`.schema`), queried with Smriti's terms
OR-ed together and ranked by ``bm25()`` (k1=1.2, b=0.75, as :class:`KeywordIndex`; FTS5's
idf is ``ln((N - n + 0.5) / (n + 0.5))`` floored near zero where KeywordIndex adds 1 inside
the log, so very common terms weigh less here).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from smriti.config import DEFAULT_VECTOR_INDEX_DTYPE
from smriti.stores.ann import AnnParams
from smriti.stores.base import ScoredId
from smriti.stores.search import VectorCache, normalise_scores, tokenize
from smriti.stores.sqlite.connection import Database
from smriti.stores.vectors import ANN_THRESHOLD

if TYPE_CHECKING:
    from smriti.stores.sqlite.changes import ChangeFeed, EngramState

logger = logging.getLogger(__name__)


def _top_bm25_sql(memory_type: str | None) -> str:
    """The top ``:k`` matches of ``:match`` by BM25 (ties by creation time and content, not by
    random id), scored once.

    A common query term matches thousands of engrams; ordering them all by (score, id)
    would read each one's id from the engram table (half the query's time at 10k). The
    scores are materialised once, and only the matches scoring at least the k-th best
    score are joined for their ids: the same rows in the same order as ordering them all.
    With fewer than k matches the k-th score is NULL and every match is kept.
    """
    typed = ""
    if memory_type is not None:
        typed = " AND engram_fts.rowid IN (SELECT rowid FROM engram WHERE memory_type = :type)"
    return (
        "WITH s AS MATERIALIZED (SELECT engram_fts.rowid AS engram, -bm25(engram_fts) AS score "
        f"FROM engram_fts WHERE engram_fts MATCH :match{typed}) "
        "SELECT e.id, s.score FROM s JOIN engram e ON e.rowid = s.engram "
        "WHERE s.score >= IFNULL((SELECT score FROM s ORDER BY score DESC LIMIT 1 OFFSET :k - 1), s.score) "
        "ORDER BY s.score DESC, e.created_at, e.content, e.id LIMIT :k"
    )


class SearchIndex:
    """The vector cache and the FTS5 queries.

    Args:
        db: the store's database.
        load: returns the ids, memory types and float32 matrix of every embedded engram.
        count: the number of engrams (for ensure_indexes).
        dims: the embedding dimension.
        ids: returns (id, memory_type) of every embedded engram: a saved HNSW index that covers
            exactly these is opened memory-mapped, and no embedding is read at start.
        index_path: where the HNSW index is saved (past ``ANN_THRESHOLD`` vectors).
        vector_dtype: what the HNSW graph keeps of each vector (VECTOR_INDEX_DTYPE); a quantised
            graph's candidates are re-scored from the BLOBs ``exact`` reads.
        exact: {id: embedding} of the given ids, read from the database.
        batches: the number of embedded engrams and their (ids, memory types, float32 rows) in
            batches: :meth:`finish` builds a quantised graph from them without the whole matrix.
    """

    def __init__(
        self,
        db: Database,
        load: Callable[[], tuple[list[str], list[str], np.ndarray]],
        count: Callable[[], int],
        dims: int,
        *,
        ids: Callable[[], list[tuple[str, str]]] | None = None,
        index_path: Path | None = None,
        vector_dtype: str = DEFAULT_VECTOR_INDEX_DTYPE,
        exact: Callable[[list[str]], dict[str, np.ndarray]] | None = None,
        batches: Callable[[], tuple[int, Iterable[tuple[list[str], list[str], np.ndarray]]]] | None = None,
    ) -> None:
        self.db, self.dims = db, dims
        self._load, self._count, self._ids, self._batches = load, count, ids, batches
        # Exact cosine up to ANN_THRESHOLD vectors (~3 ms at 10k x 1,536), HNSW past it (57 ms
        # exact against 2.7 ms for the default i8 graph at 100k, recall@10 0.97), built in the
        # background and saved.
        self.vectors = VectorCache(
            dims,
            ann_threshold=ANN_THRESHOLD,
            index_path=index_path,
            params=AnnParams(dtype=vector_dtype),
            exact=exact,
        )
        self.vectors.generation = f"dims={dims}"
        self.lock = threading.Lock()
        self.fulltext_index = False  # reported once the store passes INDEX_THRESHOLD
        # Set when other processes write the file too: every search first applies their changes.
        self.feed: ChangeFeed | None = None

    # -- committed changes (CacheListener) -------------------------------------------------------
    def added(self, engram_id: str, memory_type: str, embedding: Sequence[float] | None) -> None:
        with self.lock:
            if embedding is None:
                self.vectors.remove(engram_id)
            else:
                self.vectors.add(engram_id, memory_type, embedding)

    def removed(self, engram_id: str) -> None:
        with self.lock:
            self.vectors.remove(engram_id)

    def retyped(self, engram_id: str, memory_type: str) -> None:
        with self.lock:
            self.vectors.retype(engram_id, memory_type)

    def invalidate(self) -> None:
        with self.lock:
            self.vectors.invalidate()

    def follow(self, present: Sequence[EngramState], removed: Sequence[str]) -> None:
        """Set the cached vectors of changed engrams to what the file holds (see ChangeFeed)."""
        with self.lock:
            for engram_id, memory_type, blob in present:
                if blob is None:
                    self.vectors.remove(engram_id)
                else:
                    # an array, as the cache stores it (no list of 1,536 Python floats)
                    self.vectors.add(engram_id, memory_type, np.frombuffer(blob, dtype="<f4"))  # type: ignore[arg-type]
            for engram_id in removed:
                self.vectors.remove(engram_id)

    def close(self) -> None:
        """Stop the index's background work and save it (when it has an HNSW graph)."""
        with self.lock:
            self.vectors.close()

    # -- queries -----------------------------------------------------------------------------------
    def warm(self) -> None:
        """Load the vector cache now (the server does it in the background at start)."""
        if self.feed is not None:
            self.feed.catch_up()
        with self.lock:
            self._ensure_loaded()

    def finish(self, on_progress: Callable[[int, int], None] | None = None, poll: float = 0.5) -> None:
        """Load the cache and wait for its HNSW graph to be built (past ANN_THRESHOLD) and
        saved (the thread saves it before it goes idle), so that the next server opens it
        memory-mapped instead of building it again. The caller waits: the build runs at
        normal priority (see VectorCache.background). A quantised graph with nothing saved to
        start from is built in this thread from batches of BLOBs (VectorCache.build_streamed):
        the build's memory is the graph and one batch, not every embedding as float32."""
        self.vectors.background = False
        if self.feed is not None:
            self.feed.catch_up()
        with self.lock:
            # A quantised graph is built straight from the BLOBs, a batch at a time; an f32
            # graph uses the loaded matrix in place, so it loads it as before.
            stream = self._batches if self.vectors.quantised else None
            if stream is not None and not self.vectors.loaded and not self._open_saved():
                total, batches = stream()
                self.vectors.build_streamed(batches, total, on_progress)
        self.warm()
        if not self.vectors.ann_ready and len(self.vectors) < ANN_THRESHOLD:
            return  # exact search below the threshold: nothing to build
        while not self.vectors.wait_idle(poll):
            if on_progress is not None:
                on_progress(*self.vectors.index_progress())
        if on_progress is not None:
            on_progress(*self.vectors.index_progress())

    def _ensure_loaded(self) -> None:
        """Fill the cache from the BLOBs (caller holds ``self.lock``). Changes committed while
        loading wait on the lock and are applied after: adds and removes are idempotent."""
        if self.vectors.loaded or self._open_saved():
            return
        ids, types, matrix = self._load()
        self.vectors.load_matrix(ids, types, matrix)
        logger.debug("%s: loaded %d embeddings into the vector cache", self.db.path, len(ids))

    def _open_saved(self) -> bool:
        """Fill the cache from the saved graph when it covers exactly the stored embeddings
        (caller holds ``self.lock``)."""
        saved = self.vectors.index_path
        if self._ids is not None and saved is not None and saved.exists() and self.vectors.open(self._ids()):
            logger.debug("%s: opened the saved vector index", self.db.path)
            return True
        return False

    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        if k <= 0:
            return []
        query = np.asarray(embedding, dtype=np.float32)
        if self.feed is not None:
            self.feed.catch_up()
        with self.lock:
            self._ensure_loaded()
            hits = self.vectors.search(query, k, memory_type)
        return [ScoredId(id_, score) for id_, score in hits]

    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        """BM25 over the FTS5 table, best first (ties by id), scores normalised into (0, 1]."""
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms or k <= 0:
            return []
        # Terms hold only [a-z0-9'_-] (smriti.text), so double-quoting makes each a plain
        # phrase: no FTS5 operator can come from the query.
        match = " OR ".join(f'"{term}"' for term in terms)
        rows = self.db.read(_top_bm25_sql(memory_type), {"match": match, "k": k, "type": memory_type})
        return [ScoredId(id_, score) for id_, score in normalise_scores([(i, float(s)) for i, s in rows])]

    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        """Report the index state. The FTS5 table is written from the first engram (cheaper
        than building it later) and reported as the full-text index once the store holds
        more than ``threshold`` engrams; vector search is the exact cache (no ANN tier yet)."""
        if not self.fulltext_index and self._count() > threshold:
            self.fulltext_index = True
        approximate = self.vectors.ann_ready
        return {"vector_index": approximate, "fulltext_index": self.fulltext_index}
