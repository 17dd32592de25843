"""A large import into SQLite drops the secondary indexes and builds them again at its end;
a killed import leaves them missing and the next open creates them. Parsed embeddings are
compact arrays of the same floats. Real SQLite files."""

from __future__ import annotations

import json
from array import array

import pytest

from smriti.config import Settings
from smriti.stores.records import RecordFormatError, import_into, parse_lines
from smriti.stores.sqlite import open_sqlite, schema
from smriti.stores.sqlite import store as sqlite_store

from .test_import_batches import DIMS, MEMORIES, export_of, whole


@pytest.fixture
def settings(tmp_path):
    return Settings(storage_location=tmp_path, accessing_user="alice", embedding_dims=DIMS, db_type="sqlite")


def indexes(store) -> set[str]:
    rows = store.db.read("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%'")
    return {name for (name,) in rows}


def test_a_bulk_import_defers_the_secondary_indexes_and_builds_them_again(settings, monkeypatch):
    monkeypatch.setattr(sqlite_store, "BULK_MIN_MEMORIES", 0)  # the test's 25 memories count as bulk
    store = open_sqlite(settings, "alice")
    try:
        before = indexes(store)
        assert set(schema.DEFERRED_INDEXES) <= before
        during: list[set[str]] = []
        import_into(
            store, export_of(MEMORIES), on_memories=lambda _: during.append(indexes(store)), batch_size=10
        )
        assert during and all(not (seen & set(schema.DEFERRED_INDEXES)) for seen in during)
        assert indexes(store) == before
        assert all(whole(store, f"m{i:03d}") for i in range(MEMORIES))
        # the cue counts kept by the triggers match the links
        counts = store.cue_engram_counts(["shared-cue", "topic0"])
        assert counts["shared-cue"] == MEMORIES
        assert store.db.read("PRAGMA integrity_check") == [("ok",)]
    finally:
        store.close()


def test_a_failed_bulk_import_still_rebuilds_the_indexes(settings, monkeypatch):
    monkeypatch.setattr(sqlite_store, "BULK_MIN_MEMORIES", 0)
    store = open_sqlite(settings, "alice")
    try:
        before = indexes(store)

        def interrupt(_: int) -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            import_into(store, export_of(MEMORIES), on_memories=interrupt, batch_size=10)
        assert indexes(store) == before
        assert store.count_engrams() == 10  # the first batch, whole
        assert whole(store, "m000")
    finally:
        store.close()


def test_indexes_a_killed_import_left_out_are_created_at_the_next_open(settings):
    store = open_sqlite(settings, "alice")
    before = indexes(store)
    with store.db.transaction():  # what a bulk import killed before its end leaves behind
        for name in schema.DEFERRED_INDEXES:
            store.db.write(f"DROP INDEX {name}")
    store.close()
    reopened = open_sqlite(settings, "alice")
    try:
        assert indexes(reopened) == before
    finally:
        reopened.close()


def test_parsed_embeddings_are_compact_arrays_of_the_same_floats():
    values = [0.1, -2.5, 3.0000001, 0.0, 1e-8, 7.0, 8.5, -0.25]
    line = json.dumps({"kind": "engram", "id": "m1", "content": "x", "embedding": values})
    (record,) = parse_lines([line], DIMS)
    assert isinstance(record["embedding"], array) and list(record["embedding"]) == values


def test_an_embedding_that_is_not_numbers_is_a_format_error():
    line = json.dumps({"kind": "engram", "id": "m1", "content": "x", "embedding": ["a"] * DIMS})
    with pytest.raises(RecordFormatError) as caught:
        parse_lines(["", line], DIMS)
    assert caught.value.line == 2
