"""Users never see, reach, change or count each other's memories, on every backend.

In FalkorDB and Neo4j ``tenant`` mode both users share one graph, so these tests are the
proof that the ``user`` filter is on every query and that cue names do not bridge tenants.
"""

from __future__ import annotations

import numpy as np
import pytest

from smriti.stores.base import Association, Cue, Engram, Relation, UnsafeUserError

DIMS = 16  # conftest.DIMS


def vec(seed: int) -> list[float]:
    return np.random.default_rng(seed).normal(size=DIMS).tolist()


ALICE_VECTOR = vec(1)


@pytest.fixture
def pair(backend):
    """alice with two engrams on cue "python" (and an association); bob with his own python memory."""
    alice = backend.open("alice")
    bob = backend.open("bob")
    alice.create_engram(Engram(id="a1", content="alice secret zanzibar plans", embedding=ALICE_VECTOR))
    alice.create_engram(
        Engram(id="a2", content="alice likes python", embedding=vec(2), memory_type="semantic")
    )
    python = alice.upsert_cue(Cue(name="python"))
    alice.link_cue("a1", python.id)
    alice.link_cue("a2", python.id)
    alice.associate(Association("a1", "a2", 0.9))
    alice.upsert_cue(Cue(name="alice-orphan"))
    alice.add_relation(Relation("python", "used-by", "alice-orphan", engram_id="a1"))
    alice.set_meta("secret", "alice")
    bob.create_engram(Engram(id="b1", content="bob writes python daily", embedding=vec(3)))
    bob_python = bob.upsert_cue(Cue(name="python"))
    bob.link_cue("b1", bob_python.id)
    return alice, bob


def test_cue_names_are_per_user(pair):
    alice, bob = pair
    assert alice.upsert_cue(Cue(name="python")).id != bob.upsert_cue(Cue(name="python")).id


def test_other_users_memories_are_invisible(pair):
    alice, bob = pair
    assert alice.get_engram("a1") is not None
    assert bob.get_engram("a1") is None
    assert bob.get_engrams(["a1", "a2", "b1"])[0].id == "b1"
    assert len(bob.get_engrams(["a1", "a2", "b1"])) == 1
    assert [e.id for e in bob.list_recent(10)] == ["b1"]
    assert [s.id for s in bob.engram_states()] == ["b1"]
    assert bob.count_engrams() == 1
    assert bob.cues_of(["a1"]).get("a1", []) == []
    assert bob.relations_of(["a1"]) == []
    assert bob.get_meta("secret") is None
    ids = {r.get("id") for r in bob.export_records()} | {r.get("engram_id") for r in bob.export_records()}
    assert not ids & {"a1", "a2"}
    stats = bob.stats()
    assert (stats.engrams, stats.cues, stats.cue_links, stats.associations) == (1, 1, 1, 0)


@pytest.mark.parametrize("indexed", [False, True], ids=["brute-force", "indexed"])
def test_search_never_returns_other_users_memories(pair, indexed):
    alice, bob = pair
    if indexed:
        alice.ensure_indexes(0)
        bob.ensure_indexes(0)
    assert [h.id for h in bob.vector_search(ALICE_VECTOR, 10)] == ["b1"]
    assert bob.vector_search(ALICE_VECTOR, 10, memory_type="semantic") == []
    assert bob.fulltext_search("zanzibar", 10) == []
    assert [h.id for h in bob.fulltext_search("python", 10)] == ["b1"]
    assert [h.id for h in alice.vector_search(ALICE_VECTOR, 1)] == ["a1"]


def test_indexed_search_finds_own_memory_behind_other_users_nearer_ones(backend):
    """The index spans every tenant: the store must look past other users' closer vectors."""
    alice, bob = backend.open("alice"), backend.open("bob")
    query = vec(10)
    alice.create_engram(Engram(id="mine", content="far", embedding=vec(11)))
    for i in range(40):
        near = (np.asarray(query) + np.random.default_rng(100 + i).normal(scale=0.05, size=DIMS)).tolist()
        bob.create_engram(Engram(id=f"bob-{i:02d}", content="near", embedding=near))
    alice.ensure_indexes(0)
    bob.ensure_indexes(0)
    assert [h.id for h in alice.vector_search(query, 1)] == ["mine"]
    assert len(bob.vector_search(query, 5)) == 5


def test_shared_cue_name_does_not_bridge_users(pair):
    alice, bob = pair
    assert [h.engram_id for h in bob.engrams_by_cues(["python"], 10)] == ["b1"]
    assert [h.engram_id for h in alice.engrams_by_cues(["python"], 10)] == ["a1", "a2"]
    assert bob.cue_engram_counts(["python"]) == {"python": 1}
    assert alice.cue_engram_counts(["python"]) == {"python": 2}


def test_neighbours_and_associations_stay_with_their_user(pair):
    alice, bob = pair
    assert bob.neighbours(["a1", "a2"]) == []
    assert bob.all_associations() == []
    assert len(alice.neighbours(["a1"])) == 1


def test_writes_cannot_reach_other_users_nodes(pair):
    alice, bob = pair
    assert bob.delete_engram("a1") is False
    assert bob.update_engram("a1", importance=0.0) is False
    assert bob.update_engrams({"a1": {"cluster_id": 9}}) == 0
    # Edges between users' nodes must never be created, whatever ids are passed.
    bob.associate(Association("b1", "a1", 1.0))
    bob.associate(Association("a1", "b1", 1.0))
    alice_python = alice.upsert_cue(Cue(name="python"))
    bob.link_cue("b1", alice_python.id)
    bob.link_cue("a1", alice_python.id)
    assert bob.all_associations() == []
    assert [(a.source_id, a.target_id) for a in alice.all_associations()] == [("a1", "a2")]
    assert [h.engram_id for h in alice.engrams_by_cues(["python"], 10)] == ["a1", "a2"]
    assert bob.stats().cue_links == 1
    # Maintenance on bob's side leaves alice's orphan cue alone.
    bob.delete_orphan_cues()
    assert alice.stats().cues == 2
    survivor = alice.get_engram("a1")
    assert survivor is not None and survivor.importance == pytest.approx(0.5)
    assert survivor.cluster_id == -1


HOSTILE_NAMES = [
    "o'brien",
    'say"hi',
    "back`tick",
    "{braces}",
    "..",
    "../escape",
    "a/b",
    "a b",
    "",
    "x" * 65,
    "x}) MATCH (n) DETACH DELETE n //",
    "alice' OR 1=1 --",
    "tab\tname",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=lambda n: repr(n)[:24])
def test_hostile_user_names_are_refused_and_change_nothing(backend, name):
    alice = backend.open("alice")
    alice.create_engram(Engram(id="keep", content="still here", embedding=vec(5)))
    before = (backend.snapshot(), sorted(map(repr, alice.export_records())))
    with pytest.raises(UnsafeUserError):
        backend.factory(backend.settings, name)
    assert (backend.snapshot(), sorted(map(repr, alice.export_records()))) == before
    assert alice.get_engram("keep") is not None
