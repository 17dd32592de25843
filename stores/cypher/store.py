"""The openCypher implementation of :class:`GraphStore` shared by Neo4j and FalkorDB.

:class:`CypherGraphStore` expresses every protocol method as parameterised Cypher sent
through one abstraction, ``run(query, params) -> list[dict]``. A backend module subclasses
it and supplies only what differs: the connection, the vector literal (FalkorDB's
``vecf32($v)``), and the vector / full-text index DDL and query procedures.

The implementation is split over four modules, composed as mixins of :class:`CypherGraphStore`:

* :mod:`smriti.stores.cypher.store` (this module): backend hooks, helpers, metadata and engrams.
* :mod:`smriti.stores.cypher.graph`: cues, co-occurrence, relations and associations, one at a time.
* :mod:`smriti.stores.cypher.batch`: the batch writes (``link_cues``, ``add_cooccurrences``,
  ``add_relations``, ``associate_many``), a fixed number of queries for any batch size.
* :mod:`smriti.stores.cypher.search`: rows, search, index management, stats and export.

Decisions that hold on every Cypher backend:

* Every node (Engram, Cue, Meta) carries a ``user`` property and every MATCH filters by
  it, whatever the isolation mode. In ``tenant`` mode this is the isolation; in
  ``graph``/``database`` mode it is a second wall, and it lets one code path serve both.
  Relationships are only ever created between nodes matched with the same ``$user``.
* Cue names are unique per (user, name), so a cue name two users share never bridges them.
* Timestamps are stored as ISO-8601 strings in UTC with microseconds (fixed width, so
  string order is time order, and exact: FalkorDB returns doubles with only 15 significant
  digits, which would lose the microseconds of an epoch float). They come back tz-aware UTC.
* Query text contains no user input: labels and property names are constants, values are
  parameters; graph and database names derive from a validated user name.
* Semantics follow the embedded (Kuzu) store so results are the same everywhere:
  CoOccurs and AssociatedWith are symmetric (an edge either way is the one updated),
  self-edges are ignored, edges named by cue name create missing cues, vector scores are
  raw cosine similarity in [-1, 1], and every ranking breaks ties by id.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from smriti.stores.base import (
    MEMORY_TYPES,
    NO_CLUSTER,
    UPDATABLE_FIELDS,
    Capabilities,
    EmbeddingMismatchError,
    Engram,
    EngramState,
    StoreBase,
    validate_user_name,
)
from smriti.stores.cypher.batch import CypherBatchWriteMixin
from smriti.stores.cypher.graph import CypherCueGraphMixin
from smriti.stores.cypher.search import (
    ENGRAM_COLUMNS,
    CypherSearchMixin,
    engram_from_row,
    floats,
    from_stored_time,
    number,
    to_stored_time,
)
from smriti.stores.search import KeywordIndex

log = logging.getLogger(__name__)

_TIME_FIELDS = frozenset({"created_at", "last_accessed_at"})


class CypherGraphStore(CypherCueGraphMixin, CypherBatchWriteMixin, CypherSearchMixin, StoreBase):
    """GraphStore over any openCypher database reachable through :meth:`run`.

    Subclasses implement :meth:`run`, :meth:`close` and the ``_index_*`` hooks and may
    override :meth:`vector_literal`.

    Attributes:
        backend: short backend name ("falkordb", "neo4j").
        user: the validated user whose memories this store sees.
        dims: embedding dimension; embeddings of another length are refused.
        isolation: the isolation mode ("tenant", "graph" or "database").
        location: where the data lives, for stats and logs (never with a password).

    This class holds the backend hooks, metadata and engrams. Cues, co-occurrences, relations
    and associations live in :class:`~smriti.stores.cypher.graph.CypherCueGraphMixin`, their
    batch writes in :class:`~smriti.stores.cypher.batch.CypherBatchWriteMixin`, and search,
    index management, stats and export in :class:`CypherSearchMixin`.
    """

    backend = "cypher"
    capabilities = Capabilities(vector_index=True, fulltext=True)

    def __init__(self, *, user: str, dims: int, isolation: str, location: str) -> None:
        self.user = validate_user_name(user)
        self.dims = int(dims)
        self.isolation = isolation
        self.location = location
        self._index_cache: dict[str, bool] | None = None
        self._said_fallback: set[str] = set()
        self._keywords = KeywordIndex()  # the keyword fallback, synced per query

    # -- backend hooks ------------------------------------------------------------------------
    def run(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one parameterised query and return its rows as dicts keyed by column name."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def vector_literal(self, param: str) -> str:
        """Cypher expression turning parameter ``param`` (a list of floats or null) into a vector."""
        return f"${param}"

    def _index_state(self) -> dict[str, bool]:
        """Ask the database which of the vector and full-text indexes exist."""
        raise NotImplementedError

    def _index_create(self, kind: str) -> None:
        """Create the ``vector`` or ``fulltext`` index (idempotently)."""
        raise NotImplementedError

    def _index_vector_call(self) -> tuple[str, Callable[[float], float]]:
        """(``CALL ... YIELD node, score`` using ``$k`` and ``$q``, score -> cosine function)."""
        raise NotImplementedError

    def _index_fulltext_call(self, terms: list[str]) -> tuple[str, str]:
        """(``CALL ... YIELD node, score`` using ``$q``, the value of ``$q`` for these terms)."""
        raise NotImplementedError

    # -- helpers ------------------------------------------------------------------------------
    def _q(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """Run ``query`` with ``$user`` always bound to this store's user."""
        params["user"] = self.user
        return self.run(query, params)

    def _check_embedding(self, embedding: Sequence[float] | None) -> list[float] | None:
        values = floats(embedding)
        if values is not None and len(values) != self.dims:
            raise EmbeddingMismatchError(
                f"an embedding of {len(values)} dimensions cannot go into this {self.backend} store of "
                f"{self.dims} (EMBEDDING_DIMS); use the embedding model the store was written with"
            )
        return values

    @staticmethod
    def _engram_props(fields: Mapping[str, Any]) -> dict[str, Any]:
        props: dict[str, Any] = {}
        for name, value in fields.items():
            if name in _TIME_FIELDS:
                value = to_stored_time(value)
            elif name == "memory_type" and value not in MEMORY_TYPES:
                raise ValueError(f"memory_type must be one of {MEMORY_TYPES}, not {value!r}")
            elif name in ("importance", "decay_factor"):
                value = float(value)
            elif name in ("access_count", "cluster_id"):
                value = int(value)
            props[name] = value
        return props

    def _say_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._said_fallback:
            self._said_fallback.add(key)
            log.info(message, *args)

    # -- key/value metadata -------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._q("MATCH (m:Meta {user: $user, key: $key}) RETURN m.value AS value", key=key)
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self._q("MERGE (m:Meta {user: $user, key: $key}) SET m.value = $value", key=key, value=str(value))

    # -- engrams ------------------------------------------------------------------------------
    def create_engram(self, engram: Engram) -> None:
        fields = {name: getattr(engram, name) for name in UPDATABLE_FIELDS | {"created_at"}}
        self._q(
            "CREATE (e:Engram {user: $user, id: $id}) "
            f"SET e += $props, e.embedding = {self.vector_literal('embedding')}",
            id=engram.id,
            props=self._engram_props(fields),
            embedding=self._check_embedding(engram.embedding),
        )

    def get_engrams(self, ids: Sequence[str]) -> list[Engram]:
        if not ids:
            return []
        rows = self._q(
            f"MATCH (e:Engram {{user: $user}}) WHERE e.id IN $ids RETURN {ENGRAM_COLUMNS}, "
            "e.embedding AS embedding",
            ids=list(dict.fromkeys(ids)),
        )
        by_id = {row["id"]: engram_from_row(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        if not ids:
            return {}
        rows = self._q(
            "MATCH (e:Engram {user: $user}) WHERE e.id IN $ids RETURN e.id AS id, e.cluster_id AS cluster_id",
            ids=list(dict.fromkeys(ids)),
        )
        return {row["id"]: int(number(row, "cluster_id", NO_CLUSTER)) for row in rows}

    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        rows = []
        for engram_id, fields in updates.items():
            unknown = set(fields) - UPDATABLE_FIELDS
            if unknown:
                raise ValueError(f"cannot update engram field(s) {sorted(unknown)}")
            if any(value is None for value in fields.values()):
                # SET += would silently remove the property; the data model has no nulls.
                raise ValueError(f"None is not a value for engram fields: {dict(fields)}")
            rows.append({"id": engram_id, "props": self._engram_props(fields)})
        if not rows:
            return 0
        result = self._q(
            "UNWIND $rows AS row MATCH (e:Engram {user: $user, id: row.id}) "
            "SET e += row.props RETURN count(e) AS n",
            rows=rows,
        )
        return int(result[0]["n"]) if result else 0

    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        if not ids:
            return {}
        rows = self._q(
            "MATCH (e:Engram {user: $user}) WHERE e.id IN $ids "
            "SET e.access_count = coalesce(e.access_count, 0) + 1, e.last_accessed_at = $at, "
            "e.decay_factor = CASE WHEN coalesce(e.decay_factor, 1.0) + $boost > 1.0 THEN 1.0 "
            "ELSE coalesce(e.decay_factor, 1.0) + $boost END "
            "RETURN e.id AS id, e.access_count AS access_count, e.decay_factor AS decay_factor",
            ids=list(dict.fromkeys(ids)),
            at=to_stored_time(at),
            boost=float(boost),
        )
        return {row["id"]: (int(row["access_count"]), float(row["decay_factor"])) for row in rows}

    def delete_engram(self, engram_id: str) -> bool:
        rows = self._q(
            "MATCH (e:Engram {user: $user, id: $id}) WITH e, e.id AS id DETACH DELETE e "
            "RETURN count(id) AS n",
            id=engram_id,
        )
        return bool(rows and rows[0]["n"])

    def list_recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        if limit <= 0:
            return []
        rows = self._q(
            "MATCH (e:Engram {user: $user}) WHERE $memory_type IS NULL OR e.memory_type = $memory_type "
            f"RETURN {ENGRAM_COLUMNS}, e.embedding AS embedding "
            "ORDER BY last_accessed_at DESC, created_at DESC, id ASC LIMIT $limit",
            memory_type=memory_type,
            limit=int(limit),
        )
        return [engram_from_row(row) for row in rows]

    def engram_states(self) -> list[EngramState]:
        rows = self._q(
            "MATCH (e:Engram {user: $user}) RETURN e.id AS id, e.importance AS importance, "
            "e.access_count AS access_count, e.created_at AS created_at, "
            "e.last_accessed_at AS last_accessed_at, e.decay_factor AS decay_factor, "
            "e.cluster_id AS cluster_id ORDER BY id"
        )
        return [
            EngramState(
                id=r["id"],
                importance=number(r, "importance", 0.5),
                access_count=int(number(r, "access_count", 0)),
                created_at=from_stored_time(r["created_at"]),
                last_accessed_at=from_stored_time(r.get("last_accessed_at") or r["created_at"]),
                decay_factor=number(r, "decay_factor", 1.0),
                cluster_id=int(number(r, "cluster_id", NO_CLUSTER)),
            )
            for r in rows
        ]

    def count_engrams(self) -> int:
        return int(self._q("MATCH (e:Engram {user: $user}) RETURN count(e) AS n")[0]["n"])


__all__ = ["CypherGraphStore", "from_stored_time", "to_stored_time"]
