"""Files written before memories had facts still open (SQLite and Kuzu): ``facts`` is added at
open, older memories read with none, and facts written from then on are kept and searched. A
Kuzu file whose full-text index was built over content and summary only keeps that index and
answers keyword queries with the scan, which reads the facts too."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime

import pytest

from smriti.stores import make_store
from smriti.stores.base import Engram

T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
# What the code before facts built (stores/kuzu/search.py, ensure_indexes)
OLD_FTS = "CALL CREATE_FTS_INDEX('Engram', 'engram_fts', ['content', 'summary'])"


def _memory(eid: str, content: str = "") -> Engram:
    return Engram(
        id=eid,
        content=content or f"memory {eid} about databases",
        created_at=T0,
        last_accessed_at=T0,
        embedding=[0.5] * 64,
    )


def _checked(store) -> None:
    """The migrated store reads the old memory, and takes, keeps and finds facts."""
    assert store.get_engram("before").facts == ""
    store.create_engram(_memory("after"))
    assert store.update_engram("before", facts="Alice prefers Qdrant", created_at=T0.replace(day=3))
    got = store.get_engram("before")
    assert got.fact_list() == ["Alice prefers Qdrant"] and got.created_at == T0.replace(day=3)
    assert [h.id for h in store.fulltext_search("qdrant", 5)] == ["before"]
    assert {h.id for h in store.fulltext_search("databases", 5)} == {"before", "after"}


def test_an_older_sqlite_file_gains_facts(settings):
    cfg = settings.model_copy(update={"db_type": "sqlite"})
    store = make_store(cfg)
    store.create_engram(_memory("before"))
    path = store.path
    store.close()
    with sqlite3.connect(path) as conn:  # the file as the previous version wrote it
        conn.execute("ALTER TABLE engram DROP COLUMN facts")
        conn.execute("DELETE FROM meta WHERE key = 'migrations'")  # it predates the record
        assert "facts" not in {row[1] for row in conn.execute("PRAGMA table_info(engram)")}

    store = make_store(cfg)
    try:
        _checked(store)
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert "facts" in {row[1] for row in conn.execute("PRAGMA table_info(engram)")}
    store = make_store(cfg)  # a second open changes nothing and keeps the facts
    try:
        assert store.get_engram("before").fact_list() == ["Alice prefers Qdrant"]
    finally:
        store.close()


def test_an_older_kuzu_file_with_a_fulltext_index_gains_facts(settings):
    pytest.importorskip("kuzu")
    from smriti.stores.kuzu.store import open_kuzu

    # exact_search_limit=0: keyword queries go to the FTS index whenever it can answer them
    store = open_kuzu(settings, "alice", exact_search_limit=0)
    store.create_engram(_memory("before"))
    store.db.ddl("ALTER TABLE Engram DROP facts")
    store.db.ddl(OLD_FTS)
    store.close()

    store = open_kuzu(settings, "alice", exact_search_limit=0)
    try:
        assert store.stats().fulltext_index  # the old index is kept
        store.ensure_indexes(0)  # and not rebuilt (a re-created FTS index comes back empty)
        _checked(store)
    finally:
        store.close()


def test_a_new_kuzu_fulltext_index_covers_facts(settings):
    pytest.importorskip("kuzu")
    from smriti.stores.kuzu.store import open_kuzu

    store = open_kuzu(settings, "alice", exact_search_limit=0)
    try:
        store.create_engram(_memory("before"))
        assert store.ensure_indexes(0)["fulltext_index"]
        indexes = store.db.run("CALL SHOW_INDEXES() RETURN index_name, property_names")
        assert ["engram_fts", ["content", "summary", "facts"]] in [list(row) for row in indexes]
        _checked(store)  # answered by the index
    finally:
        store.close()


def test_a_falkordb_graph_indexed_field_by_field_is_rebuilt_over_the_search_text(falkor_server, settings):
    """A graph whose full-text index covers content, summary and facts as such (the code before
    the derived search text) and whose memories have no search text: ensure_indexes fills the
    text in and rebuilds the index, after which a word after a line break is found."""
    from smriti.stores.cypher.falkordb import open_falkordb

    client, _ = falkor_server
    graph = f"smriti_migrate_{uuid.uuid4().hex[:8]}"
    cfg = settings.model_copy(update={"db_type": "falkordb", "falkor_graph": graph})
    store = open_falkordb(cfg, "alice", client=client)
    try:
        store.create_engram(_memory("m1", "Deploy checklist:\nKafka\nrollback"))
        store.create_engram(_memory("m2", "nothing else"))
        run = store.graph.connection.run
        run("MATCH (e:Engram) REMOVE e.search_text")
        for field in ("content", "summary", "facts"):
            run(f"CALL db.idx.fulltext.createNodeIndex('Engram', '{field}')")
        assert store.graph.connection.index_state()["fulltext"] is False

        store.ensure_indexes(0)
        assert store.graph.connection.index_state()["fulltext"] is True
        assert [h.id for h in store.fulltext_search("kafka", 10)] == ["m1"]
        assert [h.id for h in store.fulltext_search("nothing", 10)] == ["m2"]
    finally:
        store.close()
        client.select_graph(graph).delete()
