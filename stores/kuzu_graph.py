"""Cues and edges of the embedded store: a mixin of :class:`smriti.stores.kuzu.KuzuStore`.

Split from the store class only to keep modules short; it uses the store's ``_run``,
``_check_dims`` and lock. Cue names are unique per store, but Kuzu has no secondary index
on ``Cue.name``, so the name -> id map is held in memory (this process holds the file lock,
so nobody else can change it) and every query reaches cues by primary key.

This module holds the reads and the one-at-a-time writes; their batch forms (``link_cues``,
``add_cooccurrences``, ``add_relations``, ``associate_many``) live in :mod:`smriti.stores.kuzu_batch`.

CoOccurs and AssociatedWith are symmetric relations stored as one directed edge: an
existing edge in either direction is the one updated, so an import or a pipeline that
names the pair the other way round never doubles it.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from smriti.stores import kuzu_schema as schema
from smriti.stores.base import (
    Association,
    Cue,
    CueHit,
    Relation,
    checked_cue_name,
    checked_relation,
    normalise_cue_name,
)
from smriti.stores.kuzu_schema import association_from_row, from_db, locked, to_db

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class CueInfo:
    id: str
    cue_type: str
    has_embedding: bool


class CueGraphMixin:
    """Cue, co-occurrence, relation and association methods of the GraphStore protocol."""

    if TYPE_CHECKING:  # provided by KuzuStore
        _cues: dict[str, CueInfo] | None
        _cue_links: Counter[str] | None
        _fresh: dict[str, set[tuple[str, str]]]

        def _rows_by_ids(
            self, single: str, many: str, ids: Sequence[str], per_id_up_to: int
        ) -> list[list[Any]]: ...

        def _run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]: ...
        def _check_dims(self, embedding: Sequence[float] | None, what: str) -> None: ...

    def _cue_map(self) -> dict[str, CueInfo]:
        if self._cues is None:
            rows = self._run("MATCH (c:Cue) RETURN c.name, c.id, c.cue_type, c.embedding IS NOT NULL")
            self._cues = {name: CueInfo(id_, cue_type, bool(has)) for name, id_, cue_type, has in rows}
        return self._cues

    def _links_per_cue(self) -> Counter[str]:
        """Engrams each cue encodes, by cue id. Counting them per recall scanned the cue table
        (tens of ms at a few thousand memories); one aggregation, then kept in step by the link
        methods, is a dict lookup. A deleted engram resets it (see delete_engram)."""
        if self._cue_links is None:
            rows = self._run("MATCH (c:Cue)<-[:EncodedBy]-(:Engram) RETURN c.id, count(*)")
            self._cue_links = Counter({id_: int(n) for id_, n in rows})
        return self._cue_links

    def _count_new_links(self, cue_ids: Iterable[str]) -> None:
        if self._cue_links is not None:
            self._cue_links.update(cue_ids)

    @locked
    def upsert_cue(self, cue: Cue) -> Cue:
        """Insert by normalised name, or return the stored cue of that name unchanged.

        Raises:
            ValueError: the name is empty once normalised.
        """
        name = checked_cue_name(cue.name)
        info = self._cue_map().get(name)
        if info is not None:
            embedding = None
            if info.has_embedding:
                embedding = self._run("MATCH (c:Cue {id: $id}) RETURN c.embedding", {"id": info.id})[0][0]
            return Cue(name=name, cue_type=info.cue_type, id=info.id, embedding=embedding)
        self._check_dims(cue.embedding, f"the embedding of cue {name!r}")
        embedding = [float(v) for v in cue.embedding] if cue.embedding is not None else None
        self._run(
            "CREATE (c:Cue {id: $id, name: $name, cue_type: $cue_type, embedding: $embedding})",
            {"id": cue.id, "name": name, "cue_type": cue.cue_type, "embedding": embedding},
        )
        self._cue_map()[name] = CueInfo(cue.id, cue.cue_type, embedding is not None)
        return Cue(name=name, cue_type=cue.cue_type, id=cue.id, embedding=embedding)

    def _cue_ids(self, names: Iterable[str]) -> list[str]:
        cues = self._cue_map()
        wanted = dict.fromkeys(normalise_cue_name(n) for n in names)
        return [cues[n].id for n in wanted if n in cues]

    @locked
    def link_cue(self, engram_id: str, cue_id: str) -> None:
        """(Engram)-[:EncodedBy]->(Cue), idempotent; a missing end is a no-op."""
        params = {"engram": engram_id, "cue": cue_id}
        edges = self._fresh.get(engram_id)
        if edges is not None and ("cue", cue_id) in edges:
            return
        # A directed check plus CREATE costs ~1.2 ms at 10k engrams; MERGE on an edge ~7 ms.
        if (
            edges is None
            and self._run(
                "MATCH (e:Engram {id: $engram})-[:EncodedBy]->(c:Cue {id: $cue}) RETURN count(*)", params
            )[0][0]
        ):
            return
        created = self._run(
            "MATCH (e:Engram {id: $engram}), (c:Cue {id: $cue}) CREATE (e)-[:EncodedBy]->(c) RETURN count(*)",
            params,
        )[0][0]
        if not created:
            logger.debug("link_cue: engram %s or cue %s does not exist", engram_id, cue_id)
            return
        self._count_new_links([cue_id])
        if edges is not None:
            edges.add(("cue", cue_id))

    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]:
        """Cues of each asked engram (an empty list when it has none), by name."""
        result: dict[str, list[Cue]] = {engram_id: [] for engram_id in engram_ids}
        rows = self._rows_by_ids(
            f"MATCH (e:Engram {{id: $id}})-[:EncodedBy]->(c:Cue) RETURN e.id, {schema.CUE_RETURN}",
            f"MATCH (e:Engram)-[:EncodedBy]->(c:Cue) WHERE e.id IN $ids RETURN e.id, {schema.CUE_RETURN}",
            engram_ids,
            per_id_up_to=4,
        )
        for engram_id, *cue in sorted(rows, key=lambda row: (row[0], row[2])):
            result[engram_id].append(schema.cue_from_row(cue))
        return result

    @locked
    def engrams_by_cues(self, cue_names: Sequence[str], limit: int) -> list[CueHit]:
        """Most matched cues first, then by id; each hit's cues in the order they were asked."""
        cue_ids = self._cue_ids(cue_names)
        if not cue_ids or limit <= 0:
            return []
        rows = self._run(
            "MATCH (c:Cue)<-[:EncodedBy]-(e:Engram) WHERE c.id IN $cues "
            "WITH e.id AS id, collect(c.name) AS names "
            "RETURN id, names ORDER BY size(names) DESC, id LIMIT $limit",
            {"cues": cue_ids, "limit": limit},
        )
        order = {name: i for i, name in enumerate(dict.fromkeys(normalise_cue_name(n) for n in cue_names))}
        return [CueHit(id_, tuple(sorted(names, key=order.__getitem__))) for id_, names in rows]

    @locked
    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        """Keyed by the names as asked (matched normalised); cues that do not exist are left out."""
        cues = self._cue_map()
        infos = {name: cues.get(normalise_cue_name(name)) for name in cue_names}
        if not any(infos.values()):
            return {}
        links = self._links_per_cue()
        return {name: links.get(info.id, 0) for name, info in infos.items() if info is not None}

    def _ensure_cue(self, name: str) -> CueInfo:
        cue = self.upsert_cue(Cue(name=name))
        return self._cue_map()[cue.name]

    @locked
    def add_cooccurrence(self, cue_a: str, cue_b: str, delta: float = 1.0, replace: bool = False) -> None:
        """Co-occurrence is symmetric: an edge in either direction is the one strengthened.

        Missing cues are created as ``keyword`` cues; a cue with itself is ignored.
        """
        a, b = self._ensure_cue(cue_a), self._ensure_cue(cue_b)
        if a.id == b.id:
            return
        self._symmetric_edge(
            "Cue",
            "CoOccurs",
            a.id,
            b.id,
            "strength: $w",
            "r.strength = $w" if replace else "r.strength = r.strength + $w",
            {"w": float(delta)},
        )

    @locked
    def add_relation(self, relation: Relation) -> None:
        """Idempotent per (source, relation, target, engram_id); missing cues are created."""
        source, name, target = checked_relation(relation)
        a, b = self._ensure_cue(source), self._ensure_cue(target)
        params = {"a": a.id, "b": b.id, "relation": name, "engram": relation.engram_id}
        if self._run(
            "MATCH (a:Cue {id: $a})-[r:RelatesTo]->(b:Cue {id: $b}) "
            "WHERE r.relation = $relation AND r.engram_id = $engram RETURN count(r)",
            params,
        )[0][0]:
            return
        self._run(
            "MATCH (a:Cue {id: $a}), (b:Cue {id: $b}) "
            "CREATE (a)-[:RelatesTo {relation: $relation, engram_id: $engram, created_at: $at}]->(b)",
            params | {"at": to_db(relation.created_at)},
        )
        self._remember_relation(a.id, params["relation"], b.id, relation.engram_id)

    def _remember_relation(self, a: str, relation: str, b: str, engram_id: str) -> None:
        """Record a RelatesTo edge of a fresh engram (so a batch need not look for it)."""
        edges = self._fresh.get(engram_id)
        if edges is not None:
            edges.add(("RelatesTo", "\x1f".join((a, relation, b, engram_id))))

    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        if not engram_ids:
            return []
        rows = self._run(
            "MATCH (a:Cue)-[r:RelatesTo]->(b:Cue) WHERE r.engram_id IN $ids "
            "RETURN a.name, r.relation, b.name, r.engram_id, r.created_at "
            "ORDER BY r.created_at, a.name, r.relation, b.name",
            {"ids": list(engram_ids)},
        )
        return [Relation(s, rel, t, e or "", from_db(at)) for s, rel, t, e, at in rows]

    @locked
    def delete_orphan_cues(self) -> int:
        """Delete cues that encode no engram (with their CoOccurs/RelatesTo edges)."""
        rows = self._run(
            "MATCH (c:Cue) WHERE NOT EXISTS { MATCH (c)<-[:EncodedBy]-(:Engram) } RETURN c.id, c.name"
        )
        if rows:
            ids = [row[0] for row in rows]
            self._run("MATCH (c:Cue) WHERE c.id IN $ids DETACH DELETE c", {"ids": ids})
            self._fresh.clear()  # a re-imported cue could come back under a remembered id
            for _, name in rows:
                if self._cues is not None:
                    self._cues.pop(name, None)
        return len(rows)

    # -- associations ------------------------------------------------------------------------------
    @locked
    def associate(self, association: Association) -> None:
        """Association is symmetric: an edge in either direction keeps the larger strength.

        A self-association or a missing engram is ignored.
        """
        if association.source_id == association.target_id:
            return
        self._symmetric_edge(
            "Engram",
            "AssociatedWith",
            association.source_id,
            association.target_id,
            "strength: $w, relation_type: $type, created_at: $at",
            "r.strength = CASE WHEN $w > r.strength THEN $w ELSE r.strength END",
            {
                "w": float(association.strength),
                "type": association.relation_type,
                "at": to_db(association.created_at),
            },
        )

    def _symmetric_edge(
        self, label: str, rel: str, a: str, b: str, create: str, update: str, params: dict[str, Any]
    ) -> None:
        """Create (a)-[rel]->(b) unless an edge joins them either way; else update that edge.

        ``label``, ``rel``, ``create`` and ``update`` are constants of this module; values
        travel as parameters. Updates run per direction because Kuzu 0.11.3 fails an internal
        assertion on SET through an undirected match entered from the edge's target (and an
        EXISTS/MERGE on edges costs ~5 ms at 10k engrams, two directed reads ~1 ms).
        """
        known = {x: self._fresh[x] for x in (a, b) if label == "Engram" and x in self._fresh}
        # An engram this process created has exactly the edges recorded for it since then.
        absent = any((rel, b if x == a else a) not in edges for x, edges in known.items())
        if not absent:
            values = {k: v for k, v in params.items() if f"${k}" in update}
            for source, target in ((a, b), (b, a)):
                if self._run(
                    f"MATCH (x:{label} {{id: $a}})-[r:{rel}]->(y:{label} {{id: $b}}) "
                    f"SET {update} RETURN count(r)",
                    values | {"a": source, "b": target},
                )[0][0]:
                    return
        created = self._run(
            f"MATCH (x:{label} {{id: $a}}), (y:{label} {{id: $b}}) CREATE (x)-[:{rel} {{{create}}}]->(y) "
            "RETURN count(*)",
            params | {"a": a, "b": b},
        )[0][0]
        if created:
            for x, edges in known.items():
                edges.add((rel, b if x == a else a))

    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        if not engram_ids:
            return []
        edge = "RETURN a.id, b.id, r.strength, r.relation_type, r.created_at"
        ids = list(dict.fromkeys(engram_ids))
        if len(ids) <= 2:  # two primary-key lookups per id beat one scan of every edge
            rows = []
            for engram_id in ids:
                for pattern in (
                    "(a:Engram {id: $id})-[r:AssociatedWith]->(b:Engram)",
                    "(b:Engram {id: $id})<-[r:AssociatedWith]-(a:Engram)",
                ):
                    rows += self._run(f"MATCH {pattern} {edge}", {"id": engram_id})
        else:
            # No UNION here: Kuzu 0.11.3 crashes (SIGSEGV) on a UNION of IN-filtered matches.
            rows = self._run(
                f"MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) WHERE a.id IN $ids OR b.id IN $ids {edge}",
                {"ids": ids},
            )
        unique = {(row[0], row[1]): row for row in rows}
        return [association_from_row(unique[key]) for key in sorted(unique)]

    def all_associations(self) -> list[Association]:
        rows = self._run(
            "MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) "
            "RETURN a.id, b.id, r.strength, r.relation_type, r.created_at ORDER BY a.id, b.id"
        )
        return [association_from_row(row) for row in rows]
