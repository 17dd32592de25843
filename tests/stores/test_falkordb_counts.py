"""What a FalkorDB recall no longer counts or asks at every call (stores/cypher/falkordb.py):
each user's engram count is kept on an ``EngramTally`` node by the queries that create and
delete engrams (every process sharing the graph reads the same count), a cue's engram count is
its degree, and an answer that every search index is built is kept for a second (never an
answer that one is missing). A store finds the latest memories of its source through an index,
not by walking the user's engrams.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from smriti.stores.base import Cue, Engram, StoreError
from smriti.stores.cypher import search as cypher_search
from smriti.stores.cypher.falkordb import TALLY_LABEL, FalkorDBConnection, open_falkordb
from smriti.stores.migrations import MIGRATIONS_KEY
from smriti.stores.records import encoded_by_record, engram_record, import_into

DIMS = 16  # the falkor fixture's EMBEDDING_DIMS


def _vector(seed: int) -> list[float]:
    return np.random.default_rng(seed).normal(size=DIMS).astype(np.float32).tolist()


def _engrams(prefix: str, n: int, start: int = 0) -> list[Engram]:
    return [
        Engram(id=f"{prefix}{i}", content=f"note {i} about kafka", embedding=_vector(i))
        for i in range(start, start + n)
    ]


def _counted(graph, user: str) -> int:
    return graph.query("MATCH (e:Engram {user: $u}) RETURN count(e)", {"u": user}).result_set[0][0]


def _kept(graph, user: str) -> int | None:
    rows = graph.query(f"MATCH (t:{TALLY_LABEL} {{user: $u}}) RETURN t.engrams", {"u": user}).result_set
    return rows[0][0] if rows else None


@pytest.fixture
def two_processes(falkor):
    """Alice's store twice on one FalkorDB, as two server processes have it: one on the test's
    client, one on a TCP connection of its own."""
    client, cfg, _, open_store = falkor
    first = open_store("alice")
    second = open_falkordb(cfg, "alice")  # its own client, as another process would have
    yield client.select_graph(cfg.falkor_graph), first, second, open_store
    second.close()


def test_every_store_object_on_one_falkordb_reads_the_same_kept_count(two_processes):
    graph, first, second, open_store = two_processes
    bob = open_store("bob")
    first.create_engrams(_engrams("a", 3))
    assert second.count_engrams() == first.count_engrams() == 3
    second.create_engram(_engrams("b", 1)[0])
    second.create_engrams(_engrams("c", 2))
    assert first.count_engrams() == 6
    assert first.delete_engram("c0") is True
    assert second.count_engrams() == 5
    assert second.delete_engram("c0") is False  # forgetting what is gone changes nothing
    assert first.count_engrams() == 5
    records = [engram_record(e) for e in _engrams("d", 4)] + [encoded_by_record("d0", "kafka")]
    import_into(second, records)
    import_into(first, records)  # the same file again: nothing new, the count stays
    assert first.count_engrams() == second.count_engrams() == 9 == _counted(graph, "alice")
    assert _kept(graph, "alice") == 9
    assert bob.count_engrams() == 0  # tenant mode: every user's count is their own
    bob.create_engrams(_engrams("a", 2))
    assert bob.count_engrams() == 2 and first.count_engrams() == 9


def test_a_failed_create_leaves_the_kept_count_as_it_was(two_processes):
    graph, first, _, _ = two_processes
    first.create_engrams(_engrams("a", 2))
    with pytest.raises(StoreError):
        first.create_engrams(_engrams("a", 3))  # a0 and a1 exist: the whole query fails
    assert first.count_engrams() == 2 == _counted(graph, "alice")


def test_each_open_recounts_a_count_that_drifted_and_says_so_in_its_migrations(two_processes):
    graph, first, _, open_store = two_processes
    first.create_engrams(_engrams("a", 4))
    # Written by a Smriti that kept no count (raw nodes), and the tally itself gone.
    graph.query("CREATE (:Engram {user: 'alice', id: 'raw', content: 'raw'})")
    graph.query(f"MATCH (t:{TALLY_LABEL} {{user: 'alice'}}) DELETE t")
    assert first.count_engrams() == 5  # no tally: counted
    reopened = open_store("alice")
    assert _kept(graph, "alice") == 5 == reopened.count_engrams()
    graph.query(f"MATCH (t:{TALLY_LABEL} {{user: 'alice'}}) SET t.engrams = 42")
    assert open_store("alice").count_engrams() == 5
    assert "0003_engram_tally" in first.get_meta(MIGRATIONS_KEY)
    # A count that is right is left alone: the open's check writes nothing.
    connection = reopened.connection
    assert isinstance(connection, FalkorDBConnection)
    assert connection._count_engrams(reopened.graph) == []


def test_a_cues_engram_count_read_from_its_degree_is_the_walked_count(two_processes):
    graph, first, _, open_store = two_processes
    engrams = _engrams("a", 12)
    first.create_engrams(engrams)
    hub, rare = first.upsert_cues([Cue("kafka", "technology"), Cue("bob", "person")])
    for engram in engrams:
        first.link_cue_ids(engram.id, [hub.id])
    first.link_cue_ids("a0", [rare.id, hub.id])  # linked again: still one edge
    bob = open_store("bob")  # a cue of the same name of another user counts for them alone
    bob.create_engrams(_engrams("b", 2))
    (bobs,) = bob.upsert_cues([Cue("kafka", "technology")])
    bob.link_cue_ids("b0", [bobs.id])
    walked = dict(
        graph.query(
            "MATCH (c:Cue {user: 'alice'})<-[:EncodedBy]-(e:Engram {user: 'alice'}) RETURN c.name, count(e)"
        ).result_set
    )
    assert (
        first.cue_engram_counts(["Kafka", "bob", "nobody"])
        == {"Kafka": 12, "bob": 1}
        == {
            "Kafka": walked["kafka"],
            "bob": walked["bob"],
        }
    )
    assert bob.cue_engram_counts(["kafka"]) == {"kafka": 1}


def test_recall_rows_bring_the_cosines_and_cues_and_no_embedding(two_processes):
    _, first, _, _ = two_processes
    first.create_engrams(_engrams("a", 3))
    cues = first.upsert_cues([Cue("kafka", "technology"), Cue("alice", "person"), Cue("zeta")])
    first.link_cue_ids("a0", [c.id for c in cues])
    first.link_cue_ids("a1", [cues[0].id])
    rows = first.recall_rows(["a1", "missing", "a0", "a2"], np.asarray(_vector(0)))
    assert [row.engram.id for row in rows] == ["a1", "a0", "a2"]
    assert {row.engram.id: row.cues for row in rows} == first.cues_of(["a1", "a0", "a2"])
    assert [c.name for c in rows[1].cues] == ["alice", "kafka", "zeta"]
    assert rows[2].cues == []
    assert rows[1].similarity == pytest.approx(1.0, abs=1e-6)
    assert all(row.vector is None and row.engram.embedding is None for row in rows)


def _build_indexes(store) -> None:
    assert store.ensure_indexes(0) == {"vector_index": True, "fulltext_index": True}


def _spy_index_state(monkeypatch) -> list[int]:
    asked: list[int] = []
    state = FalkorDBConnection.index_state

    def spy(self):
        asked.append(1)
        return state(self)

    monkeypatch.setattr(FalkorDBConnection, "index_state", spy)
    return asked


def test_an_answer_that_an_index_is_missing_is_never_kept(two_processes):
    _, first, second, _ = two_processes
    first.create_engrams(_engrams("a", 3))
    assert second.vector_search(_vector(1), 2)  # brute force: no index yet
    assert second.search.indexes() == {"vector": False, "fulltext": False}
    _build_indexes(first)  # another process builds them: seen at once, the same second
    assert second.search.indexes() == {"vector": True, "fulltext": True}


def test_an_answer_that_every_index_is_built_is_kept_a_second(two_processes, monkeypatch):
    _, first, _, _ = two_processes
    first.create_engrams(_engrams("a", 5))
    now = [1000.0]
    first.search.clock = lambda: now[0]
    _build_indexes(first)  # its last answer: built
    asked = _spy_index_state(monkeypatch)
    first.vector_search(_vector(2), 3)
    first.fulltext_search("kafka", 3)
    first.ensure_indexes(0)  # what the store pipeline asks at every store
    assert asked == []
    now[0] += cypher_search.INDEX_STATE_SECONDS - 0.1
    first.vector_search(_vector(2), 3)
    assert asked == []
    now[0] += 0.2
    first.vector_search(_vector(2), 3)
    first.fulltext_search("kafka", 3)
    assert len(asked) == 1  # asked again, and that answer kept in turn
    first.search.indexes(refresh=True)
    assert len(asked) == 2


def _until_gone(connection: FalkorDBConnection, kind: str) -> None:
    """Wait until the database no longer lists the dropped ``kind`` index (a drop under load
    was seen to show after the next query)."""
    deadline = time.monotonic() + 10
    while connection.index_state()[kind]:
        assert time.monotonic() < deadline, f"the {kind} index was not dropped"
        time.sleep(0.02)


def _until_unanswered(connection: FalkorDBConnection, call: str, params: dict) -> None:
    """Wait until a query through a dropped index answers nothing or fails: FalkorDB lists the
    index as gone a moment before its queries stop being served from it (seen under CI's load, for
    both kinds), and only an empty answer or an error is what a search can notice."""
    deadline = time.monotonic() + 10
    while True:
        try:
            if not connection.run(call, params):
                return
        except StoreError:
            return
        assert time.monotonic() < deadline, f"the dropped index still answers {call!r}"
        time.sleep(0.02)


def test_a_search_through_an_index_dropped_meanwhile_falls_back_at_once(two_processes):
    _, first, second, _ = two_processes
    second.search.clock = lambda: 0.0  # what second keeps never ages: only a failed search tells
    first.create_engrams(_engrams("a", 6))
    _build_indexes(first)
    query = _vector(3)
    through_index = second.vector_search(query, 3)
    keyword = second.fulltext_search("kafka", 3)
    assert second.search.indexes() == {"vector": True, "fulltext": True}  # kept now
    connection = first.connection
    assert isinstance(connection, FalkorDBConnection)
    # Within the second: the keyword query on a dropped index answers nothing, the vector query
    # fails; each is noticed and searched without the index, with the same hits.
    connection.run("CALL db.idx.fulltext.drop('Engram')")
    _until_gone(connection, "fulltext")
    _until_unanswered(
        connection, "CALL db.idx.fulltext.queryNodes('Engram', $q) YIELD node RETURN node.id", {"q": "kafka"}
    )
    assert [h.id for h in second.fulltext_search("kafka", 3)] == [h.id for h in keyword]
    assert second.search.indexes() == {"vector": True, "fulltext": False}
    first.search.indexes(refresh=True)  # first's "built" is a second old at most: not waited for
    _build_indexes(first)
    assert second.search.indexes() == {"vector": True, "fulltext": True}  # kept again
    connection.run("DROP VECTOR INDEX FOR (v:EngramVector) ON (v.embedding)")
    _until_gone(connection, "vector")
    call, _ = connection.index_vector_call()
    _until_unanswered(connection, f"{call} RETURN node.id", {"k": 3, "q": connection.vector_param(query)})
    assert [h.id for h in second.vector_search(query, 3)] == [h.id for h in through_index]
    assert second.search.indexes() == {"vector": False, "fulltext": True}


def test_a_search_through_a_listed_index_that_fails_is_answered_without_it(two_processes, monkeypatch):
    """A query through an index FalkorDB lists as operational may still fail (once after a restart
    from kill -9): the search is answered exactly without the index, not failed."""
    _, first, _, _ = two_processes
    first.create_engrams(_engrams("a", 6))
    _build_indexes(first)
    query = _vector(3)
    through_index = [h.id for h in first.vector_search(query, 3)]
    keyword = [h.id for h in first.fulltext_search("kafka", 3)]
    assert first.search.indexes(refresh=True) == {"vector": True, "fulltext": True}

    def failing(*_args, **_kwargs):
        raise StoreError("Invalid arguments for procedure 'db.idx.vector.queryNodes'")

    monkeypatch.setattr(first.search, "_vector_indexed", failing)
    monkeypatch.setattr(first.search, "_fulltext_indexed", failing)
    assert [h.id for h in first.vector_search(query, 3)] == through_index
    assert [h.id for h in first.fulltext_search("kafka", 3)] == keyword
    assert first.search.indexes() == {"vector": True, "fulltext": True}  # still listed, still used next time


def _plans_of(graph, monkeypatch, call) -> list[str]:
    """FalkorDB's plan of every query ``call()`` sends."""
    queries: list[tuple[str, dict]] = []
    run = FalkorDBConnection.run

    def spy(self, query, params=None):
        queries.append((query, dict(params or {})))
        return run(self, query, params)

    monkeypatch.setattr(FalkorDBConnection, "run", spy)
    call()
    monkeypatch.setattr(FalkorDBConnection, "run", run)
    return [str(graph.explain(query, params)) for query, params in queries]


