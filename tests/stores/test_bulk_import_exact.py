"""Bulk imports of a few thousand memories take the fast paths and land exactly what the file
holds (ids, texts, embeddings, cue links, relations, associations, co-occurrences): FalkorDB over
TCP (a real falkordblite server process; a few ``UNWIND`` queries per batch) and the embedded
Kuzu store (``COPY ... FROM`` Arrow tables)."""

from __future__ import annotations

import time
import uuid

import numpy as np
import pytest

from smriti.config import Settings
from smriti.stores import make_store
from smriti.stores.base import Association, Engram, Relation, StoreError
from smriti.stores.records import (
    association_record,
    co_occurs_record,
    encoded_by_record,
    engram_record,
    import_into,
    relation_record,
)

DIMS = 8
MEMORIES = 2_500
BATCH = 1_000


def records_of(count: int) -> list[dict]:
    """An export of ``count`` memories with 3 cues each (one shared), a relation each, a chain of
    associations (crossing batch boundaries) and co-occurrences, in the file's order."""
    engrams = []
    for i in range(count):
        engram = Engram(content=f"memory {i} about topic{i % 50} and person{i % 7}", id=f"m{i:05d}")
        engram.embedding = [float((i * 7 + d) % 11) - 5.0 for d in range(DIMS)]
        engram.tags = f"tag{i % 3}"
        engrams.append(engram)
    out = [engram_record(e) for e in engrams]
    out += [
        encoded_by_record(e.id, name)
        for i, e in enumerate(engrams)
        for name in (f"topic{i % 50}", f"person{i % 7}", "shared")
    ]
    out += [
        association_record(Association(engrams[i].id, engrams[i + 1].id, 0.25 + (i % 4) / 10))
        for i in range(count - 1)
    ]
    out += [co_occurs_record(f"topic{t}", f"person{t % 7}", 1.0 + t) for t in range(50)]
    out += [
        relation_record(Relation(f"person{i % 7}", "mentions", f"topic{i % 50}", engram_id=e.id))
        for i, e in enumerate(engrams)
    ]
    return out


def falkor_settings(tmp_path, port: int, graph: str, **extra) -> Settings:
    """Tenant mode on the test server's TCP port, in a graph of the test's own."""
    return Settings(
        storage_location=tmp_path,
        accessing_user="alice",
        embedding_dims=DIMS,
        db_type="falkordb",
        falkor_addr=f"127.0.0.1:{port}",
        falkor_graph=graph,
        falkor_isolation="tenant",
        **extra,
    )


@pytest.fixture
def falkor_store(falkor_server, tmp_path):
    client, port = falkor_server
    graph = f"smriti_import_{uuid.uuid4().hex[:10]}"
    store = make_store(falkor_settings(tmp_path, port, graph), "alice")
    yield store
    store.close()
    client.select_graph(graph).delete()


def content(records: list[dict]) -> dict[str, set]:
    """What an export says, in comparable form (sets of tuples, floats rounded)."""
    kinds: dict[str, set] = {}
    for record in records:
        kind = record["kind"]
        if kind == "engram":
            row = (
                record["id"],
                record["content"],
                record["tags"],
                tuple(round(v, 5) for v in record["embedding"]),
            )
        elif kind == "encoded_by":
            row = (record["engram_id"], record["cue"])
        elif kind == "associated_with":
            row = (*sorted((record["source_id"], record["target_id"])), round(record["strength"], 6))
        elif kind == "co_occurs":
            row = (*sorted((record["source"], record["target"])), record["strength"])
        elif kind == "relates_to":
            row = (record["source"], record["relation"], record["target"], record["engram_id"])
        else:
            continue
        kinds.setdefault(kind, set()).add(row)
    return kinds


