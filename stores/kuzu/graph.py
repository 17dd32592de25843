"""Cues and edges of the embedded store: a mixin of :class:`smriti.stores.kuzu.KuzuStore`.

Split from the store class only to keep modules short; it uses the store's ``_run``,
``_check_dims`` and lock. Cue names are unique per store, but Kuzu has no secondary index
on ``Cue.name``, so the name -> id map is held in memory (this process holds the file lock,
so nobody else can change it) and every query reaches cues by primary key.

This module holds the reads; the writes (``upsert_cues``, ``link_cue_ids``,
``add_cooccurrences``, ``add_relations``, ``associate_many``) live in :mod:`smriti.stores.kuzu.batch`.

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

from smriti.stores.base import (
    Association,
    Cue,
    CueHit,
    Relation,
    normalise_cue_name,
)
from smriti.stores.kuzu import schema
from smriti.stores.kuzu.schema import association_from_row, from_db, locked

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

    def _cue_ids(self, names: Iterable[str]) -> list[str]:
        cues = self._cue_map()
        wanted = dict.fromkeys(normalise_cue_name(n) for n in names)
        return [cues[n].id for n in wanted if n in cues]

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
