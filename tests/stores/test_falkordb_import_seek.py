"""An import into FalkorDB writes its edge rows by seeking the nodes it created or merged
(``id(n)``, stores/cypher/nodes.py) and makes the edge types known first: the graph it leaves is
the one the key lookups leave, per user, idempotently, and a seek that finds another node (a
reused node id) never writes through it. Real falkordblite over TCP."""

from __future__ import annotations

import uuid

import pytest

from smriti.stores import make_store
from smriti.stores.cypher import falkordb
from smriti.stores.cypher.nodes import NodeIds
from smriti.stores.records import import_into
from tests.stores.test_bulk_import_exact import falkor_settings, records_of

MEMORIES = 1_200
BATCH = 500


@pytest.fixture
def graph_of(falkor_server, tmp_path):
    """Stores of given users on one fresh tenant graph of the test server."""
    client, port = falkor_server
    graph = f"smriti_seek_{uuid.uuid4().hex[:10]}"
    stores = []

    def open_store(user: str):
        store = make_store(falkor_settings(tmp_path, port, graph), user)
        stores.append(store)
        return store

    yield open_store
    for store in stores:
        store.close()
    if stores:
        client.select_graph(graph).delete()


def snapshot(store) -> dict:
    """Everything of the user's graph an import writes: every node and edge with its properties
    (cue ids included), edge counts as stored (a duplicate edge shows), and the kept tally."""
    q = store.graph.q
    return {
        "engrams": sorted(
            tuple(sorted((k, str(v)) for k, v in row["p"].items() if k != "user"))
            for row in q("MATCH (e:Engram {user: $user}) RETURN properties(e) AS p")
        ),
        "vectors": sorted(
            (row["id"], tuple(row["v"]))
            for row in q("MATCH (v:EngramVector {user: $user}) RETURN v.id AS id, v.embedding AS v")
        ),
        "cues": sorted(
            (row["name"], row["id"], row["t"])
            for row in q("MATCH (c:Cue {user: $user}) RETURN c.name AS name, c.id AS id, c.cue_type AS t")
        ),
        "edges": sorted(
            (row["t"], row["a"], row["b"], tuple(sorted((k, str(v)) for k, v in row["p"].items())))
            for row in q(
                "MATCH (x {user: $user})-[r]->(y) RETURN type(r) AS t, coalesce(x.name, x.id, x.key) AS a, "
                "coalesce(y.name, y.id, y.key) AS b, properties(r) AS p"
            )
        ),
        "foreign_edges": q("MATCH (x {user: $user})-[r]-(y) WHERE y.user <> $user RETURN count(r) AS n")[0][
            "n"
        ],
        "tally": store.count_engrams(),
    }


def without_seeks(monkeypatch) -> None:
    """The key lookups of every edge row, as before (no node ids, no edge types made known)."""
    monkeypatch.setattr(falkordb.FalkorDBConnection, "node_id", lambda self, var: None)
    monkeypatch.setattr(falkordb, "_EDGE_TYPES", ())


def test_the_seeking_import_leaves_the_graph_the_key_lookups_leave(graph_of, monkeypatch):
    records = records_of(MEMORIES)
    seeking = graph_of("alice")
    queries: list[str] = []
    run = falkordb.FalkorDBConnection.run

    def counted(self, query, params=None):
        queries.append(query)
        return run(self, query, params)

    monkeypatch.setattr(falkordb.FalkorDBConnection, "run", counted)
    import_into(seeking, records, batch_size=BATCH)
    assert any("WHERE id(c) = row._c" in query for query in queries), "the links went by seek"
    assert any("WHERE id(a) = row._a" in query and "CoOccurs" in query for query in queries)
    monkeypatch.undo()
    got = snapshot(seeking)
    assert got["tally"] == MEMORIES and got["foreign_edges"] == 0

    with monkeypatch.context() as patch:
        without_seeks(patch)
        by_key = graph_of("bob")  # the same file, the same graph, another user: by key only
        import_into(by_key, records, batch_size=BATCH)
        want = snapshot(by_key)
    # Cue ids are made fresh by each import: compare them by name, everything else as stored.
    assert {k: v for k, v in got.items() if k != "cues"} == {k: v for k, v in want.items() if k != "cues"}
    assert [c[0::2] for c in got["cues"]] == [c[0::2] for c in want["cues"]]
    assert snapshot(seeking) == got, "bob's import changed nothing of alice's"

    import_into(seeking, records, batch_size=BATCH)  # the same file again: nothing doubles
    assert snapshot(seeking) == got