def test_a_bulk_import_lands_exactly_and_in_a_few_queries_per_batch(falkor_store, monkeypatch):
    records = records_of(MEMORIES)
    queries: list[str] = []
    run = type(falkor_store.connection).run

    def counted(self, query, params=None):
        queries.append(query)
        return run(self, query, params)

    monkeypatch.setattr(type(falkor_store.connection), "run", counted)
    import_into(falkor_store, records, batch_size=BATCH)
    monkeypatch.undo()
    # Per-row writes would be thousands of queries (one per memory and per link).
    assert len(queries) < 8 * (MEMORIES // BATCH + 1) + 10, len(queries)
    assert falkor_store.count_engrams() == MEMORIES
    want, got = content(records), content(list(falkor_store.export_records()))
    for kind in ("engram", "encoded_by", "associated_with", "co_occurs", "relates_to"):
        assert got[kind] == want[kind], kind
    # The cues behind the links are one per name, and a second import changes nothing.
    assert len({row[1] for row in got["encoded_by"]}) == 50 + 7 + 1
    import_into(falkor_store, records, batch_size=BATCH)
    assert content(list(falkor_store.export_records())) == got


def test_a_batch_naming_an_existing_memory_again_writes_nothing(falkor_store):
    first = Engram(content="first", id="dup-1", embedding=[1.0] * DIMS)
    falkor_store.create_engrams([first])
    fresh = Engram(content="fresh", id="fresh-1", embedding=[2.0] * DIMS)
    with pytest.raises(StoreError):
        falkor_store.create_engrams([fresh, Engram(content="again", id="dup-1", embedding=[1.0] * DIMS)])
    assert falkor_store.get_engram("fresh-1") is None
    assert falkor_store.get_engram("dup-1").content == "first"


def test_vectors_are_sent_as_float32_text_and_read_back_exactly(falkor_store):
    """Vector parameters go as their shortest float32 text: every value, tiny, huge, negative or
    in exponent form, reads back as the same float32; a NaN is refused and writes nothing."""
    values = [1e-5, -3.5e-12, 1e-40, 1.0e30, -0.1, 0.30000001192092896, 123456.789, 0.0]
    engram = Engram(content="vector text", id="vec-1", embedding=values)
    falkor_store.create_engrams([engram])
    stored = falkor_store.get_engram("vec-1").embedding
    assert np.array_equal(np.asarray(stored, dtype=np.float32), np.asarray(values, dtype=np.float32))
    assert [hit.id for hit in falkor_store.vector_search(values, 1)] == ["vec-1"]
    with pytest.raises(ValueError, match="NaN"):
        falkor_store.create_engrams([Engram(content="bad", id="vec-2", embedding=[float("nan")] * DIMS)])
    assert falkor_store.get_engram("vec-2") is None


def test_a_bulk_import_into_kuzu_copies_from_arrow_and_lands_exactly(tmp_path):
    """The same file into the embedded Kuzu store: engrams, cues, links and relations go in by
    ``COPY ... FROM`` an Arrow table (pyarrow installed), and the content is the file's."""
    pytest.importorskip("pyarrow")
    from smriti.stores.kuzu import connection as kuzu_connection

    settings = Settings(
        storage_location=tmp_path, accessing_user="alice", embedding_dims=DIMS, db_type="kuzu"
    )
    store = make_store(settings, "alice")
    queries: list[str] = []
    run = kuzu_connection.Connection.run

    def counted(self, query, params=None):
        queries.append(query)
        return run(self, query, params)

    try:
        records = records_of(MEMORIES)
        kuzu_connection.Connection.run = counted
        try:
            import_into(store, records, batch_size=BATCH)
        finally:
            kuzu_connection.Connection.run = run
        copied = {query.split()[1] for query in queries if query.startswith("COPY ")}
        assert {"Engram", "Cue", "EncodedBy", "RelatesTo"} <= copied
        assert store.count_engrams() == MEMORIES
        want, got = content(records), content(list(store.export_records()))
        for kind in ("engram", "encoded_by", "associated_with", "co_occurs", "relates_to"):
            assert got[kind] == want[kind], kind
        import_into(store, records, batch_size=BATCH)  # again: nothing changes, nothing doubles
        assert content(list(store.export_records())) == got
        # The row cache and search answer for copied memories as for created ones.
        assert store.get_engram("m00042").content == "memory 42 about topic42 and person0"
        assert next(hit.id for hit in store.vector_search(records[42]["embedding"], 1)) in {
            r["id"] for r in records[:MEMORIES] if list(r["embedding"]) == list(records[42]["embedding"])
        }
    finally:
        store.close()


def _cli_import_setup(falkor_server, tmp_path):
    """(client, graph, settings, records file of 60 memories) of a ``smriti import`` into FalkorDB."""
    from tests.test_import_index import _records

    client, port = falkor_server
    graph = f"smriti_cli_{uuid.uuid4().hex[:10]}"
    settings = falkor_settings(
        tmp_path, port, graph, index_threshold=20, llm_provider="heuristic", embedding_provider="hashing"
    )
    path = tmp_path / "records.jsonl"
    _records(path, 60, DIMS)
    return client, graph, settings, path


def test_smriti_import_leaves_falkordbs_search_indexes_built(falkor_server, tmp_path):
    """``smriti import`` into FalkorDB builds the vector and full-text indexes before it returns:
    the next server's first recall uses them instead of reading every embedding."""
    from smriti.cli.transfer import import_from
    from smriti.memory import Memory

    client, graph, settings, path = _cli_import_setup(falkor_server, tmp_path)
    try:
        with Memory.open(settings) as memory:
            assert memory.context.store.search.indexes(refresh=True) == {"vector": False, "fulltext": False}
            import_from(memory, path)
            assert memory.context.store.search.indexes(refresh=True) == {"vector": True, "fulltext": True}
    finally:
        client.select_graph(graph).delete()


def test_an_import_whose_index_is_still_filling_ends_with_everything_in(
    falkor_server, tmp_path, monkeypatch, caplog
):
    """At 100k under load FalkorDB filled its vector index for longer than the wait: the import
    then failed at its very end, every memory in. Now it warns, and search goes on without the
    index until it answers."""
    from smriti.cli.transfer import import_from
    from smriti.memory import Memory
    from smriti.stores.cypher import falkordb

    client, graph, settings, path = _cli_import_setup(falkor_server, tmp_path)
    real = falkordb.FalkorDBConnection._label_indexes

    def filling(self):  # every label's index reads as still filling, as a slow build would
        return {label: (types, False) for label, (types, _) in real(self).items()}

    try:
        with Memory.open(settings) as memory:
            monkeypatch.setattr(falkordb, "INDEX_WAIT_SECONDS", 0)
            monkeypatch.setattr(falkordb.FalkorDBConnection, "_label_indexes", filling)
            import_from(memory, path)
            store = memory.context.store
            assert store.count_engrams() == 60
            assert store.search.indexes(refresh=True) == {"vector": False, "fulltext": False}
            assert "still filling" in caplog.text
            (engram,) = store.get_engrams(["m-0007"])
            hits = store.vector_search(engram.embedding, 3)  # exact, without the index
            assert len(hits) == 3 and hits[0].id == "m-0007"
            monkeypatch.setattr(falkordb.FalkorDBConnection, "_label_indexes", real)
            # The real index may itself still be filling on a loaded machine: wait for it (a
            # condition, with a deadline far past a quiet machine's few milliseconds).
            deadline = time.monotonic() + 120
            while store.search.indexes(refresh=True) != {"vector": True, "fulltext": True}:
                assert time.monotonic() < deadline, store.search.indexes(refresh=True)
                time.sleep(0.1)
    finally:
        client.select_graph(graph).delete()
