"""Cues, co-occurrences, relations and associations of the openCypher stores.

:class:`CypherGraphReads` answers the reads through a :class:`~smriti.stores.cypher.connection.UserGraph`;
the writes live in :mod:`smriti.stores.cypher.batch`.

Every node is matched with ``$user`` and cue names are unique per (user, name), so a cue name
two users share never bridges them. CoOccurs and AssociatedWith are symmetric (an edge either
way is the one updated), self-edges are ignored, and edges named by cue name create missing
``keyword`` cues.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from smriti.stores.base import (
    Association,
    Cue,
    CueHit,
    Relation,
    normalise_cue_name,
)
from smriti.stores.cypher.connection import UserGraph
from smriti.stores.cypher.rows import (
    CUE_COLUMNS,
    association_from_row,
    cue_from_row,
    from_stored_time,
)

log = logging.getLogger(__name__)

_ASSOCIATION_COLUMNS = (
    "a.id AS source_id, b.id AS target_id, r.strength AS strength, "
    "r.relation_type AS relation_type, r.created_at AS created_at"
)


# RelatesTo edges by their engram_id (the index FalkorDB and Neo4j keep on it), then their
# ends, checked to be the user's: a pattern naming (a:Cue {user: $user}) makes both databases
# start from the user's cues whatever index the edge has.
RELATIONS_BY_ENGRAM = "MATCH ()-[r:RelatesTo]->() WHERE r.engram_id"
RELATION_ENDS = "WITH r, startNode(r) AS a, endNode(r) AS b WHERE a.user = $user AND b.user = $user"


class CypherGraphReads:
    """Cue, relation and association reads of the GraphStore protocol (and orphan cleanup)."""

    def __init__(self, graph: UserGraph) -> None:
        self.graph = graph

    # -- cues ---------------------------------------------------------------------------------
    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]:
        found: dict[str, list[Cue]] = {engram_id: [] for engram_id in engram_ids}
        if not engram_ids:
            return found
        rows = self.graph.q(
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
        rows = self.graph.q(
            "MATCH (c:Cue {user: $user})<-[:EncodedBy]-(e:Engram {user: $user}) WHERE c.name IN $names "
            # Ties by creation time and content, not the random id: two builds of the same content
            # must shortlist the same memories at the cut.
            "WITH e.id AS id, e.created_at AS at, e.content AS content, collect(c.name) AS cues "
            "RETURN id, cues ORDER BY size(cues) DESC, at ASC, content ASC, id ASC LIMIT $limit",
            names=names,
            limit=int(limit),
        )
        order = {name: i for i, name in enumerate(names)}
        return [CueHit(engram_id=r["id"], cues=tuple(sorted(r["cues"], key=order.__getitem__))) for r in rows]

    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        asked = {name: normalise_cue_name(name) for name in cue_names}
        if not asked:
            return {}
        # From the cue's degree where the database offers it (FalkorDB: a hub cue's thousands of
        # edges are not walked; 11 ms -> 2 ms for a recall's 200 names at 10k, measured). Both
        # count the same: EncodedBy joins an engram to a cue of the same user, once (MERGE).
        degree = self.graph.connection.encoded_count("c")
        match = "MATCH (c:Cue {user: $user}) WHERE c.name IN $names "
        rows = self.graph.q(
            f"{match} RETURN c.name AS name, {degree} AS n"
            if degree
            else f"{match} OPTIONAL MATCH (c)<-[:EncodedBy]-(e:Engram {{user: $user}}) "
            "RETURN c.name AS name, count(e) AS n",
            names=sorted(set(asked.values())),
        )
        counts = {row["name"]: int(row["n"]) for row in rows}
        return {name: counts[norm] for name, norm in asked.items() if norm in counts}

    def relations(self, where: str, order: str, **params: Any) -> list[Relation]:
        return self._relations(
            f"MATCH (a:Cue {{user: $user}})-[r:RelatesTo]->(b:Cue {{user: $user}}) {where}", order, params
        )

    def _relations(self, match: str, order: str, params: dict[str, Any]) -> list[Relation]:
        rows = self.graph.q(
            f"{match} "
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
        if "" in engram_ids:  # FalkorDB's range index leaves empty strings out: walk, unindexed
            return self.relations(
                "WHERE toString(r.engram_id) IN $ids",
                "created_at, source, relation, target",
                ids=list(engram_ids),
            )
        # From the edges' engram_id index, not from the user's cues: matching (a:Cue {user})
        # first walks every cue of the user (160 ms at 10k on FalkorDB, measured; 0.5 ms this way).
        return self._relations(
            f"{RELATIONS_BY_ENGRAM} IN $ids {RELATION_ENDS}",
            "created_at, source, relation, target",
            {"ids": list(engram_ids)},
        )

    def related_entities(self, cue_names: Sequence[str], limit: int) -> list[Relation]:
        """Edges from or to these cues, newest first (see the protocol), at most ``limit``."""
        names = sorted({normalise_cue_name(n) for n in cue_names} - {""})
        if limit <= 0 or not names:
            return []
        # Two directed matches joined by UNION, so each side can use the (user, name) index
        # instead of one OR over every RelatesTo edge of the user.
        match = "MATCH (a:Cue {user: $user})-[r:RelatesTo]->(b:Cue {user: $user})"
        columns = (
            "a.name AS source, r.relation AS relation, b.name AS target, "
            "r.engram_id AS engram_id, r.created_at AS created_at"
        )
        # Each side keeps its newest ``limit`` (a hub entity must not load all its edges).
        newest = "ORDER BY created_at DESC, source, relation, target, engram_id LIMIT $limit"
        rows = self.graph.q(
            f"{match} WHERE a.name IN $names RETURN {columns} {newest} "
            f"UNION {match} WHERE b.name IN $names RETURN {columns} {newest}",
            names=names,
            limit=int(limit),
        )
        found = [
            Relation(
                r["source"],
                r["relation"],
                r["target"],
                r["engram_id"] or "",
                from_stored_time(r["created_at"]),
            )
            for r in rows
        ]
        # Newest first as the protocol orders them (sorted here: a UNION cannot be ordered as one).
        found.sort(key=lambda r: (r.source, r.relation, r.target, r.engram_id))
        found.sort(key=lambda r: r.created_at, reverse=True)
        return found[:limit]

    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int:
        """Cues that encode no engram (only among ``names`` when given), with their edges."""
        # The name filter only when given: "$names IS NULL OR c.name IN $names" made FalkorDB
        # walk every cue of the user for a forget's few names. A cue's engrams from its degree
        # where the database offers it (see cue_engram_counts).
        degree = self.graph.connection.encoded_count("c")
        unused = (
            f"WITH c WHERE {degree} = 0"
            if degree
            else "OPTIONAL MATCH (c)<-[:EncodedBy]-(e:Engram) WITH c, count(e) AS n WHERE n = 0"
        )
        rows = self.graph.q(
            "MATCH (c:Cue {user: $user}) "
            + ("" if names is None else "WHERE c.name IN $names ")
            + f"{unused} WITH c, c.id AS id DETACH DELETE c RETURN count(id) AS n",
            names=None if names is None else sorted({normalise_cue_name(name) for name in names}),
        )
        return int(rows[0]["n"]) if rows else 0

    # -- associations -------------------------------------------------------------------------
    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        if not engram_ids:
            return []
        # Two directed matches joined by UNION (which also removes duplicates) so each side
        # can use the (user, id) index instead of scanning every edge of the user.
        match = "MATCH (a:Engram {user: $user})-[r:AssociatedWith]->(b:Engram {user: $user})"
        rows = self.graph.q(
            f"{match} WHERE a.id IN $ids RETURN {_ASSOCIATION_COLUMNS} "
            f"UNION {match} WHERE b.id IN $ids RETURN {_ASSOCIATION_COLUMNS}",
            ids=list(engram_ids),
        )
        return sorted((association_from_row(r) for r in rows), key=lambda a: (a.source_id, a.target_id))

    def all_associations(self) -> list[Association]:
        rows = self.graph.q(
            "MATCH (a:Engram {user: $user})-[r:AssociatedWith]->(b:Engram {user: $user}) "
            f"RETURN {_ASSOCIATION_COLUMNS} ORDER BY source_id, target_id"
        )
        return [association_from_row(r) for r in rows]
