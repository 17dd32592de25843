"""What the SQLite store adds beyond the conformance suite: transactions, isolated readers,
the single-process lock, migrations on reopen, the embedding-dimension guard and DB_TYPE=auto."""

from __future__ import annotations

import logging
import sqlite3
import threading

import pytest

from smriti.stores import make_store, resolve_auto
from smriti.stores.base import Association, Cue, EmbeddingMismatchError, Engram, StoreError
from smriti.stores.sqlite import open_sqlite, sqlite_path
from smriti.stores.sqlite.schema import SCHEMA_VERSION

DIMS = 16


@pytest.fixture
def cfg(settings):
    return settings.model_copy(update={"embedding_dims": DIMS, "db_type": "sqlite"})


@pytest.fixture
def store(cfg):
    opened = open_sqlite(cfg, "alice")
    yield opened
    opened.close()


def _in_thread(func):
    out: list = []
    worker = threading.Thread(target=lambda: out.append(func()))
    worker.start()
    worker.join(10)
    return out[0]


def test_a_transaction_commits_together_and_other_threads_see_it_only_then(store):
    with store.transaction():
        store.create_engram(Engram(id="t1", content="first", embedding=[1.0] * DIMS))
        cue = store.upsert_cue(Cue(name="topic"))
        store.link_cue("t1", cue.id)
        with store.transaction():  # nested: joins the outer one
            store.create_engram(Engram(id="t2", content="second"))
        store.associate(Association("t1", "t2", 0.5))
        # The writing thread reads its own writes; another thread reads the last commit.
        assert store.count_engrams() == 2
        assert _in_thread(store.count_engrams) == 0
        assert _in_thread(lambda: store.get_engram("t1")) is None
        assert _in_thread(lambda: store.vector_search([1.0] * DIMS, 5)) == []
    assert _in_thread(store.count_engrams) == 2
    assert [h.id for h in _in_thread(lambda: store.vector_search([1.0] * DIMS, 5))] == ["t1"]
    assert store.stats().cue_links == 1 and store.stats().associations == 1


def test_an_exception_rolls_the_whole_transaction_back(store):
    store.create_engram(Engram(id="keep", content="kept memory", embedding=[1.0] * DIMS))
    assert store.vector_search([1.0] * DIMS, 5)  # the vector cache is loaded
    with pytest.raises(RuntimeError), store.transaction():
        store.create_engram(Engram(id="gone", content="zanzibar memory", embedding=[1.0] * DIMS))
        store.link_cues("gone", [Cue(name="zanzibar")])
        store.associate(Association("gone", "keep", 0.9))
        store.update_engram("keep", content="changed")
        raise RuntimeError("fault injected")
    assert store.get_engram("gone") is None
    assert store.get_engram("keep").content == "kept memory"
    stats = store.stats()
    assert (stats.engrams, stats.cues, stats.cue_links, stats.associations) == (1, 0, 0, 0)
    assert store.fulltext_search("zanzibar", 5) == []
    assert [h.id for h in store.vector_search([1.0] * DIMS, 5)] == ["keep"]  # the cache followed


