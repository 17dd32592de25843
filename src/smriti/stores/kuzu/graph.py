"""Cues and edges of the embedded store: the in-memory cue map, the fresh-edge memo, the reads.

Cue names are unique per store, but Kuzu has no secondary index on ``Cue.name``, so the
name -> id map (:class:`CueMap`) is held in memory (this process holds the file lock, so
nobody else can change it) and every query reaches cues by primary key. :class:`FreshEdges`
remembers the edges made for engrams this process created, so the writes can tell new edges
from existing ones without a query on the store path.

This module holds the reads (:class:`GraphReads`); the writes (``upsert_cues``,
``link_cue_ids``, ``add_cooccurrences``, ``add_relations``, ``associate_many``) live in
:class:`smriti.stores.kuzu.batch.GraphWrites`.

CoOccurs and AssociatedWith are symmetric relations stored as one directed edge: an
existing edge in either direction is the one updated, so an import or a pipeline that
names the pair the other way round never doubles it.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from smriti.stores.base import (
    Association,
    Cue,
    CueHit,
    Relation,
    normalise_cue_name,
)
from smriti.stores.kuzu import schema
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.schema import association_from_row, from_db

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class CueInfo:
    id: str
    cue_type: str
    has_embedding: bool


FRESH_ENGRAMS = 256  # recently created engrams whose edges are tracked (see FreshEdges)


class CueMap:
    """Cue name -> :class:`CueInfo`, and engrams per cue id, loaded on first use.

    Args:
        db: the store's connection.
    """

    def __init__(self, db: Connection) -> None:
        self.db = db
        self._cues: dict[str, CueInfo] | None = None
        self._links: Counter[str] | None = None  # cue id -> engrams it encodes

    def names(self) -> dict[str, CueInfo]:
        """The map itself (callers add to it through :meth:`add`)."""
        if self._cues is None:
            rows = self.db.run("MATCH (c:Cue) RETURN c.name, c.id, c.cue_type, c.embedding IS NOT NULL")
            self._cues = {name: CueInfo(id_, cue_type, bool(has)) for name, id_, cue_type, has in rows}
        return self._cues

    def add(self, name: str, info: CueInfo) -> None:
        self.names()[name] = info

    def discard(self, name: str) -> None:
        if self._cues is not None:
            self._cues.pop(name, None)

    def ids(self, names: Iterable[str]) -> list[str]:
        """Ids of the cues of these names (normalised here), unknown names left out."""
        cues = self.names()
        wanted = dict.fromkeys(normalise_cue_name(n) for n in names)
        return [cues[n].id for n in wanted if n in cues]

    def links(self) -> Counter[str]:
        """Engrams each cue encodes, by cue id. Counting them per recall scanned the cue table
        (tens of ms at a few thousand memories); one aggregation, then kept in step by the link
        methods, is a dict lookup. A deleted engram resets it (see :meth:`forget_links`)."""
        if self._links is None:
            rows = self.db.run("MATCH (c:Cue)<-[:EncodedBy]-(:Engram) RETURN c.id, count(*)")
            self._links = Counter({id_: int(n) for id_, n in rows})
        return self._links

    def count_new_links(self, cue_ids: Iterable[str]) -> None:
        if self._links is not None:
            self._links.update(cue_ids)

    def forget_links(self) -> None:
        """Some cue lost a link: recount when next asked."""
        self._links = None


class FreshEdges:
    """Engrams created by this process -> the edges made for them since: ("cue", id),
    (rel, other id) or ("RelatesTo", key). Lets link_cue/associate skip an existence query
    on the store path; only the last :data:`FRESH_ENGRAMS` engrams are tracked."""

    def __init__(self) -> None:
        self._edges: OrderedDict[str, set[tuple[str, str]]] = OrderedDict()

    def __contains__(self, engram_id: object) -> bool:
        return engram_id in self._edges

    def start(self, engram_id: str) -> None:
        """A new engram: it has no edges yet."""
        self._edges[engram_id] = set()
        if len(self._edges) > FRESH_ENGRAMS:
            self._edges.popitem(last=False)

    def edges(self, engram_id: str) -> set[tuple[str, str]] | None:
        """The edges of a fresh engram (a live set), None when it is not tracked."""
        return self._edges.get(engram_id)

    def record(self, engram_id: str, kind: str, other: str) -> None:
        edges = self._edges.get(engram_id)
        if edges is not None:
            edges.add((kind, other))

    def clear(self) -> None:
        """Forget every engram (an edge may have gone with a deleted node)."""
        self._edges.clear()


def relation_key(a: str, relation: str, b: str, engram_id: str) -> str:
    """The FreshEdges key of a RelatesTo edge."""
    return "\x1f".join((a, relation, b, engram_id))


class GraphReads:
    """Cue, relation and association reads of the GraphStore protocol (and orphan cleanup).

    Args:
        db: the store's connection.
        cues: the cue map.
        fresh: the fresh-edge memo (cleared when cues are deleted).
    """

    def __init__(self, db: Connection, cues: CueMap, fresh: FreshEdges) -> None:
        self.db = db
        self.cues = cues
        self.fresh = fresh

    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]:
        """Cues of each asked engram (an empty list when it has none), by name."""
        result: dict[str, list[Cue]] = {engram_id: [] for engram_id in engram_ids}
        rows = self.db.rows_by_ids(
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
        """Most matched cues first, then by creation time and content (the same in every store of
        the same content, where random ids made each build's shortlist differ at the cut); each
        hit's cues in the order they were asked."""
        cue_ids = self.cues.ids(cue_names)
        if not cue_ids or limit <= 0:
            return []
        rows = self.db.run(
            "MATCH (c:Cue)<-[:EncodedBy]-(e:Engram) WHERE c.id IN $cues "
            "WITH e.id AS id, e.created_at AS at, e.content AS content, collect(c.name) AS names "
            "RETURN id, names ORDER BY size(names) DESC, at, content, id LIMIT $limit",
            {"cues": cue_ids, "limit": limit},
        )
        order = {name: i for i, name in enumerate(dict.fromkeys(normalise_cue_name(n) for n in cue_names))}
        return [CueHit(id_, tuple(sorted(names, key=order.__getitem__))) for id_, names in rows]

    @locked
    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        """Keyed by the names as asked (matched normalised); cues that do not exist are left out."""
        cues = self.cues.names()
        infos = {name: cues.get(normalise_cue_name(name)) for name in cue_names}
        if not any(infos.values()):
            return {}
        links = self.cues.links()
        return {name: links.get(info.id, 0) for name, info in infos.items() if info is not None}

    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        if not engram_ids:
            return []
        rows = self.db.run(
            "MATCH (a:Cue)-[r:RelatesTo]->(b:Cue) WHERE r.engram_id IN $ids "
            "RETURN a.name, r.relation, b.name, r.engram_id, r.created_at "
            "ORDER BY r.created_at, a.name, r.relation, b.name",
            {"ids": list(engram_ids)},
        )
        return [Relation(s, rel, t, e or "", from_db(at)) for s, rel, t, e, at in rows]

    def related_entities(self, cue_names: Sequence[str], limit: int) -> list[Relation]:
        """Edges from or to these cues, newest first (see the protocol), at most ``limit``."""
        ids = self.cues.ids(cue_names)
        if limit <= 0 or not ids:
            return []
        rows = self.db.run(
            "MATCH (a:Cue)-[r:RelatesTo]->(b:Cue) WHERE a.id IN $ids OR b.id IN $ids "
            "RETURN a.name, r.relation, b.name, r.engram_id, r.created_at "
            "ORDER BY r.created_at DESC, a.name, r.relation, b.name, r.engram_id LIMIT $limit",
            {"ids": list(ids), "limit": int(limit)},
        )
        return [Relation(s, rel, t, e or "", from_db(at)) for s, rel, t, e, at in rows]

    @locked
    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int:
        """Delete cues that encode no engram, only among ``names`` when given (with their
        CoOccurs/RelatesTo edges)."""
        orphan = "NOT EXISTS { MATCH (c)<-[:EncodedBy]-(:Engram) } RETURN c.id, c.name"
        if names is None:
            rows = self.db.run(f"MATCH (c:Cue) WHERE {orphan}")
        else:  # a forget's few cues: primary-key lookups through the name map, not a scan
            rows = self.db.rows_by_ids(
                f"MATCH (c:Cue {{id: $id}}) WHERE {orphan}",
                f"MATCH (c:Cue) WHERE c.id IN $ids AND {orphan}",
                self.cues.ids(names),
                per_id_up_to=32,
            )
        if rows:
            ids = [row[0] for row in rows]
            self.db.run("MATCH (c:Cue) WHERE c.id IN $ids DETACH DELETE c", {"ids": ids})
            self.fresh.clear()  # a re-imported cue could come back under a remembered id
            for _, name in rows:
                self.cues.discard(name)
        return len(rows)

    # -- associations ------------------------------------------------------------------------------
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
                    rows += self.db.run(f"MATCH {pattern} {edge}", {"id": engram_id})
        else:
            # No UNION here: Kuzu 0.11.3 crashes (SIGSEGV) on a UNION of IN-filtered matches.
            rows = self.db.run(
                f"MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) WHERE a.id IN $ids OR b.id IN $ids {edge}",
                {"ids": ids},
            )
        unique = {(row[0], row[1]): row for row in rows}
        return [association_from_row(unique[key]) for key in sorted(unique)]

    def all_associations(self) -> list[Association]:
        rows = self.db.run(
            "MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) "
            "RETURN a.id, b.id, r.strength, r.relation_type, r.created_at ORDER BY a.id, b.id"
        )
        return [association_from_row(row) for row in rows]
