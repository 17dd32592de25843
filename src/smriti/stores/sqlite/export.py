"""The record export of the SQLite store (see :mod:`smriti.stores.records`).

Same kinds, order and sort keys as the Kuzu export, so the two round-trip into each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from smriti.stores import records as rec
from smriti.stores.base import Relation
from smriti.stores.sqlite import schema
from smriti.stores.sqlite.connection import Database
from smriti.stores.sqlite.schema import ENGRAM_SELECT, from_db

EXPORT_PAGE = 500


def _pages(db: Database, query: str) -> Iterator[Any]:
    """Keyset pagination over a query taking (after, page) whose first column is the key:
    a large store is never held in memory twice."""
    after = ""
    while True:
        rows = db.read(query, (after, EXPORT_PAGE))
        yield from rows
        if len(rows) < EXPORT_PAGE:
            return
        after = rows[-1][0]


def export_rows(db: Database) -> Iterator[dict[str, Any]]:
    """Every node and edge as records, in records.KINDS order and sorted within a kind."""
    for key, value in db.read("SELECT key, value FROM meta ORDER BY key"):
        yield rec.meta_record(key, value)
    for row in _pages(db, f"SELECT {ENGRAM_SELECT} FROM engram e WHERE e.id > ? ORDER BY e.id LIMIT ?"):
        yield rec.engram_record(schema.engram_from_row(row))
    cues = "SELECT c.name, c.id, c.cue_type, c.embedding FROM cue c WHERE c.name > ? ORDER BY c.name LIMIT ?"
    for name, id_, cue_type, embedding in _pages(db, cues):
        yield rec.cue_record(schema.cue_from_row((id_, name, cue_type, embedding)))
    for engram_id, cue in db.read(
        "SELECT e.id, c.name FROM encoded_by x JOIN engram e ON e.rowid = x.engram "
        "JOIN cue c ON c.rowid = x.cue ORDER BY e.id, c.name"
    ):
        yield rec.encoded_by_record(engram_id, cue)
    for row in db.read(
        "SELECT x.id, y.id, w.strength, w.relation_type, w.created_at FROM associated_with w "
        "JOIN engram x ON x.rowid = w.a JOIN engram y ON y.rowid = w.b ORDER BY x.id, y.id"
    ):
        yield rec.association_record(schema.association_from_row(row))
    for source, target, strength in db.read(
        "SELECT x.name, y.name, o.strength FROM co_occurs o JOIN cue x ON x.rowid = o.a "
        "JOIN cue y ON y.rowid = o.b ORDER BY x.name, y.name"
    ):
        yield rec.co_occurs_record(source, target, float(strength))
    for source, relation, target, engram_id, created_at in db.read(
        "SELECT s.name, r.relation, t.name, r.engram_id, r.created_at FROM relates_to r "
        "JOIN cue s ON s.rowid = r.source JOIN cue t ON t.rowid = r.target "
        "ORDER BY s.name, r.relation, t.name, r.engram_id"
    ):
        yield rec.relation_record(Relation(source, relation, target, engram_id or "", from_db(created_at)))
