"""Vector and keyword search of the openCypher stores, and their index management.

:class:`CypherSearch` answers through a :class:`~smriti.stores.cypher.connection.UserGraph`:

* Ranking helpers are backend-neutral (they take rows, not a database): vector hits are
  raw cosine similarity in [-1, 1], best first, ties broken by id after rounding to 6
  decimals (an HNSW index computes in float32, brute force in float64).
* Keyword search without an index uses the embedded stores' BM25
  :class:`~smriti.stores.search.KeywordIndex`, so both families of backend score
  the fallback identically; it is synced per query, not rebuilt (see ``KeywordIndex.sync``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from smriti.stores.base import Capabilities, ScoredId, StoreError
from smriti.stores.cypher.connection import UserGraph
from smriti.stores.search import KeywordIndex, cosine, normalise_scores, text_of, tokenize

log = logging.getLogger(__name__)

SCORE_DECIMALS = 6
# Seconds an answer of the database about its indexes is used for (CypherSearch.indexes).
INDEX_STATE_SECONDS = 1.0


# -- ranking ----------------------------------------------------------------------------------


def rank_scores(scored: Iterable[tuple[str, float]], k: int) -> list[ScoredId]:
    """The best ``k`` of ``(id, score)`` pairs: score descending, then id ascending.

    Scores are rounded to 6 decimals first so float noise (float32 in an index, float64
    here) cannot reorder hits that are equal; NaN (a zero vector inside an index) counts as 0.
    """
    rounded = [(i, 0.0 if math.isnan(s) else round(s, SCORE_DECIMALS)) for i, s in scored]
    rounded.sort(key=lambda pair: (-pair[1], pair[0]))
    return [ScoredId(i, s) for i, s in rounded[: max(k, 0)]]


class CypherSearch:
    """``vector_search``, ``fulltext_search`` and ``ensure_indexes`` of one user's Cypher store.

    Args:
        graph: the user's queries.
        capabilities: which indexes the database can build.
    """

    def __init__(
        self, graph: UserGraph, capabilities: Capabilities, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.graph = graph
        self.capabilities = capabilities
        self._said_fallback: set[str] = set()
        self._keywords = KeywordIndex()  # the keyword fallback, synced per query
        self.clock = clock
        # (when, its answer) of the database's last answer that every index answers, if it was
        self._built: tuple[float, dict[str, bool]] | None = None
        self._state_lock = threading.Lock()

    def indexes(self, refresh: bool = False) -> dict[str, bool]:
        """Which indexes exist and answer: asked of the database, or, when its last answer was
        that every index answers, that answer for INDEX_STATE_SECONDS (not with ``refresh``).

        Any other answer is never kept: another server process may build the indexes at any
        moment, and a process that kept "not yet" would search by brute force and BM25 while
        the others use the indexes, ranking the same memories differently. "Built" is kept for
        a second because a recall searches twice at once and a shared store checks at every
        store: each asked ``db.indexes()`` (2-6 ms of a recall at 10k under load, measured);
        now the first asks and the others wait for its answer. Indexes, once built, go only
        when dropped (an upgrade's migration, a re-embedding): a search through a dropped one
        fails and falls back at once (``_indexed_or_none``).
        """
        with self._state_lock:
            now = self.clock()
            if refresh or self._built is None or now - self._built[0] > INDEX_STATE_SECONDS:
                state = self.graph.connection.index_state()
                self._built = (now, state) if state and all(state.values()) else None
                return dict(state)
            return dict(self._built[1])

    def _indexed_or_none(self, kind: str, search: Callable[[], list[ScoredId]]) -> list[ScoredId] | None:
        """``search()`` through the ``kind`` index; None when the index turns out to be gone (dropped
        by another process since :meth:`indexes` answered) or fails while listed, so the caller
        searches without it: the exact search answers what the index would have."""
        try:
            hits = search()
        except StoreError as error:  # FalkorDB's vector query on a dropped index fails
            if self.indexes(refresh=True)[kind]:
                # Listed and operational, yet the query failed: seen once in thirty FalkorDB
                # restarts after kill -9 ("Invalid arguments for procedure
                # 'db.idx.vector.queryNodes'"), which failed a store the client retried. A search
                # without the index is exact, and if the database itself is the trouble it fails too.
                log.warning(
                    "%s: the %s index failed a search, searched without it: %s",
                    self.graph.backend,
                    kind,
                    error,
                )
            return None
        # Its full-text query on a dropped index answers nothing: an empty answer is checked.
        if not hits and not self.indexes(refresh=True)[kind]:
            return None
        return hits

    def _say_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._said_fallback:
            self._said_fallback.add(key)
            log.info(message, *args)

    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        query = self.graph.check_embedding(embedding)
        if k <= 0 or query is None or not any(query):
            return []  # cosine is undefined for a zero query vector
        if self.indexes()["vector"]:
            hits = self._indexed_or_none("vector", lambda: self._vector_indexed(query, k, memory_type))
            if hits is not None:
                return hits
        self._say_once("vector", "%s: no vector index yet, brute-force cosine search", self.graph.backend)
        join = self.graph.connection.embedding_join("e")
        match = (
            "MATCH (e:Engram {user: $user}) WHERE $memory_type IS NULL OR e.memory_type = $memory_type "
            f"{join.clause} WITH e, {join.expression} AS embedding WHERE embedding IS NOT NULL"
        )
        on_server = self.graph.connection.cosine_to_query("embedding")
        if on_server is not None:
            # The database computes every cosine and sends the best (ties at the cut: a margin).
            rows = self.graph.q(
                f"{match} WITH e.id AS id, {on_server} AS score RETURN id, score "
                "ORDER BY score DESC, id ASC LIMIT $fetch",
                memory_type=memory_type,
                q=self.graph.connection.vector_param(query),
                fetch=2 * k + 10,
            )
            return rank_scores(((r["id"], float(r["score"])) for r in rows), k)
        rows = self.graph.q(f"{match} RETURN e.id AS id, embedding", memory_type=memory_type)
        matrix = np.asarray([r["embedding"] for r in rows], dtype=np.float64)
        matrix = matrix.reshape(len(rows), self.graph.dims)
        sims = cosine(query, matrix).tolist()
        return rank_scores(zip((r["id"] for r in rows), sims, strict=True), k)

    def _vector_indexed(self, query: list[float], k: int, memory_type: str | None) -> list[ScoredId]:
        call, to_cosine = self.graph.connection.index_vector_call()
        # The index spans the whole graph (every tenant) and knows nothing of memory_type,
        # so filter after the call and widen the request until k survive or it runs dry.
        fetch = 2 * k + 10
        while True:
            rows = self.graph.q(
                f"{call} RETURN e.id AS id, e.user AS owner, e.memory_type AS memory_type, score",
                k=fetch,
                q=self.graph.connection.vector_param(query),
            )
            hits = [
                (r["id"], to_cosine(float(r["score"])))
                for r in rows
                if r["owner"] == self.graph.user and (memory_type is None or r["memory_type"] == memory_type)
            ]
            if len(hits) >= k or len(rows) < fetch:
                return rank_scores(hits, k)
            fetch *= 4

    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        """Keyword search over content, summary and facts; scores divided by the best, so in (0, 1].

        With the index: the backend's engine (stemming, its own scoring). Without: BM25 over
        the user's engrams, the same :class:`KeywordIndex` the embedded stores use.
        """
        terms = tokenize(query)
        if k <= 0 or not terms:
            return []
        if self.indexes()["fulltext"]:
            hits = self._indexed_or_none("fulltext", lambda: self._fulltext_indexed(terms, k, memory_type))
            if hits is not None:
                return hits
        self._say_once("fulltext", "%s: no full-text index yet, BM25 keyword scan", self.graph.backend)
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) RETURN e.id AS id, e.memory_type AS memory_type, "
            "e.content AS content, e.summary AS summary, e.facts AS facts"
        )
        # Re-read every query (another process may have written), re-tokenised only where changed.
        self._keywords.sync(
            (r["id"], r["memory_type"] or "episodic", text_of(r["content"], r["summary"], r["facts"]))
            for r in rows
        )
        return [ScoredId(i, s) for i, s in self._keywords.search(query, k, memory_type)]

    def _fulltext_indexed(self, terms: list[str], k: int, memory_type: str | None) -> list[ScoredId]:
        call, expression = self.graph.connection.index_fulltext_call(list(dict.fromkeys(terms)))
        rows = self.graph.q(
            f"{call} WITH node, score WHERE node.user = $user "
            "AND ($memory_type IS NULL OR node.memory_type = $memory_type) "
            "RETURN node.id AS id, score ORDER BY score DESC, id ASC LIMIT $k",
            q=expression,
            memory_type=memory_type,
            k=int(k),
        )
        hits = normalise_scores([(r["id"], float(r["score"])) for r in rows])
        return [ScoredId(i, s) for i, s in hits]

    # -- maintenance --------------------------------------------------------------------------
    def ensure_indexes(self, threshold: int, engrams: int) -> dict[str, bool]:
        """Create the missing indexes the database can build once ``engrams`` exceeds ``threshold``."""
        state = self.indexes(refresh=True)
        if engrams > threshold and not all(state.values()):
            able = {"vector": self.capabilities.vector_index, "fulltext": self.capabilities.fulltext}
            for kind, exists in state.items():
                if not exists and able[kind]:
                    graph = self.graph
                    log.info("%s: creating the %s index for user %s", graph.backend, kind, graph.user)
                    self.graph.connection.index_create(kind, self.graph.dims)
            state = self.indexes(refresh=True)
        return {"vector_index": state["vector"], "fulltext_index": state["fulltext"]}
