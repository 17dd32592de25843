"""Cue and edge writes of the openCypher stores: :class:`CypherGraphWrites`.

Each method is a batch write with the semantics of :mod:`smriti.stores.cypher.graph`, sent as
one or two ``UNWIND`` queries whatever the batch size (a new cue with an embedding, which is
rare, gets a query of its own). The store pipeline writes the cues and edges of a memory this
way. Pairs and associations are merged first
(:func:`~smriti.stores.base.merge_cooccurrences`, :func:`~smriti.stores.base.merge_associations`),
so a batch naming one pair twice or both ways round writes one edge.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from smriti.stores.base import (
    SPENT_STRENGTH,
    Association,
    Cue,
    Relation,
    checked_relation,
    distinct_cues,
    merge_associations,
    merge_cooccurrences,
    new_id,
)
from smriti.stores.cypher.connection import UserGraph
from smriti.stores.cypher.graph import RELATION_ENDS, RELATIONS_BY_ENGRAM
from smriti.stores.cypher.nodes import End, seek_clause
from smriti.stores.cypher.rows import CUE_COLUMNS, cue_from_row, to_stored_time

# The edges of type ``rel`` between the bound ``a`` and ``b``, either way round, as the list
# ``edges`` (a symmetric relation is one edge in one direction). Two directed matches, not one
# undirected ``(a)-[r]-(b)`` collected: FalkorDB checks a directed edge between two bound nodes
# in its adjacency matrix, but walked the undirected pattern at ~40 us a row even with no edge
# of the type in the graph (30k co-occurrences of an import: 2.2 s against 0.8 s, measured).
_EDGES_EITHER_WAY = (
    "OPTIONAL MATCH (a)-[r:{rel}]->(b) WITH a, b, row, r OPTIONAL MATCH (b)-[s:{rel}]->(a) "
    "WITH a, b, row, [e IN [r, s] WHERE e IS NOT NULL] AS edges"
)

# The ends of the edge rows an import may write by seeking their nodes (see .nodes).
_PAIR_ENDS = (End("a", "Cue", "name", "a"), End("b", "Cue", "name", "b"))
_LINK_ENDS = (End("e", "Engram", "id", "engram"), End("c", "Cue", "id", "cue"))
_ASSOCIATION_ENDS = (End("a", "Engram", "id", "source"), End("b", "Engram", "id", "target"))


class CypherGraphWrites:
    """``upsert_cues``, ``link_cues``, ``link_cue_ids``, ``add_cooccurrences``, ``add_relations``,
    ``associate_many``."""

    def __init__(self, graph: UserGraph) -> None:
        self.graph = graph

    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]:
        """MERGE the cues by name and read them back: one query, plus one per new cue with an embedding.

        Raises:
            ValueError: an empty cue name. EmbeddingMismatchError: a cue embedding of another size.
        """
        names, wanted = distinct_cues(cues, lambda cue, _: self.graph.check_embedding(cue.embedding))
        if not wanted:
            return []
        self._merge_embedded_cues(wanted)
        rows = self._merge_cues({n: (c.id, c.cue_type) for n, c in wanted.items()})
        stored = {row["name"]: cue_from_row(row) for row in rows}
        return [stored[name] for name in names]

    def _merge_embedded_cues(self, cues: Mapping[str, Cue]) -> None:
        """Create the cues of ``cues`` (name -> cue) that carry an embedding, one write each
        (rare: the backend's vector expression takes a parameter); now, or with the open batch."""
        for name, cue in cues.items():
            if cue.embedding is not None:
                self.graph.write(
                    "MERGE (c:Cue {user: $user, name: $name}) ON CREATE SET c.id = $id, "
                    f"c.cue_type = $cue_type, c.embedding = {self.graph.vector_literal('embedding')}",
                    name=name,
                    id=cue.id,
                    cue_type=cue.cue_type,
                    embedding=self.graph.vector_param(cue.embedding),
                )

    def _merge_cues(self, cues: Mapping[str, tuple[str, str]]) -> list[dict[str, Any]]:
        """MERGE cues by name, name -> (id, cue_type) used when created; returns their rows (and,
        during an import, remembers their node ids: see .nodes)."""
        if not cues:
            return []
        nodes = self.graph.nodes
        node = f", {self.graph.connection.node_id('c')} AS node" if nodes is not None else ""
        rows = self.graph.q(
            "UNWIND $rows AS row MERGE (c:Cue {user: $user, name: row.name}) "
            f"ON CREATE SET c.id = row.id, c.cue_type = row.cue_type RETURN {CUE_COLUMNS}{node}",
            rows=[{"name": n, "id": id_, "cue_type": t} for n, (id_, t) in cues.items()],
        )
        if nodes is not None:
            nodes.remember("Cue", "name", rows)
            nodes.remember("Cue", "id", rows)
        return rows

    def _merge_missing_cues(self, cues: Mapping[str, tuple[str, str]]) -> None:
        """Create the cues not there yet (name -> (id, cue_type)) before edges name them; a
        write whose rows are not needed, so a store's batch can queue it. During an import the
        rows are read (their node ids are remembered: see .nodes)."""
        if self.graph.nodes is not None:
            self._merge_cues(cues)
        elif cues:
            self.graph.write(
                "UNWIND $rows AS row MERGE (c:Cue {user: $user, name: row.name}) "
                "ON CREATE SET c.id = row.id, c.cue_type = row.cue_type",
                rows=[{"name": n, "id": id_, "cue_type": t} for n, (id_, t) in cues.items()],
            )

    def link_cues(self, engram_id: str, cues: Sequence[Cue]) -> list[Cue]:
        """``StoreBase.link_cues`` as one write by cue name (a store's batch queues it): the cues
        that exist are read first, and the others are answered as given (created by the write),
        one per distinct name in the order given.

        Linking by name, not by the id a new cue is given, keeps the link when another process
        creates a cue of that name between the read and the write (its id and type win).
        """
        names, wanted = distinct_cues(cues, lambda cue, _: self.graph.check_embedding(cue.embedding))
        if not wanted:
            return []
        rows = self.graph.q(
            f"MATCH (c:Cue {{user: $user}}) WHERE c.name IN $names RETURN {CUE_COLUMNS}", names=list(wanted)
        )
        stored = {row["name"]: cue_from_row(row) for row in rows}
        missing = {name: replace(cue, name=name) for name, cue in wanted.items() if name not in stored}
        self._merge_embedded_cues(missing)
        # OPTIONAL: a missing engram still gets its cues, unlinked (the protocol's rule).
        self.graph.write(
            "OPTIONAL MATCH (e:Engram {user: $user, id: $engram_id}) WITH e UNWIND $rows AS row "
            "MERGE (c:Cue {user: $user, name: row.name}) "
            "ON CREATE SET c.id = row.id, c.cue_type = row.cue_type "
            "WITH e, c WHERE e IS NOT NULL MERGE (e)-[:EncodedBy]->(c)",
            engram_id=engram_id,
            rows=[{"name": n, "id": c.id, "cue_type": c.cue_type} for n, c in wanted.items()],
        )
        return [stored.get(name) or missing[name] for name in dict.fromkeys(names)]

    def _seek_first(
        self, ends: Sequence[End], body: str, rows: list[dict[str, Any]], **params: Any
    ) -> list[dict[str, Any]]:
        """During an import, write the rows whose ends it knows by node id with ``body`` (Cypher
        over ``row`` and the ends' variables) after seeking them; returns the rows left to write
        by key (all of them outside an import). See :mod:`.nodes`."""
        nodes = self.graph.nodes
        if nodes is None:
            return rows
        known, unknown = nodes.split(rows, ends)
        if known:
            found = self.graph.q(
                f"UNWIND $rows AS row {seek_clause(ends, self.graph.connection.node_id)} {body} "
                "WITH DISTINCT row._i AS i RETURN collect(i) AS done",
                rows=known,
                **params,
            )
            done = set(found[0]["done"]) if found else set()
            unknown += [row for row in known if row["_i"] not in done]
        return unknown

    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None:
        """MERGE the EncodedBy edges in one query; ids of a missing engram or cue are a no-op."""
        ids = list(dict.fromkeys(cue_ids))
        if ids:
            self.graph.write(
                "MATCH (e:Engram {user: $user, id: $engram_id}) UNWIND $ids AS cue_id "
                "MATCH (c:Cue {user: $user, id: cue_id}) MERGE (e)-[:EncodedBy]->(c)",
                engram_id=engram_id,
                ids=ids,
            )

    def link_many(self, links: Mapping[str, Sequence[str]]) -> None:
        """``link_cue_ids`` of many engrams (engram id -> cue ids) in one query (an import's batch)."""
        unique = {e: list(dict.fromkeys(ids)) for e, ids in links.items() if ids}
        pairs = [{"engram": e, "cue": cue} for e, ids in unique.items() for cue in ids]
        left = self._seek_first(_LINK_ENDS, "MERGE (e)-[:EncodedBy]->(c)", pairs)
        if len(left) < len(pairs):  # the rest by key, grouped by engram again
            unique = {}
            for pair in left:
                unique.setdefault(pair["engram"], []).append(pair["cue"])
        rows = [{"engram": e, "cues": ids} for e, ids in unique.items()]
        if rows:
            self.graph.write(
                "UNWIND $rows AS row MATCH (e:Engram {user: $user, id: row.engram}) "
                "UNWIND row.cues AS cue_id MATCH (c:Cue {user: $user, id: cue_id}) "
                "MERGE (e)-[:EncodedBy]->(c)",
                rows=rows,
            )

    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]], replace: bool = False) -> None:
        """Symmetric CoOccurs edges by cue name: two queries for any number of pairs."""
        merged = merge_cooccurrences(pairs, replace)
        if not merged:
            return
        body = (
            f"{_EDGES_EITHER_WAY.format(rel='CoOccurs')} "
            "FOREACH (e IN edges | SET e.strength = "
            "CASE WHEN $replace THEN row.w ELSE e.strength + row.w END) "
            "FOREACH (missing IN CASE WHEN size(edges) = 0 THEN [1] ELSE [] END | "
            "CREATE (a)-[:CoOccurs {strength: row.w}]->(b))"
        )
        rows: list[dict[str, Any]] = [{"a": a, "b": b, "w": w} for (a, b), w in merged.items()]
        rows = self._seek_first(_PAIR_ENDS, body, rows, replace=bool(replace))
        if not rows:
            return
        self._merge_missing_cues({row[end]: (new_id(), "keyword") for row in rows for end in ("a", "b")})
        self.graph.write(
            "UNWIND $rows AS row "
            f"MATCH (a:Cue {{user: $user, name: row.a}}), (b:Cue {{user: $user, name: row.b}}) {body}",
            rows=rows,
            replace=bool(replace),
        )

    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        """Take each delta off the pair's edge (either direction), then remove the spent ones:
        two queries; nothing is created."""
        merged = merge_cooccurrences(pairs)
        if not merged:
            return
        rows = [{"a": a, "b": b, "w": w} for (a, b), w in merged.items()]
        edge = "MATCH (a:Cue {user: $user, name: row.a})-[r:CoOccurs]-(b:Cue {user: $user, name: row.b}) "
        self.graph.write(f"UNWIND $rows AS row {edge}SET r.strength = r.strength - row.w", rows=rows)
        self.graph.write(
            f"UNWIND $rows AS row {edge}WHERE r.strength <= $spent DELETE r", rows=rows, spent=SPENT_STRENGTH
        )

    def delete_relations_of(self, engram_id: str) -> None:
        """The RelatesTo facts recorded with this engram's id."""
        self.graph.write(f"{RELATIONS_BY_ENGRAM} = $engram_id {RELATION_ENDS} DELETE r", engram_id=engram_id)

    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        """RelatesTo edges by cue name, idempotent; cues it creates get ``cue_type``. Two queries.

        Raises:
            ValueError: a relation without a name or with an empty cue name (nothing is written).
        """
        rows: dict[tuple[str, str, str, str], dict[str, Any]] = {}
        for relation in relations:
            a, name, b = checked_relation(relation)
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
        self._merge_missing_cues(
            {n: (new_id(), cue_type) for row in rows.values() for n in (row["a"], row["b"])}
        )
        self.graph.write(
            "UNWIND $rows AS row "
            "MATCH (a:Cue {user: $user, name: row.a}), (b:Cue {user: $user, name: row.b}) "
            "MERGE (a)-[r:RelatesTo {relation: row.relation, engram_id: row.engram_id}]->(b) "
            "ON CREATE SET r.created_at = row.created_at",
            rows=list(rows.values()),
        )

    def associate_many(self, associations: Sequence[Association]) -> None:
        """Symmetric AssociatedWith edges, keeping the larger strength: one query for any number."""
        merged = merge_associations(associations)
        if not merged:
            return
        body = (
            f"{_EDGES_EITHER_WAY.format(rel='AssociatedWith')} "
            "FOREACH (e IN edges | SET e.strength = CASE WHEN row.strength > e.strength THEN row.strength "
            "ELSE e.strength END) "
            "FOREACH (missing IN CASE WHEN size(edges) = 0 THEN [1] ELSE [] END | "
            "CREATE (a)-[:AssociatedWith {strength: row.strength, relation_type: row.relation_type, "
            "created_at: row.created_at}]->(b))"
        )
        rows = self._seek_first(
            _ASSOCIATION_ENDS,
            body,
            [
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
        if rows:
            self.graph.write(
                "UNWIND $rows AS row MATCH (a:Engram {user: $user, id: row.source}), "
                f"(b:Engram {{user: $user, id: row.target}}) {body}",
                rows=rows,
            )
