"""FalkorDB specifics: graph naming, the user property, connection errors, refusals."""

from __future__ import annotations

import socket
import uuid

import numpy as np
import pytest

from smriti.stores.base import Association, Cue, EmbeddingMismatchError, Engram, Relation, StoreError
from smriti.stores.cypher.falkordb import open_falkordb

DIMS = 16


def _populate(store, prefix: str) -> None:
    rng = np.random.default_rng(len(prefix))
    for i in range(3):
        embedding = rng.normal(size=DIMS)
        store.create_engram(Engram(id=f"{prefix}{i}", content=f"{prefix} note {i}", embedding=embedding))
    python = store.upsert_cue(Cue(name="python"))
    sql = store.upsert_cue(Cue(name="sql"))
    for i in range(3):
        store.link_cue(f"{prefix}{i}", python.id)
    store.link_cue(f"{prefix}0", sql.id)
    store.associate(Association(f"{prefix}0", f"{prefix}1", 0.5))
    store.add_cooccurrence("python", "sql")
    store.add_relation(Relation("python", "uses", "sql", engram_id=f"{prefix}0"))
    store.set_meta("k", prefix)


def test_graph_isolation_names_the_graph_after_the_user(falkor):
    client, cfg, token, open_store = falkor
    user = f"u{token}.x-y"
    store = open_store(user, falkor_isolation="graph")
    store.create_engram(Engram(id="g1", content="in my own graph"))
    assert store.graph_name == f"{user}_smriti"
    assert store.graph_name in client.list_graphs()
    assert cfg.falkor_graph not in client.list_graphs()


def test_tenant_mode_tags_every_node_and_never_links_across_users(falkor):
    client, cfg, _, open_store = falkor
    alice, bob = open_store("alice"), open_store("bob")
    _populate(alice, "a")
    _populate(bob, "b")
    graph = client.select_graph(cfg.falkor_graph)
    untagged = graph.query("MATCH (n) WHERE n.user IS NULL RETURN count(n)").result_set[0][0]
    crossing = graph.query("MATCH (a)-[r]->(b) WHERE a.user <> b.user RETURN count(r)").result_set[0][0]
    labels = {row[0] for row in graph.query("MATCH (n) RETURN DISTINCT labels(n)[0]").result_set}
    edges = graph.query("MATCH ()-[r]->() RETURN count(r)").result_set[0][0]
    # embeddings on nodes of their own, and each user's engram count on one
    assert labels == {"Engram", "EngramVector", "Cue", "Meta", "EngramTally"}
    assert untagged == 0
    assert edges == 2 * (4 + 1 + 1 + 1)  # per user: 4 EncodedBy, 1 AssociatedWith, 1 CoOccurs, 1 RelatesTo
    assert crossing == 0
    constraints = {(c["label"], tuple(c["properties"])) for c in graph.list_constraints()}
    assert ("Cue", ("user", "name")) in constraints and ("Engram", ("user", "id")) in constraints
    assert ("EngramVector", ("user", "id")) in constraints
    assert ("EngramTally", ("user",)) in constraints


def test_queries_never_contain_the_user_name(falkor, monkeypatch):
    _, _, _, open_store = falkor
    store = open_store("zed-o.neil")
    seen: list[str] = []
    connection = store.connection  # every query of the store goes through its connection
    original = type(connection).run

    def spy(self, query, params=None):
        seen.append(query)
        return original(self, query, params)

    monkeypatch.setattr(type(connection), "run", spy)
    _populate(store, "z")
    store.vector_search([1.0] * DIMS, 3)
    store.fulltext_search("note", 3)
    store.ensure_indexes(0)
    store.vector_search([1.0] * DIMS, 3)
    store.fulltext_search("note", 3)
    list(store.export_records())
    store.delete_engram("z0")
    assert len(seen) > 20
    assert not [q for q in seen if "zed" in q]


def test_reopening_an_existing_graph_keeps_its_data(falkor):
    _, _, _, open_store = falkor
    first = open_store("alice")
    _populate(first, "a")
    first.ensure_indexes(0)
    again = open_store("alice")
    assert again.count_engrams() == 3
    assert again.stats().vector_index is True


def test_nodes_missing_newer_properties_read_back_with_defaults(falkor):
    client, cfg, _, open_store = falkor
    store = open_store("alice")
    # As an older Smriti (before cluster_id and decay existed) would have written it.
    client.select_graph(cfg.falkor_graph).query(
        "CREATE (:Engram {user: 'alice', id: 'old', content: 'legacy', "
        "created_at: '2024-05-06T07:08:09+00:00'})"
    )
    got = store.get_engram("old")
    assert (got.cluster_id, got.decay_factor, got.access_count, got.importance) == (-1, 1.0, 0, 0.5)
    assert got.last_accessed_at == got.created_at and got.created_at.tzinfo is not None
    assert [s.id for s in store.engram_states()] == ["old"]


def test_vector_index_scores_are_cosine_similarity(falkor):
    _, _, _, open_store = falkor
    store = open_store("alice")
    axis = [1.0] + [0.0] * (DIMS - 1)
    tilted = [0.6, 0.8] + [0.0] * (DIMS - 2)
    opposite = [-1.0] + [0.0] * (DIMS - 1)
    for eid, v in (("axis", axis), ("tilted", tilted), ("opposite", opposite)):
        store.create_engram(Engram(id=eid, content=eid, embedding=v))
    store.ensure_indexes(0)
    found = store.vector_search(axis, 3)
    assert [h.id for h in found] == ["axis", "tilted", "opposite"]
    assert [h.score for h in found] == pytest.approx([1.0, 0.6, -1.0], abs=1e-5)  # cosine, not distance
    assert store.vector_search([0.0] * DIMS, 3) == []