def test_the_latest_memories_of_a_source_are_found_through_an_index(two_processes, monkeypatch):
    graph, first, _, _ = two_processes
    engrams = _engrams("a", 6)
    for i, engram in enumerate(engrams):
        engram.source = "chat-1" if i % 2 else "chat-2"
    first.create_engrams(engrams)
    assert set(first.latest_of_source("chat-1", 2)) <= {"a1", "a3", "a5"}
    assert len(first.latest_of_source("chat-1", 10)) == 3
    (plan,) = _plans_of(graph, monkeypatch, lambda: first.latest_of_source("chat-1", 2))
    # The (user, source) index answers: no scan of the user's engrams filtered by source.
    assert "Node By Index Scan" in plan and "Filter" not in plan and "Label Scan" not in plan


def test_decay_and_forget_read_their_few_engrams_and_cues_through_the_index(two_processes, monkeypatch):
    """``$ids IS NULL OR e.id IN $ids`` made FalkorDB scan every engram of the user for each
    chunk decay re-reads (1 s a chunk at 100k): the filter is only sent when given."""
    graph, first, _, _ = two_processes
    first.create_engrams(_engrams("a", 8))
    cue, _ = first.upsert_cues([Cue("kafka", "technology"), Cue("orphan")])
    first.link_cue_ids("a0", [cue.id])
    (plan,) = _plans_of(graph, monkeypatch, lambda: first.engram_states(["a1", "a2"]))
    assert "Node By Index Scan" in plan and "Filter" not in plan
    assert [s.id for s in first.engram_states(["a2", "a1", "zz"])] == ["a1", "a2"]
    assert len(first.engram_states()) == 8 and first.engram_states([]) == []
    (plan,) = _plans_of(graph, monkeypatch, lambda: first.delete_orphan_cues(["kafka"]))
    assert "Node By Index Scan" in plan and "Label Scan" not in plan
    assert first.delete_orphan_cues(["kafka", "orphan"]) == 1  # kafka encodes a0: kept
    assert first.delete_orphan_cues() == 0
    assert [c.name for c in first.cues_of(["a0"])["a0"]] == ["kafka"]
