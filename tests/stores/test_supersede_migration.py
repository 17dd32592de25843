"""Files written before corrections existed still open: ``superseded_by`` is added at open, old
memories read as current, and the new field is kept from then on (SQLite and Kuzu)."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from smriti.stores import make_store
from smriti.stores.base import Engram

T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def _memory(eid: str) -> Engram:
    return Engram(id=eid, content=f"memory {eid}", created_at=T0, last_accessed_at=T0, embedding=[0.5] * 64)


def test_an_older_sqlite_file_gains_superseded_by(settings):
    cfg = settings.model_copy(update={"db_type": "sqlite"})
    store = make_store(cfg)
    store.create_engram(_memory("before"))
    path = store.path
    store.close()
    with sqlite3.connect(path) as conn:  # the file as the previous version wrote it
        conn.execute("DROP INDEX engram_superseded")
        conn.execute("ALTER TABLE engram DROP COLUMN superseded_by")
        conn.execute("DELETE FROM meta WHERE key = 'migrations'")  # it predates the record
        assert "superseded_by" not in {row[1] for row in conn.execute("PRAGMA table_info(engram)")}

    store = make_store(cfg)
    try:
        assert store.get_engram("before").superseded_by == ""
        store.create_engram(_memory("after"))
        assert store.update_engram("before", superseded_by="after")
        assert store.superseded_ids("after") == ["before"]
    finally:
        store.close()


def test_an_older_kuzu_file_gains_superseded_by(settings):
    pytest.importorskip("kuzu")
    cfg = settings.model_copy(update={"db_type": "kuzu"})
    store = make_store(cfg)
    store.create_engram(_memory("before"))
    store.db.run("ALTER TABLE Engram DROP superseded_by")
    store.close()

    store = make_store(cfg)
    try:
        assert store.get_engram("before").superseded_by == ""
        store.create_engram(_memory("after"))
        assert store.update_engram("before", superseded_by="after")
        assert store.superseded_ids("after") == ["before"]
    finally:
        store.close()