def test_refusals(falkor):
    _, _, _, open_store = falkor
    store = open_store("alice")
    with pytest.raises(EmbeddingMismatchError, match="EMBEDDING_DIMS"):
        store.create_engram(Engram(id="short", content="x", embedding=[1.0, 2.0]))
    with pytest.raises(EmbeddingMismatchError, match="EMBEDDING_DIMS"):
        store.vector_search([1.0, 2.0], 3)
    with pytest.raises(ValueError, match="NUL"):
        store.create_engram(Engram(id="nul", content="a\x00b"))
    with pytest.raises(ValueError, match="memory_type"):
        store.create_engram(Engram(id="bad", content="x", memory_type="dream"))
    assert store.count_engrams() == 0


def test_unreachable_server_names_falkor_addr(settings):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again on exit: nothing listens there
    cfg = settings.model_copy(update={"db_type": "falkordb", "falkor_addr": f"127.0.0.1:{port}"})
    with pytest.raises(StoreError, match="FALKOR_ADDR"):
        open_falkordb(cfg, "alice")
    with pytest.raises(StoreError, match="FALKOR_ADDR"):
        open_falkordb(cfg.model_copy(update={"falkor_addr": "no-port-here"}), "alice")


def test_tcp_store_close_leaves_the_shared_server_running(falkor_server, settings):
    client, port = falkor_server
    from smriti.stores import make_store

    graph = f"falkor_tcp_{uuid.uuid4().hex[:8]}"
    cfg = settings.model_copy(
        update={
            "db_type": "falkordb",
            "falkor_addr": f"127.0.0.1:{port}",
            "falkor_graph": graph,
            "embedding_dims": DIMS,
        }
    )
    store = make_store(cfg, "alice")
    store.create_engram(Engram(id="t1", content="over tcp"))
    assert store.location.startswith("falkordb://127.0.0.1:")
    store.close()
    assert client.connection.ping()
    assert graph in client.list_graphs()
    client.select_graph(graph).delete()


def test_a_control_character_tag_or_a_huge_word_cannot_crash_the_shared_server(falkor):
    """Once a segfault of FalkorDB 4.22 (tenant mode: every user's server): a tag holding \\x01
    and a 5,000-character word, stored through the whole store pipeline."""
    from smriti.memory import Memory
    from smriti.pipelines.context import build_context

    client, cfg, _, _ = falkor
    tenant = cfg.model_copy(update={"falkor_isolation": "tenant", "llm_provider": "heuristic"})
    with Memory(build_context(tenant, user="mallory")) as memory:
        stored = memory.store("Deploy notes " + "z" * 5_000 + " for Atlas", tags="ops\x01night,\x00")
        assert all(len(cue["name"]) <= 200 and "\x01" not in cue["name"] for cue in stored["cues"])
        again = memory.store("Bob reviews the Atlas deploy every Friday", tags="ops")
        assert again["id"] != stored["id"]
        assert memory.stats()["engrams"] == 2
    assert client.list_graphs() is not None  # the shared server still answers


def test_auto_gives_a_new_falkordb_graph_the_semantic_embedder_and_an_old_one_its_own(
    falkor_server, tmp_path, monkeypatch
):
    """As on SQLite, ``EMBEDDING_PROVIDER=auto`` without a key reads what the graph records
    before opening it: a new graph gets MiniLM (not silently the hashing embedder), a graph
    made with the hashing embedder keeps it."""
    from smriti.config import Settings
    from smriti.providers import minilm
    from smriti.providers.models import build_embedder, check_embedding_identity, resolve_embedding
    from smriti.stores import recorded_embedding

    if minilm.missing() is not None:
        pytest.skip("the local MiniLM embedder is not installed")
    for name in ("EMBEDDING_DIMS", "EMBEDDING_PROVIDER", "EMBEDDING_API_KEY", "LLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    _, port = falkor_server
    graph = f"falkor_auto_{uuid.uuid4().hex[:8]}"
    cfg = Settings(
        storage_location=tmp_path, db_type="falkordb", falkor_addr=f"127.0.0.1:{port}", falkor_graph=graph
    )
    assert recorded_embedding(cfg, "alice") is None  # the graph does not exist: nothing created
    chosen = resolve_embedding(cfg, recorded_embedding(cfg, "alice")).settings
    assert (chosen.embedding_provider, chosen.embedding_dims) == ("minilm", minilm.DIMS)

    hashing = cfg.model_copy(update={"embedding_provider": "hashing", "embedding_dims": 64})
    store = open_falkordb(hashing, "bob")
    try:
        check_embedding_identity(store, build_embedder(hashing), hashing)
    finally:
        store.close()
    recorded = recorded_embedding(cfg, "bob")
    assert recorded is not None and recorded.known and recorded.dims == 64
    kept = resolve_embedding(cfg, recorded).settings
    assert (kept.embedding_provider, kept.embedding_dims) == ("hashing", 64)