def test_a_seek_that_finds_another_node_writes_by_key_instead(graph_of, monkeypatch):
    """A node id is reused once its node is deleted: the import's remembered id of a cue then
    names another node (here: every cue id points at another user's cues and engrams). The rows
    are checked by label, user and key after the seek and written by key, so nothing links across
    users and the graph is the one a plain import makes."""
    records = records_of(300)
    other = graph_of("mallory")
    import_into(other, records_of(40), batch_size=100)
    foreign = [row["n"] for row in other.graph.q("MATCH (n {user: $user}) RETURN id(n) AS n")]
    real = NodeIds.remember

    def misremember(self, label, key, rows, node="node"):
        real(self, label, key, rows, node)
        for i, entry in enumerate(list(self._ids)):  # every id remembered is another node's
            self._ids[entry] = foreign[i % len(foreign)]

    monkeypatch.setattr(NodeIds, "remember", misremember)
    alice = graph_of("alice")
    import_into(alice, records, batch_size=100)
    monkeypatch.undo()
    got = snapshot(alice)
    assert got["foreign_edges"] == 0 and got["tally"] == 300

    with monkeypatch.context() as patch:
        without_seeks(patch)
        plain = graph_of("bob")
        import_into(plain, records, batch_size=100)
        want = snapshot(plain)
    assert {k: v for k, v in got.items() if k != "cues"} == {k: v for k, v in want.items() if k != "cues"}
    assert snapshot(other)["tally"] == 40 and snapshot(other)["foreign_edges"] == 0


def test_a_bad_record_stops_the_import_with_what_was_acknowledged_written_whole(graph_of):
    """A memory whose embedding holds NaN (it parses; FalkorDB cannot store it) in the second
    batch: the import raises a clear error, the first batch (acknowledged) is in whole with its
    edges, nothing of the second is, and the kept count says so; the fixed file then completes it."""
    records = records_of(MEMORIES)
    broken = [dict(r) for r in records]
    bad = next(i for i, r in enumerate(broken) if r["kind"] == "engram" and r["id"] == "m00700")
    broken[bad] = {**broken[bad], "embedding": [float("nan")] * len(broken[bad]["embedding"])}
    alice = graph_of("alice")
    acknowledged: list[int] = []
    with pytest.raises(ValueError, match="NaN"):
        import_into(alice, broken, batch_size=BATCH, on_memories=acknowledged.append)
    assert acknowledged == [BATCH]
    assert alice.count_engrams() == BATCH == len(alice.cluster_ids([f"m{i:05d}" for i in range(MEMORIES)]))
    assert not alice.cluster_ids([f"m{i:05d}" for i in range(BATCH, MEMORIES)])
    linked = alice.graph.q(
        "MATCH (e:Engram {user: $user})-[:EncodedBy]->(:Cue) RETURN count(DISTINCT e) AS n"
    )
    assert linked[0]["n"] == BATCH
    import_into(alice, records, batch_size=BATCH)
    assert alice.count_engrams() == MEMORIES
    assert snapshot(alice)["foreign_edges"] == 0


def test_an_import_into_a_fresh_graph_makes_its_edge_types_known_and_leaves_no_edge(graph_of):
    alice = graph_of("alice")
    with alice.bulk_import(1):
        types = {
            row["t"] for row in alice.run("CALL db.relationshipTypes() YIELD relationshipType AS t RETURN t")
        }
        assert set(falkordb._EDGE_TYPES) <= types
        assert alice.run("MATCH ()-[r]->() RETURN count(r) AS n")[0]["n"] == 0
        assert alice.graph.nodes is not None
    assert alice.graph.nodes is None
