"""Cue and edge writes of the embedded store: :class:`GraphWrites`.

Each method is a batch write with the semantics of :mod:`smriti.stores.kuzu.graph` (symmetric CoOccurs and
AssociatedWith, missing cues created, self-edges ignored), in a few ``UNWIND`` queries
whatever the batch size (``associate_many``: one per distinct source of the new edges).
Cues are reached by primary key through the in-memory name -> id map (:class:`CueMap`), and
the edges recorded for engrams this process created (:class:`FreshEdges`) tell new edges from existing ones
without a query on the store pipeline's path.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from smriti.stores.base import (
    SPENT_STRENGTH,
    Association,
    Cue,
    Relation,
    check_dims,
    distinct_cues,
    merge_associations,
    merge_cooccurrences,
    merge_relations,
    new_id,
)
from smriti.stores.kuzu import copy
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.graph import CueInfo, CueMap, FreshEdges, relation_key
from smriti.stores.kuzu.schema import to_db

logger = logging.getLogger(__name__)


class GraphWrites:
    """``upsert_cues``, ``link_cue_ids``, ``add_cooccurrences``, ``add_relations``, ``associate_many``.

    Args:
        db: the store's connection.
        cues: the cue map (kept in step with the cues created here).
        fresh: the fresh-edge memo (kept in step with the edges created here).
        dims: the embedding dimension of cue embeddings.
    """

    def __init__(self, db: Connection, cues: CueMap, fresh: FreshEdges, dims: int) -> None:
        self.db = db
        self.cues = cues
        self.fresh = fresh
        self.dims = dims

    def _create_cues(self, cues: dict[str, tuple[str, str]]) -> None:
        """Create cues without embeddings, name -> (id, cue_type), in one query (names are new)."""
        if not cues:
            return
        rows = [{"id": id_, "name": name, "cue_type": type_} for name, (id_, type_) in cues.items()]
        if copy.worth_it(rows):  # an import's new cues (UNWIND ... CREATE: 3 s for 15k, measured)
            copy.copy_rows(self.db.run, "Cue", rows)
        else:
            self.db.run(
                "UNWIND $rows AS row CREATE (c:Cue {id: row.id, name: row.name, cue_type: row.cue_type})",
                {"rows": rows},
            )
        for name, (id_, cue_type) in cues.items():
            self.cues.add(name, CueInfo(id_, cue_type, False))

    def _ensure_cues(self, names: Iterable[str], cue_type: str = "keyword") -> dict[str, CueInfo]:
        """The cues of these normalised names, creating the missing ones (one query)."""
        known = self.cues.names()
        missing = {name: (new_id(), cue_type) for name in names if name not in known}
        self._create_cues(missing)
        return known

    @locked
    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]:
        """Insert cues by normalised name; at most two queries plus one per new cue with an embedding.

        New cues without embeddings are created in one UNWIND; the embeddings of existing
        cues that have one are read in one query.

        Raises:
            ValueError: an empty cue name. EmbeddingMismatchError: a cue embedding of another size.
        """
        names, wanted = distinct_cues(
            cues, lambda cue, name: check_dims(cue.embedding, self.dims, f"the embedding of cue {name!r}")
        )
        if not wanted:
            return []
        known = self.cues.names()
        plain = {n: (c.id, c.cue_type) for n, c in wanted.items() if n not in known and c.embedding is None}
        self._create_cues(plain)
        for name, cue in wanted.items():
            if name not in known:  # rare: a new cue with an embedding
                embedding = [float(v) for v in cue.embedding or ()]
                self.db.run(
                    "CREATE (c:Cue {id: $id, name: $name, cue_type: $cue_type, embedding: $embedding})",
                    {"id": cue.id, "name": name, "cue_type": cue.cue_type, "embedding": embedding},
                )
                self.cues.add(name, CueInfo(cue.id, cue.cue_type, True))
        infos = {name: known[name] for name in wanted}
        embedded = [info.id for info in infos.values() if info.has_embedding]
        vectors = {}
        if embedded:
            rows = self.db.run("MATCH (c:Cue) WHERE c.id IN $ids RETURN c.id, c.embedding", {"ids": embedded})
            vectors = {id_: embedding for id_, embedding in rows}
        stored = {
            name: Cue(name=name, cue_type=info.cue_type, id=info.id, embedding=vectors.get(info.id))
            for name, info in infos.items()
        }
        return [stored[name] for name in names]

    @locked
    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None:
        """Link the cues to the engram: the engram's existing links are read once (not at all for
        an engram this process created), the missing edges are made in one query."""
        wanted = list(dict.fromkeys(cue_ids))
        if not wanted:
            return
        edges = self.fresh.edges(engram_id)
        if edges is None:
            linked = {
                row[0]
                for row in self.db.run(
                    "MATCH (e:Engram {id: $engram})-[:EncodedBy]->(c:Cue) RETURN c.id", {"engram": engram_id}
                )
            }
        else:
            linked = {other for kind, other in edges if kind == "cue"}
        missing = [cue_id for cue_id in wanted if cue_id not in linked]
        if missing:
            created = self.db.run(
                "MATCH (e:Engram {id: $engram}) UNWIND $cues AS cue_id MATCH (c:Cue {id: cue_id}) "
                "CREATE (e)-[:EncodedBy]->(c) RETURN c.id",
                {"engram": engram_id, "cues": missing},
            )
            if len(created) < len(missing):
                logger.debug("link_cue_ids: engram %s or some of its cues do not exist", engram_id)
            self.cues.count_new_links(row[0] for row in created)
            for row in created:
                self.fresh.record(engram_id, "cue", row[0])

    @locked
    def link_many(self, links: Mapping[str, Sequence[str]]) -> None:
        """``link_cue_ids`` of many engrams: the links they have are read in one query and the
        missing ones written by one ``COPY`` (stores/kuzu/copy.py) when pyarrow is installed
        and they are many; ids of a missing engram or cue are skipped, as ``link_cue_ids`` does."""
        wanted = {engram_id: list(dict.fromkeys(ids)) for engram_id, ids in links.items() if ids}
        if sum(map(len, wanted.values())) < copy.COPY_MIN or copy.arrow() is None:
            for engram_id, cue_ids in wanted.items():
                self.link_cue_ids(engram_id, cue_ids)
            return
        engram_ids = list(wanted)
        existing = {
            row[0]
            for row in self.db.run("MATCH (e:Engram) WHERE e.id IN $ids RETURN e.id", {"ids": engram_ids})
        }
        linked = {
            (engram_id, cue_id)
            for engram_id, cue_id in self.db.run(
                "MATCH (e:Engram)-[:EncodedBy]->(c:Cue) WHERE e.id IN $ids RETURN e.id, c.id",
                {"ids": engram_ids},
            )
        }
        known = {info.id for info in self.cues.names().values()}
        rows = [
            {"from": engram_id, "to": cue_id}
            for engram_id, cues in wanted.items()
            if engram_id in existing
            for cue_id in cues
            if cue_id in known and (engram_id, cue_id) not in linked
        ]
        if not rows:
            return
        table = copy.table_of((("from", "STRING"), ("to", "STRING")), rows)
        self.db.run("COPY EncodedBy FROM $rows", {"rows": table})
        self.cues.count_new_links(row["to"] for row in rows)
        for row in rows:
            self.fresh.record(row["from"], "cue", row["to"])

    @locked
    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]], replace: bool = False) -> None:
        """Symmetric CoOccurs edges by cue name: at most four queries for any number of pairs."""
        merged = merge_cooccurrences(pairs, replace)
        if not merged:
            return
        cues = self._ensure_cues({name for pair in merged for name in pair})
        rows = {(cues[a].id, cues[b].id): w for (a, b), w in merged.items()}
        ids = sorted({id_ for pair in rows for id_ in pair})
        existing = self.db.run(
            "MATCH (a:Cue)-[:CoOccurs]->(b:Cue) WHERE a.id IN $ids AND b.id IN $ids RETURN a.id, b.id",
            {"ids": ids},
        )
        found = {(a, b) for a, b in existing}
        update, create = [], []
        for (a, b), w in rows.items():
            if (a, b) in found:
                update.append({"a": a, "b": b, "w": w})
            elif (b, a) in found:
                update.append({"a": b, "b": a, "w": w})
            else:
                create.append({"a": a, "b": b, "w": w})
        if update:
            self.db.run(
                "UNWIND $rows AS row MATCH (a:Cue {id: row.a})-[r:CoOccurs]->(b:Cue {id: row.b}) "
                + ("SET r.strength = row.w" if replace else "SET r.strength = r.strength + row.w"),
                {"rows": update},
            )
        if create and copy.worth_it(create):
            copy.copy_rows(
                self.db.run, "CoOccurs", [row | {"strength": row["w"]} for row in create], ends=("a", "b")
            )
        elif create:
            self.db.run(
                "UNWIND $rows AS row MATCH (a:Cue {id: row.a}), (b:Cue {id: row.b}) "
                "CREATE (a)-[:CoOccurs {strength: row.w}]->(b)",
                {"rows": create},
            )

    @locked
    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        """Take each delta off the pair's edge, either direction; edges at or below zero go.
        Pairs of unknown cues are skipped (nothing is created)."""
        known = self.cues.names()
        rows: list[dict[str, Any]] = [
            {"a": known[a].id, "b": known[b].id, "w": w}
            for (a, b), w in merge_cooccurrences(pairs).items()
            if a in known and b in known
        ]
        if not rows:
            return
        ids = sorted({str(row[end]) for row in rows for end in ("a", "b")})
        existing = self.db.run(
            "MATCH (a:Cue)-[:CoOccurs]->(b:Cue) WHERE a.id IN $ids AND b.id IN $ids RETURN a.id, b.id",
            {"ids": ids},
        )
        found = {(a, b) for a, b in existing}
        edges = [
            row if (row["a"], row["b"]) in found else row | {"a": row["b"], "b": row["a"]}
            for row in rows
            if (row["a"], row["b"]) in found or (row["b"], row["a"]) in found
        ]
        if edges:
            self.db.run(
                "UNWIND $rows AS row MATCH (a:Cue {id: row.a})-[r:CoOccurs]->(b:Cue {id: row.b}) "
                "SET r.strength = r.strength - row.w",
                {"rows": edges},
            )
            self.db.run(
                "UNWIND $rows AS row MATCH (a:Cue {id: row.a})-[r:CoOccurs]->(b:Cue {id: row.b}) "
                "WHERE r.strength <= $spent DELETE r",
                {"rows": edges, "spent": SPENT_STRENGTH},
            )

    @locked
    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        """RelatesTo edges by cue name, idempotent; new cues get ``cue_type``. At most three queries."""
        wanted = merge_relations(relations)
        if not wanted:
            return
        cues = self._ensure_cues({n for key in wanted for n in (key[0], key[2])}, cue_type)
        engrams = {key[3] for key in wanted}
        fresh = {e: edges for e in engrams if (edges := self.fresh.edges(e)) is not None}
        found: set[tuple[str, str, str, str]] = set()
        for edges in fresh.values():
            for kind, other in edges:
                if kind == "RelatesTo":
                    a, rel, b, engram = other.split("\x1f")
                    found.add((a, rel, b, engram))
        if len(fresh) < len(engrams):
            rows = self.db.run(
                "MATCH (a:Cue)-[r:RelatesTo]->(b:Cue) WHERE r.engram_id IN $engrams "
                "RETURN a.id, r.relation, b.id, r.engram_id",
                {"engrams": sorted(engrams - set(fresh))},
            )
            found.update((a, rel, b, e) for a, rel, b, e in rows)
        create: list[dict[str, Any]] = []
        for (source, name, target, engram_id), relation in wanted.items():
            key = (cues[source].id, name, cues[target].id, engram_id)
            if key not in found:
                found.add(key)
                row = dict(zip(("a", "relation", "b", "engram"), key, strict=True))
                create.append(row | {"at": to_db(relation.created_at)})
        if create and copy.worth_it(create):  # UNWIND ... MATCH {id: row.a} scans the Cue table per row
            copied = [row | {"engram_id": row["engram"], "created_at": row["at"]} for row in create]
            copy.copy_rows(self.db.run, "RelatesTo", copied, ends=("a", "b"))
        elif create:
            self.db.run(
                "UNWIND $rows AS row MATCH (a:Cue {id: row.a}), (b:Cue {id: row.b}) "
                "CREATE (a)-[:RelatesTo {relation: row.relation, engram_id: row.engram, "
                "created_at: row.at}]->(b)",
                {"rows": create},
            )
            for row in create:
                remembered = relation_key(row["a"], row["relation"], row["b"], row["engram"])
                self.fresh.record(row["engram"], "RelatesTo", remembered)

    @locked
    def associate_many(self, associations: Sequence[Association]) -> None:
        """Symmetric AssociatedWith edges: one CREATE query per distinct source for the new edges.

        Pairs touching an engram this process created are known to be new or existing without
        a query (the store pipeline's case); others are strengthened in both directions first.
        """
        merged = merge_associations(associations)
        if not merged:
            return
        rel = "AssociatedWith"
        absent: list[Association] = []
        maybe: list[Association] = []
        for a in merged:
            known = [
                (rel, other) in edges
                for x, other in ((a.source_id, a.target_id), (a.target_id, a.source_id))
                if (edges := self.fresh.edges(x)) is not None
            ]
            # A fresh end has exactly the edges recorded for it: one without this pair proves it new.
            (absent if known and not all(known) else maybe).append(a)
        if maybe:
            # Strengthen existing edges, trying both directions: Kuzu 0.11.3 fails an internal
            # assertion on SET through an undirected match entered from the edge's target.
            rows = [{"a": a.source_id, "b": a.target_id, "w": float(a.strength)} for a in maybe]
            done: set[frozenset[str]] = set()
            for flip in (False, True):
                todo = [r for r in rows if frozenset((r["a"], r["b"])) not in done]
                if not todo:
                    break
                updated = self.db.run(
                    "UNWIND $rows AS row "
                    "MATCH (x:Engram {id: row.a})-[r:AssociatedWith]->(y:Engram {id: row.b}) "
                    "SET r.strength = CASE WHEN row.w > r.strength THEN row.w ELSE r.strength END "
                    "RETURN x.id, y.id",
                    {"rows": [r | {"a": r["b"], "b": r["a"]} if flip else r for r in todo]},
                )
                done.update(frozenset(row) for row in updated)
            absent += [a for a in maybe if frozenset((a.source_id, a.target_id)) not in done]
        if not absent:
            return
        if copy.worth_it(absent):  # an import's batch: one COPY, not a query per source
            created = self._copy_associations(absent)
        else:
            created = self._create_associations(absent)
        for x, y in created:
            self.fresh.record(x, rel, y)
            self.fresh.record(y, rel, x)

    def _copy_associations(self, absent: list[Association]) -> list[tuple[str, str]]:
        """New AssociatedWith edges by one COPY; pairs with a missing end are skipped, as the
        row-by-row path skips them (a COPY would fail on them)."""
        ends = sorted({end for a in absent for end in (a.source_id, a.target_id)})
        present = {
            row[0] for row in self.db.run("MATCH (e:Engram) WHERE e.id IN $ids RETURN e.id", {"ids": ends})
        }
        rows = [
            {
                "a": a.source_id,
                "b": a.target_id,
                "strength": float(a.strength),
                "relation_type": a.relation_type,
                "created_at": to_db(a.created_at),
            }
            for a in absent
            if a.source_id in present and a.target_id in present
        ]
        if rows:
            copy.copy_rows(self.db.run, "AssociatedWith", rows, ends=("a", "b"))
        return [
            (a.source_id, a.target_id) for a in absent if a.source_id in present and a.target_id in present
        ]

    def _create_associations(self, absent: list[Association]) -> list[tuple[str, str]]:
        # Grouped by source: a primary-key lookup for it, then one UNWIND over its targets
        # (~2-4 ms at 10k engrams; matching both ends inside the UNWIND hash-joins the table twice).
        by_source: dict[str, list[dict[str, Any]]] = {}
        for a in absent:
            by_source.setdefault(a.source_id, []).append(
                {"b": a.target_id, "w": float(a.strength), "type": a.relation_type, "at": to_db(a.created_at)}
            )
        created = []
        for source, rows in by_source.items():
            created += self.db.run(
                "MATCH (x:Engram {id: $a}) UNWIND $rows AS row MATCH (y:Engram {id: row.b}) "
                "CREATE (x)-[:AssociatedWith {strength: row.w, relation_type: row.type, "
                "created_at: row.at}]->(y) RETURN x.id, y.id",
                {"a": source, "rows": rows},
            )
        return [(x, y) for x, y in created]
