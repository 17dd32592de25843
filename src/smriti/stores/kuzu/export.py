"""The record export of the embedded store (see :mod:`smriti.stores.records`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from smriti.stores import records as rec
from smriti.stores.base import Relation
from smriti.stores.kuzu.schema import (
    ENGRAM_RETURN,
    Runner,
    association_from_row,
    cue_from_row,
    engram_from_row,
    from_db,
)

EXPORT_PAGE = 500


def _pages(run: Runner, query: str) -> Iterator[list[Any]]:
    """Keyset pagination over a query with ``$after``/``$page`` whose first column is the key."""
    after = ""
    while True:
        rows = run(query, {"after": after, "page": EXPORT_PAGE})
        yield from rows
        if len(rows) < EXPORT_PAGE:
            return
        after = rows[-1][0]


def export_rows(run: Runner) -> Iterator[dict[str, Any]]:
    """Every node and edge as records, in records.KINDS order and sorted within a kind.

    Nodes (which carry embeddings) are read a page at a time so a large store is never
    held in memory twice; edges are small rows and come in one query each.
    """
    for key, value in run("MATCH (m:Meta) RETURN m.key, m.value ORDER BY m.key", None):
        yield rec.meta_record(key, value)
    engrams = f"MATCH (e:Engram) WHERE e.id > $after RETURN {ENGRAM_RETURN} ORDER BY e.id LIMIT $page"
    for row in _pages(run, engrams):
        yield rec.engram_record(engram_from_row(row))
    cues = (
        "MATCH (c:Cue) WHERE c.name > $after "
        "RETURN c.name, c.id, c.cue_type, c.embedding ORDER BY c.name LIMIT $page"
    )
    for name, id_, cue_type, embedding in _pages(run, cues):
        yield rec.cue_record(cue_from_row((id_, name, cue_type, embedding)))
    for engram_id, cue in run(
        "MATCH (e:Engram)-[:EncodedBy]->(c:Cue) RETURN e.id, c.name ORDER BY e.id, c.name", None
    ):
        yield rec.encoded_by_record(engram_id, cue)
    for row in run(
        "MATCH (a:Engram)-[r:AssociatedWith]->(b:Engram) "
        "RETURN a.id, b.id, r.strength, r.relation_type, r.created_at ORDER BY a.id, b.id",
        None,
    ):
        yield rec.association_record(association_from_row(row))
    for source, target, strength in run(
        "MATCH (a:Cue)-[r:CoOccurs]->(b:Cue) RETURN a.name, b.name, r.strength ORDER BY a.name, b.name", None
    ):
        yield rec.co_occurs_record(source, target, float(strength))
    for source, relation, target, engram_id, created_at in run(
        "MATCH (a:Cue)-[r:RelatesTo]->(b:Cue) RETURN a.name, r.relation, b.name, r.engram_id, r.created_at "
        "ORDER BY a.name, r.relation, b.name, r.engram_id",
        None,
    ):
        yield rec.relation_record(Relation(source, relation, target, engram_id or "", from_db(created_at)))
