"""Rows, search, index management, statistics and export for the openCypher stores.

Split from :mod:`smriti.stores.cypher.store` to keep modules short.

* Rows: timestamps are stored as ISO-8601 strings in UTC and come back tz-aware; a
  property missing on an older node reads back with the data model's default.
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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from smriti.stores import records as rec
from smriti.stores.base import (
    ENGRAM_FIELDS,
    NO_CLUSTER,
    Association,
    Capabilities,
    Cue,
    Engram,
    Relation,
    ScoredId,
    StoreStats,
)
from smriti.stores.search import KeywordIndex, cosine_similarities, normalise_scores, text_of, tokenize

log = logging.getLogger(__name__)

SCORE_DECIMALS = 6
_EXPORT_PAGE = 500
# Property projections shared by the store and its export.
# Every Engram field but the embedding (read only where needed), derived from the dataclass.
ENGRAM_COLUMNS = ", ".join(f"e.{name} AS {name}" for name in ENGRAM_FIELDS if name != "embedding")
CUE_COLUMNS = "c.id AS id, c.name AS name, c.cue_type AS cue_type, c.embedding AS embedding"


# -- rows -------------------------------------------------------------------------------------
def to_stored_time(value: datetime) -> str:
    """A datetime as the stored string: ISO-8601, UTC, microseconds (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def from_stored_time(value: Any) -> datetime:
    """The inverse of :func:`to_stored_time`; also accepts epoch seconds."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def number(row: Mapping[str, Any], key: str, default: float) -> float:
    """``row[key]`` as a float, ``default`` when the property is missing."""
    value = row.get(key)
    return float(default if value is None else value)


def floats(values: Sequence[float] | None) -> list[float] | None:
    """A vector as plain Python floats (None stays None)."""
    # Drivers serialise parameters themselves: plain Python floats only (a numpy array
    # would be stringified as "[0.1 0.2]" by the FalkorDB client).
    return None if values is None else [float(v) for v in values]


def engram_from_row(row: Mapping[str, Any]) -> Engram:
    """An Engram from a row of ENGRAM_COLUMNS (plus ``embedding``)."""
    # Properties are schemaless here: nodes written before a property existed (an older
    # Smriti, an import from elsewhere) read back with the data model's defaults.
    return Engram(
        id=row["id"],
        content=row.get("content") or "",
        summary=row.get("summary") or "",
        memory_type=row.get("memory_type") or "episodic",
        importance=number(row, "importance", 0.5),
        access_count=int(number(row, "access_count", 0)),
        created_at=from_stored_time(row["created_at"]),
        last_accessed_at=from_stored_time(row.get("last_accessed_at") or row["created_at"]),
        decay_factor=number(row, "decay_factor", 1.0),
        embedding=floats(row.get("embedding")),
        source=row.get("source") or "",
        tags=row.get("tags") or "",
        cluster_id=int(number(row, "cluster_id", NO_CLUSTER)),
    )


def cue_from_row(row: Mapping[str, Any]) -> Cue:
    return Cue(id=row["id"], name=row["name"], cue_type=row["cue_type"], embedding=floats(row["embedding"]))


def association_from_row(row: Mapping[str, Any]) -> Association:
    return Association(
        source_id=row["source_id"],
        target_id=row["target_id"],
        strength=float(row["strength"]),
        relation_type=row["relation_type"] or "similar",
        created_at=from_stored_time(row["created_at"]),
    )


# -- ranking ----------------------------------------------------------------------------------


def rank_scores(scored: Iterable[tuple[str, float]], k: int) -> list[ScoredId]:
    """The best ``k`` of ``(id, score)`` pairs: score descending, then id ascending.

    Scores are rounded to 6 decimals first so float noise (float32 in an index, float64
    here) cannot reorder hits that are equal; NaN (a zero vector inside an index) counts as 0.
    """
    rounded = [(i, 0.0 if math.isnan(s) else round(s, SCORE_DECIMALS)) for i, s in scored]
    rounded.sort(key=lambda pair: (-pair[1], pair[0]))
    return [ScoredId(i, s) for i, s in rounded[: max(k, 0)]]


class CypherSearchMixin:
    """Search, indexes, stats and export of :class:`~smriti.stores.cypher.CypherGraphStore`.

    Relies on the store's ``_q``, ``_check_embedding``, ``_index_*`` hooks and row converters.
    """

    backend: str
    user: str
    dims: int
    isolation: str
    location: str
    _index_cache: dict[str, bool] | None
    _keywords: KeywordIndex

    if TYPE_CHECKING:  # provided by CypherGraphStore and CypherCueGraphMixin

        def _q(self, query: str, **params: Any) -> list[dict[str, Any]]: ...
        def _check_embedding(self, embedding: Sequence[float] | None) -> list[float] | None: ...
        def _say_once(self, key: str, message: str, *args: Any) -> None: ...
        def _index_state(self) -> dict[str, bool]: ...
        def _index_create(self, kind: str) -> None: ...
        def _index_vector_call(self) -> tuple[str, Callable[[float], float]]: ...
        def _index_fulltext_call(self, terms: list[str]) -> tuple[str, str]: ...
        def _relations(self, where: str, order: str, **params: Any) -> list[Relation]: ...
        def count_engrams(self) -> int: ...
        def all_associations(self) -> list[Association]: ...

    capabilities: Capabilities

    # -- search -------------------------------------------------------------------------------
    def _indexes(self, refresh: bool = False) -> dict[str, bool]:
        if self._index_cache is None or refresh:
            self._index_cache = self._index_state()
        return self._index_cache

    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        query = self._check_embedding(embedding)
        if k <= 0 or query is None or not any(query):
            return []  # cosine is undefined for a zero query vector
        if self._indexes()["vector"]:
            return self._vector_indexed(query, k, memory_type)
        self._say_once("vector", "%s: no vector index yet, brute-force cosine search", self.backend)
        rows = self._q(
            "MATCH (e:Engram {user: $user}) WHERE e.embedding IS NOT NULL "
            "AND ($memory_type IS NULL OR e.memory_type = $memory_type) "
            "RETURN e.id AS id, e.embedding AS embedding",
            memory_type=memory_type,
        )
        sims = cosine_similarities(query, [r["embedding"] for r in rows])
        return rank_scores(zip((r["id"] for r in rows), sims, strict=True), k)

    def _vector_indexed(self, query: list[float], k: int, memory_type: str | None) -> list[ScoredId]:
        call, to_cosine = self._index_vector_call()
        # The index spans the whole graph (every tenant) and knows nothing of memory_type,
        # so filter after the call and widen the request until k survive or it runs dry.
        fetch = 2 * k + 10
        while True:
            rows = self._q(
                f"{call} RETURN node.id AS id, node.user AS owner, node.memory_type AS memory_type, score",
                k=fetch,
                q=query,
            )
            hits = [
                (r["id"], to_cosine(float(r["score"])))
                for r in rows
                if r["owner"] == self.user and (memory_type is None or r["memory_type"] == memory_type)
            ]
            if len(hits) >= k or len(rows) < fetch:
                return rank_scores(hits, k)
            fetch *= 4

    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        """Keyword search over content and summary; scores divided by the best, so in (0, 1].

        With the index: the backend's engine (stemming, its own scoring). Without: BM25 over
        the user's engrams, the same :class:`KeywordIndex` the embedded stores use.
        """
        terms = tokenize(query)
        if k <= 0 or not terms:
            return []
        if self._indexes()["fulltext"]:
            call, expression = self._index_fulltext_call(list(dict.fromkeys(terms)))
            rows = self._q(
                f"{call} WITH node, score WHERE node.user = $user "
                "AND ($memory_type IS NULL OR node.memory_type = $memory_type) "
                "RETURN node.id AS id, score ORDER BY score DESC, id ASC LIMIT $k",
                q=expression,
                memory_type=memory_type,
                k=int(k),
            )
            hits = normalise_scores([(r["id"], float(r["score"])) for r in rows])
            return [ScoredId(i, s) for i, s in hits]
        self._say_once("fulltext", "%s: no full-text index yet, BM25 keyword scan", self.backend)
        rows = self._q(
            "MATCH (e:Engram {user: $user}) RETURN e.id AS id, e.memory_type AS memory_type, "
            "e.content AS content, e.summary AS summary"
        )
        # Re-read every query (another process may have written), re-tokenised only where changed.
        self._keywords.sync(
            (r["id"], r["memory_type"] or "episodic", text_of(r["content"], r["summary"])) for r in rows
        )
        return [ScoredId(i, s) for i, s in self._keywords.search(query, k, memory_type)]

    # -- maintenance --------------------------------------------------------------------------
    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        state = self._indexes(refresh=True)
        if self.count_engrams() > threshold and not all(state.values()):
            able = {"vector": self.capabilities.vector_index, "fulltext": self.capabilities.fulltext}
            for kind, exists in state.items():
                if not exists and able[kind]:
                    log.info("%s: creating the %s index for user %s", self.backend, kind, self.user)
                    self._index_create(kind)
            state = self._indexes(refresh=True)
        return {"vector_index": state["vector"], "fulltext_index": state["fulltext"]}

    def stats(self) -> StoreStats:
        engrams = self._q(
            "MATCH (e:Engram {user: $user}) RETURN count(e) AS n, "
            "count(DISTINCT CASE WHEN e.cluster_id <> -1 THEN e.cluster_id END) AS clusters"
        )[0]
        cues = self._q("MATCH (c:Cue {user: $user}) RETURN count(c) AS n")[0]["n"]
        links = self._q(
            "MATCH (:Engram {user: $user})-[r:EncodedBy]->(:Cue {user: $user}) RETURN count(r) AS n"
        )[0]["n"]
        associations = self._q(
            "MATCH (:Engram {user: $user})-[r:AssociatedWith]->(:Engram {user: $user}) RETURN count(r) AS n"
        )[0]["n"]
        indexes = self._indexes(refresh=True)
        return StoreStats(
            engrams=int(engrams["n"]),
            cues=int(cues),
            associations=int(associations),
            cue_links=int(links),
            clusters=int(engrams["clusters"]),
            vector_index=indexes["vector"],
            fulltext_index=indexes["fulltext"],
            backend=self.backend,
            location=self.location,
            extra={"isolation": self.isolation, "user": self.user, "dims": self.dims},
        )

    # -- portability --------------------------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        for row in self._q("MATCH (m:Meta {user: $user}) RETURN m.key AS key, m.value AS value ORDER BY key"):
            yield rec.meta_record(row["key"], row["value"])
        after = ""
        while True:  # keyset pages: engrams carry their embeddings, so never all in one reply
            rows = self._q(
                f"MATCH (e:Engram {{user: $user}}) WHERE e.id > $after RETURN {ENGRAM_COLUMNS}, "
                "e.embedding AS embedding ORDER BY id LIMIT $page",
                after=after,
                page=_EXPORT_PAGE,
            )
            for row in rows:
                yield rec.engram_record(engram_from_row(row))
            if len(rows) < _EXPORT_PAGE:
                break
            after = rows[-1]["id"]
        for row in self._q(f"MATCH (c:Cue {{user: $user}}) RETURN {CUE_COLUMNS} ORDER BY name"):
            yield rec.cue_record(cue_from_row(row))
        for row in self._q(
            "MATCH (e:Engram {user: $user})-[:EncodedBy]->(c:Cue {user: $user}) "
            "RETURN e.id AS engram_id, c.name AS cue ORDER BY engram_id, cue"
        ):
            yield rec.encoded_by_record(row["engram_id"], row["cue"])
        for association in self.all_associations():
            yield rec.association_record(association)
        for row in self._q(
            "MATCH (a:Cue {user: $user})-[r:CoOccurs]->(b:Cue {user: $user}) "
            "RETURN a.name AS source, b.name AS target, r.strength AS strength ORDER BY source, target"
        ):
            yield rec.co_occurs_record(row["source"], row["target"], float(row["strength"]))
        for relation in self._relations("", "source, relation, target, engram_id"):
            yield rec.relation_record(relation)