def test_reads_from_short_lived_threads_reuse_pooled_connections(store):
    # LangGraph runs parallel branches on threads made anew per run: a reader per thread
    # would open (and keep) a connection for each of them.
    store.create_engram(Engram(id="p1", content="pooled"))
    for _ in range(20):
        workers = [threading.Thread(target=store.count_engrams) for _ in range(3)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(10)
    assert 1 <= len(store.db._readers) <= 3
    assert _in_thread(lambda: store.get_engram("p1")).content == "pooled"
    store.close()
    assert store.db._readers == []
    with pytest.raises(StoreError):
        store.count_engrams()


def test_cue_engram_counts_follow_links_deletes_and_an_older_file(cfg, store):
    for eid in ("c1", "c2", "c3"):
        store.create_engram(Engram(id=eid, content=f"memory {eid}"))
        store.link_cues(eid, [Cue("shared"), Cue(f"only-{eid}")])
    store.link_cues("c1", [Cue("shared")])  # idempotent: counted once
    assert store.cue_engram_counts(["shared", "only-c1"]) == {"shared": 3, "only-c1": 1}
    store.remove_engram("c1")  # the cascade fires the trigger too (forget would also drop only-c1)
    assert store.cue_engram_counts(["shared", "only-c1"]) == {"shared": 2, "only-c1": 0}
    store.close()
    # A file written before the column existed: the migration adds it and counts once.
    conn = sqlite3.connect(sqlite_path(cfg, "alice"))
    conn.executescript(
        "DROP TRIGGER encoded_by_counted; DROP TRIGGER encoded_by_uncounted; "
        "ALTER TABLE cue DROP COLUMN engram_count; "
        "DELETE FROM meta WHERE key IN ('migrations', 'schema_version');"  # it predates the record
    )
    conn.close()
    again = open_sqlite(cfg, "alice")
    try:
        assert again.cue_engram_counts(["shared", "only-c2"]) == {"shared": 2, "only-c2": 1}
        again.create_engram(Engram(id="c4", content="memory c4"))
        again.link_cues("c4", [Cue("shared")])
        assert again.cue_engram_counts(["shared"]) == {"shared": 3}
    finally:
        again.close()


def test_a_second_process_is_refused_while_the_first_holds_the_file(cfg, store):
    with pytest.raises(StoreError, match="locked by another process"):
        open_sqlite(cfg, "alice")  # a second open in one process takes the same flock path


def test_reopen_is_idempotent_and_keeps_everything(cfg, store):
    store.create_engram(Engram(id="r1", content="persistent keyword", embedding=[0.5] * DIMS))
    store.close()
    again = open_sqlite(cfg, "alice")
    try:
        assert again.get_meta("schema_version") == str(SCHEMA_VERSION)
        assert [h.id for h in again.fulltext_search("keyword", 5)] == ["r1"]  # FTS5 persisted
        assert [h.id for h in again.vector_search([0.5] * DIMS, 5)] == ["r1"]
    finally:
        again.close()


def test_another_embedding_dimension_is_refused_with_the_reembed_hint(cfg, store):
    store.close()
    with pytest.raises(EmbeddingMismatchError, match="smriti export"):
        open_sqlite(cfg.model_copy(update={"embedding_dims": DIMS * 2}), "alice")
    open_sqlite(cfg, "alice").close()  # the refused open released the file


def test_the_file_is_wal_with_foreign_keys(store):
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()
    assert store.db.read("PRAGMA foreign_keys")[0][0] == 1


def test_auto_opens_sqlite_unless_only_a_kuzu_store_exists(settings, caplog):
    auto = settings.model_copy(update={"db_type": "auto"})
    assert resolve_auto(auto, "alice") == "sqlite"
    kuzu_settings = settings.model_copy(update={"db_type": "kuzu"})
    make_store(kuzu_settings, "bob").close()  # a store made before SQLite was the default
    with caplog.at_level(logging.WARNING, logger="smriti.stores"):
        opened = make_store(auto, "bob")
        opened.close()
        make_store(auto, "bob").close()
    assert opened.backend == "kuzu"
    notices = [r.getMessage() for r in caplog.records if "memory.kuzu" in r.getMessage()]
    assert len(notices) == 1 and "smriti export" in notices[0] and "smriti import" in notices[0]
    # Once a memory.sqlite exists beside it (the user moved), auto opens SQLite.
    sqlite_path(auto, "bob").touch()
    assert resolve_auto(auto, "bob") == "sqlite"
    fresh = make_store(auto, "carol")
    try:
        assert fresh.backend == "sqlite" and fresh.stats().location.endswith("memory.sqlite")
    finally:
        fresh.close()


def test_recall_reads_a_new_cue_that_took_a_deleted_cues_rowid(store):
    """The cue cache is keyed by rowid, and SQLite gives a deleted last row's rowid to the next
    insert: after a delete the old name must not come back under the new cue."""
    store.create_engram(Engram(id="old", content="about the old topic"))
    store.link_cue("old", store.upsert_cue(Cue(name="oldtopic", cue_type="concept")).id)
    assert [c.name for c in store.recall_rows(["old"])[0].cues] == ["oldtopic"]  # now cached
    rowid = store.db.read("SELECT rowid FROM cue WHERE name = 'oldtopic'")[0][0]

    store.remove_engram("old")
    assert store.delete_orphan_cues() == 1
    store.create_engram(Engram(id="new", content="about the new topic"))
    store.link_cue("new", store.upsert_cue(Cue(name="newtopic", cue_type="person")).id)

    assert store.db.read("SELECT rowid FROM cue WHERE name = 'newtopic'")[0][0] == rowid  # reused
    (row,) = store.recall_rows(["new"])
    assert [(c.name, c.cue_type) for c in row.cues] == [("newtopic", "person")]


def test_the_cue_cache_drops_what_a_reader_read_before_a_clear():
    from smriti.stores.sqlite.cuecache import CueCache

    cache = CueCache()
    before = cache.generation
    cache.clear()  # a cue was deleted while the reader's snapshot was open
    cache.store({1: Cue(id="c1", name="stale")}, before)
    assert cache.known([1]) == ({}, [1])
    cache.store({1: Cue(id="c2", name="fresh")}, cache.generation)
    assert cache.known([1, 1]) == ({1: Cue(id="c2", name="fresh")}, [])


def test_the_cue_cache_stays_within_its_limit():
    from smriti.stores.sqlite.cuecache import CueCache

    cache = CueCache(limit=3)
    cache.store({1: Cue(id="a", name="a"), 2: Cue(id="b", name="b")}, cache.generation)
    cache.store({3: Cue(id="c", name="c"), 4: Cue(id="d", name="d")}, cache.generation)
    assert len(cache) <= 3
    assert cache.known([3, 4])[1] == []  # what was just read is kept


def test_migrations_are_named_recorded_and_run_once(cfg, store, caplog):
    """A new file records every migration; an older file (no record, a column missing) runs them
    once and records them; a file a newer Smriti migrated is refused with one clear line."""
    import json

    from smriti.stores.sqlite.schema import migrations

    names = [m.name for m in migrations(lambda *a: None)]
    assert json.loads(store.get_meta("migrations")) == names and len(names) == SCHEMA_VERSION
    store.close()
    conn = sqlite3.connect(sqlite_path(cfg, "alice"))
    conn.executescript(
        "ALTER TABLE engram DROP COLUMN facts; "
        "DELETE FROM meta WHERE key IN ('migrations', 'schema_version');"
    )
    conn.close()
    with caplog.at_level(logging.INFO, logger="smriti.stores"):
        older = open_sqlite(cfg, "alice")
    older.close()
    logged = [r.getMessage() for r in caplog.records if "migration" in r.getMessage()]
    assert any("0005_engram_facts: engram.facts added" in m for m in logged), logged
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="smriti.stores"):
        again = open_sqlite(cfg, "alice")
    assert json.loads(again.get_meta("migrations")) == names
    assert not [r for r in caplog.records if "migration" in r.getMessage()]  # nothing left to run
    again.set_meta("migrations", json.dumps([*names, "0099_from_the_future"]))
    again.close()
    with pytest.raises(StoreError, match=r"newer Smriti.*0099_from_the_future"):
        open_sqlite(cfg, "alice")
