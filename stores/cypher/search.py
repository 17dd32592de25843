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
from collections.abc import Iterable, Sequence

import numpy as np

from smriti.stores.base import Capabilities, ScoredId
from smriti.stores.cypher.connection import UserGraph
from smriti.stores.search import KeywordIndex, cosine, normalise_scores, text_of, tokenize

log = logging.getLogger(__name__)

SCORE_DECIMALS = 6


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

    def __init__(self, graph: UserGraph, capabilities: Capabilities) -> None:
        self.graph = graph
        self.capabilities = capabilities
        self._said_fallback: set[str] = set()
        self._keywords = KeywordIndex()  # the keyword fallback, synced per query

    def indexes(self, refresh: bool = True) -> dict[str, bool]:
        """Which indexes exist, asked of the database every time (``refresh`` is kept for callers).

        Not cached: another server process may build (or drop) them, and a process that kept
        its first answer would search by brute force and BM25 while the others use the indexes,
        ranking the same memories differently. One ``db.indexes()`` call costs well under a
        millisecond next to the search it decides.
        """
        return self.graph.connection.index_state()

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
            return self._vector_indexed(query, k, memory_type)
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
