"""The openCypher implementation of :class:`GraphStore` shared by Neo4j and FalkorDB.

:class:`CypherGraphStore` expresses every protocol method as parameterised Cypher sent
through one abstraction, ``run(query, params) -> list[dict]``. A backend module subclasses
it and supplies only what differs: the connection, the vector literal (FalkorDB's
``vecf32($v)``), and the vector / full-text index DDL and query procedures.

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
from typing import Any

from smriti.stores.base import (
    MEMORY_TYPES,
    NO_CLUSTER,
    UPDATABLE_FIELDS,
    Association,
    Capabilities,
    Cue,
    CueHit,
    EmbeddingMismatchError,
    Engram,
    EngramState,
    Relation,
    merge_associations,
    merge_cooccurrences,
    new_id,
    normalise_cue_name,
    validate_user_name,
)
from smriti.stores.cypher_search import (
    CUE_COLUMNS,
    ENGRAM_COLUMNS,
    CypherSearchMixin,
    association_from_row,
    cue_from_row,
    engram_from_row,
    floats,
    from_stored_time,
    number,
    to_stored_time,
)

log = logging.getLogger(__name__)

# Both cues of a CoOccurs/RelatesTo edge, created as keyword cues when missing.
_MERGE_CUES = (
    "MERGE (a:Cue {user: $user, name: $a}) ON CREATE SET a.id = $id_a, a.cue_type = 'keyword' "
    "MERGE (b:Cue {user: $user, name: $b}) ON CREATE SET b.id = $id_b, b.cue_type = 'keyword'"
)
_TIME_FIELDS = frozenset({"created_at", "last_accessed_at"})
_ASSOCIATION_COLUMNS = (
    "a.id AS source_id, b.id AS target_id, r.strength AS strength, "
    "r.relation_type AS relation_type, r.created_at AS created_at"
)


def _cue_name(name: str) -> str:
    normalised = normalise_cue_name(name)
    if not normalised:
        raise ValueError("a cue name cannot be empty")
    return normalised


class CypherGraphStore(CypherSearchMixin):
    """GraphStore over any openCypher database reachable through :meth:`run`.

    Subclasses implement :meth:`run`, :meth:`close` and the ``_index_*`` hooks and may
    override :meth:`vector_literal`.

    Attributes:
        backend: short backend name ("falkordb", "neo4j").
        user: the validated user whose memories this store sees.
        dims: embedding dimension; embeddings of another length are refused.
        isolation: the isolation mode ("tenant", "graph" or "database").
        location: where the data lives, for stats and logs (never with a password).

    Search, index management, stats and export live in :class:`CypherSearchMixin`.
    """

    backend = "cypher"
    capabilities = Capabilities(vector_index=True, fulltext=True, transactions=True)

    def __init__(self, *, user: str, dims: int, isolation: str, location: str) -> None:
        self.user = validate_user_name(user)
        self.dims = int(dims)
        self.isolation = isolation
        self.location = location
        self._index_cache: dict[str, bool] | None = None
        self._said_fallback: set[str] = set()

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

    def get_engram(self, engram_id: str) -> Engram | None:
        found = self.get_engrams([engram_id])
        return found[0] if found else None

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

    def update_engram(self, engram_id: str, **fields: Any) -> bool:
        return self.update_engrams({engram_id: fields}) == 1

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

    # -- cues ---------------------------------------------------------------------------------
    def upsert_cue(self, cue: Cue) -> Cue:
        """Insert by normalised name, or return the stored cue of that name unchanged.

        Raises:
            ValueError: the name is empty once normalised.
        """
        rows = self._q(
            "MERGE (c:Cue {user: $user, name: $name}) ON CREATE SET c.id = $id, c.cue_type = $cue_type, "
            f"c.embedding = {self.vector_literal('embedding')} "
            f"RETURN {CUE_COLUMNS}",
            name=_cue_name(cue.name),
            id=cue.id,
            cue_type=cue.cue_type,
            embedding=self._check_embedding(cue.embedding),
        )
        return cue_from_row(rows[0])

    def link_cue(self, engram_id: str, cue_id: str) -> None:
        rows = self._q(
            "MATCH (e:Engram {user: $user, id: $engram_id}), (c:Cue {user: $user, id: $cue_id}) "
            "MERGE (e)-[:EncodedBy]->(c) RETURN count(*) AS n",
            engram_id=engram_id,
            cue_id=cue_id,
        )
        if not rows or not rows[0]["n"]:
            log.debug("link_cue: engram %s or cue %s does not exist for this user", engram_id, cue_id)

    def _merge_cues(self, cues: Mapping[str, tuple[str, str]]) -> None:
        """MERGE cues without embeddings by name, name -> (id, cue_type) used when created."""
        if cues:
            self._q(
                "UNWIND $rows AS row MERGE (c:Cue {user: $user, name: row.name}) "
                "ON CREATE SET c.id = row.id, c.cue_type = row.cue_type",
                rows=[{"name": n, "id": id_, "cue_type": t} for n, (id_, t) in cues.items()],
            )

    def link_cues(self, engram_id: str, cues: Sequence[Cue]) -> list[Cue]:
        """Upsert the cues and MERGE their EncodedBy edges: two queries for any number of cues.

        Raises:
            ValueError: an empty cue name. EmbeddingMismatchError: a cue embedding of another size.
        """
        wanted: dict[str, Cue] = {}
        for cue in cues:
            name = _cue_name(cue.name)
            if name not in wanted:
                self._check_embedding(cue.embedding)
                wanted[name] = cue
        if not wanted:
            return []
        for cue in wanted.values():
            if cue.embedding is not None:  # rare: keep the vector expression of upsert_cue
                self.upsert_cue(cue)
        self._merge_cues({n: (c.id, c.cue_type) for n, c in wanted.items() if c.embedding is None})
        rows = self._q(
            "UNWIND $names AS name MATCH (c:Cue {user: $user, name: name}) "
            "OPTIONAL MATCH (e:Engram {user: $user, id: $engram_id}) "
            "FOREACH (x IN CASE WHEN e IS NULL THEN [] ELSE [1] END | MERGE (e)-[:EncodedBy]->(c)) "
            f"RETURN {CUE_COLUMNS}",
            names=list(wanted),
            engram_id=engram_id,
        )
        stored = {row["name"]: cue_from_row(row) for row in rows}
        return [stored[name] for name in wanted if name in stored]

    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]:
        found: dict[str, list[Cue]] = {engram_id: [] for engram_id in engram_ids}
        if not engram_ids:
            return found
        rows = self._q(
            "MATCH (e:Engram {user: $user})-[:EncodedBy]->(c:Cue {user: $user}) WHERE e.id IN $ids "
            f"RETURN e.id AS engram_id, {CUE_COLUMNS} ORDER BY engram_id, name",
            ids=list(engram_ids),
        )
        for row in rows:
            found[row["engram_id"]].append(cue_from_row(row))
        return found

    def engrams_by_cues(self, cue_names: Sequence[str], limit: int) -> list[CueHit]:
        names = list(dict.fromkeys(normalise_cue_name(n) for n in cue_names))
        if not names or limit <= 0:
            return []
        rows = self._q(
            "MATCH (c:Cue {user: $user})<-[:EncodedBy]-(e:Engram {user: $user}) WHERE c.name IN $names "
            "WITH e.id AS id, collect(c.name) AS cues "
            "RETURN id, cues ORDER BY size(cues) DESC, id ASC LIMIT $limit",
            names=names,
            limit=int(limit),
        )
        order = {name: i for i, name in enumerate(names)}
        return [CueHit(engram_id=r["id"], cues=tuple(sorted(r["cues"], key=order.__getitem__))) for r in rows]

    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        asked = {name: normalise_cue_name(name) for name in cue_names}
        if not asked:
            return {}
        rows = self._q(
            "MATCH (c:Cue {user: $user}) WHERE c.name IN $names "
            "OPTIONAL MATCH (c)<-[:EncodedBy]-(e:Engram {user: $user}) RETURN c.name AS name, count(e) AS n",
            names=sorted(set(asked.values())),
        )
        counts = {row["name"]: int(row["n"]) for row in rows}
        return {name: counts[norm] for name, norm in asked.items() if norm in counts}

    def add_cooccurrence(self, cue_a: str, cue_b: str, delta: float = 1.0, replace: bool = False) -> None:
        """Co-occurrence is symmetric: an edge in either direction is the one strengthened.

        Missing cues are created as ``keyword`` cues; a cue with itself is ignored.
        """
        a, b = _cue_name(cue_a), _cue_name(cue_b)
        if a == b:
            return
        self._q(
            f"{_MERGE_CUES} WITH a, b OPTIONAL MATCH (a)-[r:CoOccurs]-(b) WITH a, b, collect(r) AS edges "
            "FOREACH (e IN edges | SET e.strength = "
            "CASE WHEN $replace THEN $delta ELSE e.strength + $delta END) "
            "FOREACH (missing IN CASE WHEN size(edges) = 0 THEN [1] ELSE [] END | "
            "CREATE (a)-[:CoOccurs {strength: $delta}]->(b))",
            a=a,
            b=b,
            id_a=new_id(),
            id_b=new_id(),
            delta=float(delta),
            replace=bool(replace),
        )

    def add_relation(self, relation: Relation) -> None:
        """Idempotent per (source, relation, target, engram_id); missing cues are created.

        Raises:
            ValueError: the relation name or a cue name is empty.
        """
        name = relation.relation.strip()
        if not name:
            raise ValueError("a relation needs a name")
        self._q(
            f"{_MERGE_CUES} MERGE (a)-[r:RelatesTo {{relation: $relation, engram_id: $engram_id}}]->(b) "
            "ON CREATE SET r.created_at = $created_at",
            a=_cue_name(relation.source),
            b=_cue_name(relation.target),
            id_a=new_id(),
            id_b=new_id(),
            relation=name,
            engram_id=relation.engram_id,
            created_at=to_stored_time(relation.created_at),
        )

    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        """Batch of :meth:`add_cooccurrence` (additive): two queries for any number of pairs."""
        merged = merge_cooccurrences(pairs)
        if not merged:
            return
        self._merge_cues({name: (new_id(), "keyword") for pair in merged for name in pair})
        self._q(
            "UNWIND $rows AS row "
            "MATCH (a:Cue {user: $user, name: row.a}), (b:Cue {user: $user, name: row.b}) "
            "OPTIONAL MATCH (a)-[r:CoOccurs]-(b) WITH a, b, row, collect(r) AS edges "
            "FOREACH (e IN edges | SET e.strength = e.strength + row.w) "
            "FOREACH (missing IN CASE WHEN size(edges) = 0 THEN [1] ELSE [] END | "
            "CREATE (a)-[:CoOccurs {strength: row.w}]->(b))",
            rows=[{"a": a, "b": b, "w": w} for (a, b), w in merged.items()],
        )

    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        """Batch of :meth:`add_relation`; cues it creates get ``cue_type``. Two queries.

        Raises:
            ValueError: a relation without a name or with an empty cue name (nothing is written).
        """
        rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for relation in relations:
            name = relation.relation.strip()
            if not name:
                raise ValueError("a relation needs a name")
            a, b = _cue_name(relation.source), _cue_name(relation.target)
            rows.setdefault(
                (a, name, b, relation.engram_id),
                {
                    "a": a,
                    "b": b,
                    "relation": name,
                    "engram_id": relation.engram_id,
                    "created_at": to_stored_time(relation.created_at),
                },
            )
        if not rows:
            return
        self._merge_cues({n: (new_id(), cue_type) for row in rows.values() for n in (row["a"], row["b"])})
        self._q(
            "UNWIND $rows AS row "
            "MATCH (a:Cue {user: $user, name: row.a}), (b:Cue {user: $user, name: row.b}) "
            "MERGE (a)-[r:RelatesTo {relation: row.relation, engram_id: row.engram_id}]->(b) "
            "ON CREATE SET r.created_at = row.created_at",
            rows=list(rows.values()),
        )

    def _relations(self, where: str, order: str, **params: Any) -> list[Relation]:
        rows = self._q(
            f"MATCH (a:Cue {{user: $user}})-[r:RelatesTo]->(b:Cue {{user: $user}}) {where} "
            "RETURN a.name AS source, r.relation AS relation, b.name AS target, "
            f"r.engram_id AS engram_id, r.created_at AS created_at ORDER BY {order}",
            **params,
        )
        return [
            Relation(
                source=r["source"],
                relation=r["relation"],
                target=r["target"],
                engram_id=r["engram_id"] or "",
                created_at=from_stored_time(r["created_at"]),
            )
            for r in rows
        ]

    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        if not engram_ids:
            return []
        return self._relations(
            "WHERE r.engram_id IN $ids", "created_at, source, relation, target", ids=list(engram_ids)
        )

    def delete_orphan_cues(self) -> int:
        rows = self._q(
            "MATCH (c:Cue {user: $user}) OPTIONAL MATCH (c)<-[:EncodedBy]-(e:Engram) "
            "WITH c, count(e) AS n WHERE n = 0 WITH c, c.id AS id DETACH DELETE c RETURN count(id) AS n"
        )
        return int(rows[0]["n"]) if rows else 0

    # -- associations -------------------------------------------------------------------------
    def associate(self, association: Association) -> None:
        """Association is symmetric: an edge in either direction keeps the larger strength.

        A self-association or a missing engram is ignored.
        """
        if association.source_id == association.target_id:
            return
        self._q(
            "MATCH (a:Engram {user: $user, id: $source}), (b:Engram {user: $user, id: $target}) "
            "OPTIONAL MATCH (a)-[r:AssociatedWith]-(b) WITH a, b, collect(r) AS edges "
            "FOREACH (e IN edges | SET e.strength = CASE WHEN $strength > e.strength THEN $strength "
            "ELSE e.strength END) "
            "FOREACH (missing IN CASE WHEN size(edges) = 0 THEN [1] ELSE [] END | "
            "CREATE (a)-[:AssociatedWith {strength: $strength, relation_type: $relation_type, "
            "created_at: $created_at}]->(b))",
            source=association.source_id,
            target=association.target_id,
            strength=float(association.strength),
            relation_type=association.relation_type,
            created_at=to_stored_time(association.created_at),
        )

    def associate_many(self, associations: Sequence[Association]) -> None:
        """Batch of :meth:`associate`: one query for any number of associations."""
        merged = merge_associations(associations)
        if not merged:
            return
        self._q(
            "UNWIND $rows AS row "
            "MATCH (a:Engram {user: $user, id: row.source}), (b:Engram {user: $user, id: row.target}) "
            "OPTIONAL MATCH (a)-[r:AssociatedWith]-(b) WITH a, b, row, collect(r) AS edges "
            "FOREACH (e IN edges | SET e.strength = CASE WHEN row.strength > e.strength THEN row.strength "
            "ELSE e.strength END) "
            "FOREACH (missing IN CASE WHEN size(edges) = 0 THEN [1] ELSE [] END | "
            "CREATE (a)-[:AssociatedWith {strength: row.strength, relation_type: row.relation_type, "
            "created_at: row.created_at}]->(b))",
            rows=[
                {
                    "source": a.source_id,
                    "target": a.target_id,
                    "strength": float(a.strength),
                    "relation_type": a.relation_type,
                    "created_at": to_stored_time(a.created_at),
                }
                for a in merged
            ],
        )

    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        if not engram_ids:
            return []
        # Two directed matches joined by UNION (which also removes duplicates) so each side
        # can use the (user, id) index instead of scanning every edge of the user.
        match = "MATCH (a:Engram {user: $user})-[r:AssociatedWith]->(b:Engram {user: $user})"
        rows = self._q(
            f"{match} WHERE a.id IN $ids RETURN {_ASSOCIATION_COLUMNS} "
            f"UNION {match} WHERE b.id IN $ids RETURN {_ASSOCIATION_COLUMNS}",
            ids=list(engram_ids),
        )
        return sorted((association_from_row(r) for r in rows), key=lambda a: (a.source_id, a.target_id))

    def all_associations(self) -> list[Association]:
        rows = self._q(
            "MATCH (a:Engram {user: $user})-[r:AssociatedWith]->(b:Engram {user: $user}) "
            f"RETURN {_ASSOCIATION_COLUMNS} ORDER BY source_id, target_id"
        )
        return [association_from_row(r) for r in rows]


__all__ = ["CypherGraphStore", "from_stored_time", "to_stored_time"]
