"""FalkorDB keeps each engram's embedding on a node of its own, ``(:EngramVector {user, id,
embedding})`` (see stores/cypher/falkordb.py): graphs written the old way are moved at open with
nothing lost, reinforcing and decaying engrams leave their vectors and the search alone, vector
search (indexed and brute force) finds what numpy finds, and recall gets its cosines from the server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np
import pytest

from smriti.stores.base import Engram
from smriti.stores.cypher import falkordb
from smriti.stores.cypher.falkordb import VECTOR_LABEL, FalkorDBConnection
from smriti.stores.migrations import MIGRATIONS_KEY

DIMS = 16  # the falkor fixture's EMBEDDING_DIMS
NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIMS)).astype(np.float32)


def _alice_with(open_store, prefix: str, n: int, seed: int):
    """Alice's store holding ``n`` engrams ``{prefix}0``... with random vectors; (store, vectors)."""
    store, vectors = open_store("alice"), _vectors(n, seed)
    store.create_engrams(
        [Engram(id=f"{prefix}{i}", content=f"note {i}", embedding=v) for i, v in enumerate(vectors)]
    )
    return store, vectors


def _cosines(query: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    return (matrix @ query) / (np.linalg.norm(matrix, axis=1) * np.linalg.norm(query))


def _count(graph, query: str, **params) -> int:
    return graph.query(query, params).result_set[0][0]


def _index_kinds(graph) -> dict[str, dict[str, list[str]]]:
    rows = graph.query("CALL db.indexes() YIELD label, types RETURN label, types").result_set
    return {label: {prop: list(kinds) for prop, kinds in types.items()} for label, types in rows}


def _write_the_old_way(graph, user: str, vectors: np.ndarray, *, index: bool) -> None:
    """Engrams as Smriti wrote them before migration 0002: the embedding on the Engram, the
    vector index (when there was one) on Engram.embedding, the migrations record without 0002."""
    rows = [
        {"id": f"{user[0]}{i}", "content": f"{user} note {i}", "v": vector.tolist()}
        for i, vector in enumerate(vectors)
    ]
    graph.query(
        "UNWIND $rows AS row CREATE (:Engram {user: $user, id: row.id, content: row.content, "
        "summary: '', memory_type: 'semantic', importance: 0.5, access_count: 0, "
        "created_at: $at, last_accessed_at: $at, "
        "decay_factor: 1.0, source: '', tags: '', cluster_id: -1, superseded_by: '', facts: '', "
        "embedding: vecf32(row.v)})",
        {"rows": rows, "user": user, "at": "2026-01-01T00:00:00.000000+00:00"},
    )
    if index and "Engram" not in _index_kinds(graph):
        graph.query(
            "CREATE VECTOR INDEX FOR (e:Engram) ON (e.embedding) "
            f"OPTIONS {{dimension: {DIMS}, similarityFunction: 'cosine'}}"
        )
    graph.query(
        "CREATE (:Meta {user: $user, key: $key, value: $value})",
        {"user": user, "key": MIGRATIONS_KEY, "value": json.dumps(["0001_indexes_and_keys"])},
    )


def test_an_old_graph_is_moved_at_open_user_by_user_and_nothing_is_lost(falkor, monkeypatch):
    client, cfg, _, open_store = falkor
    monkeypatch.setattr(falkordb, "MOVE_BATCH", 3)  # 7 engrams: three batches, the last one short
    graph = client.select_graph(cfg.falkor_graph)
    alice_vectors, bob_vectors = _vectors(7, 1), _vectors(4, 2)
    _write_the_old_way(graph, "alice", alice_vectors, index=True)
    _write_the_old_way(graph, "bob", bob_vectors, index=True)

    alice = open_store("alice")
    on_engrams = "MATCH (e:Engram {user: $user}) WHERE e.embedding IS NOT NULL RETURN count(e)"
    apart = f"MATCH (v:{VECTOR_LABEL} {{user: $user}}) WHERE v.embedding IS NOT NULL RETURN count(v)"
    assert (_count(graph, on_engrams, user="alice"), _count(graph, apart, user="alice")) == (0, 7)
    assert (_count(graph, on_engrams, user="bob"), _count(graph, apart, user="bob")) == (
        4,
        0,
    )  # his open moves his
    kinds = _index_kinds(graph)
    assert "embedding" not in kinds.get("Engram", {})  # the old index is gone (it re-indexed on every SET)
    assert kinds[VECTOR_LABEL]["embedding"] == ["VECTOR"]
    assert "0002_engram_vectors_apart" in json.loads(alice.get_meta(MIGRATIONS_KEY))
    # Nothing lost: every embedding exactly (float32 in, float32 out), the rest of each engram too.
    got = alice.get_engrams([f"a{i}" for i in range(7)])
    assert np.array_equal(np.asarray([e.embedding for e in got], dtype=np.float32), alice_vectors)
    assert [e.content for e in got] == [f"alice note {i}" for i in range(7)]
    assert alice.ensure_indexes(0)["vector_index"] is True  # waits for the new index to fill
    assert [h.id for h in alice.vector_search(alice_vectors[5], 1)] == ["a5"]

    bob = open_store("bob")
    assert (_count(graph, on_engrams, user="bob"), _count(graph, apart, user="bob")) == (0, 4)
    assert bob.vector_search(bob_vectors[2], 2)[0].id == "b2"
    assert all(h.id.startswith("b") for h in bob.vector_search(bob_vectors[2], 11))  # the tenant wall
    # Idempotent: opening again changes nothing, and the move itself finds nothing left to do.
    again = open_store("alice")
    assert again.connection._move_vectors(again.graph) == []
    assert _count(graph, apart, user="alice") == 7 and again.count_engrams() == 7


def test_an_old_graph_without_a_vector_index_is_moved_and_searched_by_brute_force(falkor):
    client, cfg, _, open_store = falkor
    graph = client.select_graph(cfg.falkor_graph)
    vectors = _vectors(5, 3)
    _write_the_old_way(graph, "alice", vectors, index=False)
    store = open_store("alice")
    assert store.stats().vector_index is False  # none was there: none is built behind the user's back
    expected = np.argsort(-_cosines(vectors[0], vectors))[:3]
    found = store.vector_search(vectors[0], 3)
    assert [h.id for h in found] == [f"a{i}" for i in expected]
    assert [h.score for h in found] == pytest.approx(_cosines(vectors[0], vectors)[expected], abs=1e-5)


@pytest.mark.parametrize("indexed", [False, True], ids=["brute-force", "indexed"])
def test_vector_search_finds_what_numpy_finds_within_the_user_and_memory_type(falkor, indexed):
    _, _, _, open_store = falkor
    alice, bob = open_store("alice"), open_store("bob")
    vectors = _vectors(40, 4)
    kinds = ["semantic" if i % 2 else "episodic" for i in range(40)]
    alice.create_engrams(
        [
            Engram(id=f"a{i}", content=f"a {i}", embedding=v, memory_type=t)
            for i, (v, t) in enumerate(zip(vectors, kinds, strict=True))
        ]
    )
    # Bob holds the same vectors: the index returns his nodes too, and they must not leak.
    bob.create_engrams([Engram(id=f"b{i}", content=f"b {i}", embedding=v) for i, v in enumerate(vectors)])
    if indexed:
        alice.ensure_indexes(0)
    assert alice.stats().vector_index is indexed
    for query in _vectors(4, 5):
        sims = _cosines(query, vectors)
        best = np.argsort(-sims)[:5]
        found = alice.vector_search(query, 5)
        assert [h.id for h in found] == [f"a{i}" for i in best]
        assert [h.score for h in found] == pytest.approx(sims[best], abs=1e-5)
        semantic = [i for i in np.argsort(-sims) if kinds[i] == "semantic"][:5]
        assert [h.id for h in alice.vector_search(query, 5, memory_type="semantic")] == [
            f"a{i}" for i in semantic
        ]


def test_reinforcing_and_decaying_touch_no_vector_and_change_no_search(falkor):
    client, cfg, _, open_store = falkor
    store, _ = _alice_with(open_store, "m", 30, 6)
    store.ensure_indexes(0)
    queries = _vectors(5, 7)
    before = [store.vector_search(q, 5) for q in queries]
    ids = [f"m{i}" for i in range(30)]
    store.reinforce(ids, NOW, 0.05)
    store.update_engrams(
        {i: {"decay_factor": 0.5, "cluster_id": 3} for i in ids}
    )  # what consolidation writes
    assert [store.vector_search(q, 5) for q in queries] == before
    graph = client.select_graph(cfg.falkor_graph)
    # The vector sits on a node nothing else writes to, so FalkorDB never re-indexes it.
    keys = {
        tuple(sorted(row[0])) for row in graph.query(f"MATCH (v:{VECTOR_LABEL}) RETURN keys(v)").result_set
    }
    assert keys == {("embedding", "id", "user")}
    assert _count(graph, "MATCH (e:Engram) WHERE e.embedding IS NOT NULL RETURN count(e)") == 0
    assert {s.access_count for s in store.engram_states()} == {1}


def test_recall_rows_send_the_cosine_instead_of_the_embedding(falkor):
    _, _, _, open_store = falkor
    store, vectors = _alice_with(open_store, "v", 3, 8)
    store.create_engram(Engram(id="plain", content="no embedding"))
    query = _vectors(1, 9)[0]
    rows = store.recall_rows(["v2", "plain", "missing", "v0", "v1"], query)
    assert [r.engram.id for r in rows] == ["v2", "plain", "v0", "v1"]
    assert all(r.vector is None for r in rows)  # not sent
    sims = {r.engram.id: r.similarity for r in rows}
    assert sims.pop("plain") is None
    assert [sims[f"v{i}"] for i in range(3)] == pytest.approx(_cosines(query, vectors), abs=1e-5)
    assert {r.similarity for r in store.recall_rows(["v0", "v1"], np.zeros(DIMS))} == {
        0.0
    }  # as recall's cosine
    assert rows[2].engram.content == "note 0"
    # Without a query: the embeddings, as on every backend.
    [row] = store.recall_rows(["v1"])
    assert row.similarity is None and np.array_equal(row.vector, vectors[1])


def test_forgetting_an_engram_takes_its_vector_along(falkor):
    client, cfg, _, open_store = falkor
    store, vectors = _alice_with(open_store, "f", 3, 10)
    store.ensure_indexes(0)
    assert store.delete_engram("f1") is True
    graph = client.select_graph(cfg.falkor_graph)
    assert _count(graph, f"MATCH (v:{VECTOR_LABEL}) RETURN count(v)") == 2
    assert sorted(h.id for h in store.vector_search(vectors[1], 3)) == ["f0", "f2"]


def test_recall_ranks_the_same_with_server_cosines_as_with_shipped_embeddings(
    falkor, make_context, monkeypatch
):
    from smriti.pipelines.recall import build_recall_graph
    from smriti.pipelines.store import build_store_graph

    _, cfg, _, _ = falkor
    context = make_context(
        db_type="falkordb",
        falkor_addr=cfg.falkor_addr,
        falkor_graph=cfg.falkor_graph,
        embedding_dims=64,
        reinforce_boost=0.0,  # reinforcement then changes nothing a score reads
    )
    store = build_store_graph()
    for text in (
        "Alice plans the Lisbon trip for the data team in May",
        "Bob repairs the Lisbon tram and writes about Postgres",
        "Carol bakes bread with Alice on Sundays",
        "The data team migrates billing to Postgres",
        "Dana sails from Porto to Lisbon",
        "Postgres vacuum tuning notes from Bob",
    ):
        store.invoke({"content": text}, context=context)
    recall = build_recall_graph()

    def ranked(query: str) -> list[tuple[str, float]]:
        output = recall.invoke({"query": query, "limit": 5, "mode": "recall"}, context=context)
        return [(r["id"], r["score"]) for r in output["result"]["results"]]

    queries = ("Lisbon plans with Alice", "Postgres at the data team", "bread")
    server = [ranked(q) for q in queries]
    assert all(server) and [ranked(q) for q in queries] == server  # reinforced, and the same
    monkeypatch.setattr(FalkorDBConnection, "cosine_to_query", lambda self, vector: None)
    shipped = [ranked(q) for q in queries]
    assert [[i for i, _ in r] for r in shipped] == [[i for i, _ in r] for r in server]
    for got, want in zip(shipped, server, strict=True):
        assert [s for _, s in got] == pytest.approx([s for _, s in want], abs=1e-5)


def test_ensure_indexes_returns_once_every_index_has_taken_every_engram(falkor):
    """While a field is added to a label's index, FalkorDB lists the label twice (the index being
    built and the one still answering); reading only the operational row once let an import end
    with its full-text index still filling."""
    client, cfg, _, open_store = falkor
    store, _ = _alice_with(open_store, "n", 3000, 11)
    assert store.ensure_indexes(0) == {"vector_index": True, "fulltext_index": True}
    graph = client.select_graph(cfg.falkor_graph)
    statuses = [row[0] for row in graph.query("CALL db.indexes() YIELD status RETURN status").result_set]
    assert statuses and all(status == "OPERATIONAL" for status in statuses)
    assert len(store.fulltext_search("note", 5000)) == 3000
