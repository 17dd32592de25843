"""The engrams part, forget that forgets (issue 12, point 5): on every backend, deleting a
memory removes at once everything it contributed: its RelatesTo facts, cue links, CoOccurs
strength, associations and the cues only it encoded. An export after the forget is the export
from before it was stored."""

from __future__ import annotations

import numpy as np
import pytest

from smriti.stores.base import (
    MAX_COOCCURRING_CUES,
    Association,
    Cue,
    Engram,
    Relation,
    cooccurring_pairs,
)
from tests.stores.conformance.data import DIMS, T0

pytestmark = pytest.mark.engrams


def remember(store, engram_id: str, cues: list[Cue], relations=(), associate_with=()) -> None:
    """What the store pipeline writes for one memory, in its order (nodes/link.py)."""
    vector = np.random.default_rng(len(engram_id) + ord(engram_id[-1])).normal(size=DIMS).round(6).tolist()
    store.create_engram(
        Engram(
            id=engram_id, content=f"memory {engram_id}", created_at=T0, last_accessed_at=T0, embedding=vector
        )
    )
    stored = store.link_cues(engram_id, cues)
    store.add_cooccurrences(cooccurring_pairs(stored))
    store.add_relations([Relation(a, rel, b, engram_id=engram_id, created_at=T0) for a, rel, b in relations])
    store.associate_many([Association(engram_id, other, 0.7, created_at=T0) for other in associate_with])


def export(store) -> list[dict]:
    return list(store.export_records())


FIRST = [
    Cue("Alice", "person"),
    Cue("Postgres", "technology"),
    Cue("pgvector", "technology"),
    Cue("billing", "keyword"),
    Cue("invoices", "keyword"),
]
# More cues than MAX_COOCCURRING_CUES, sharing three with FIRST (one of them as another type:
# the stored type wins), so which pairs it added depends on the leading-cue rule.
SECOND = [
    Cue("Bob", "person"),
    Cue("Postgres", "keyword"),
    Cue("Alice", "person"),
    Cue("pagination", "keyword"),
    Cue("cursor", "keyword"),
    Cue("orders-api", "concept"),
    Cue("billing", "keyword"),
    Cue("slow-offsets", "keyword"),
    Cue("backend", "tag"),
]


def test_forget_leaves_the_export_as_it_was_before_the_memory(store):
    assert len(SECOND) > MAX_COOCCURRING_CUES
    remember(store, "first", FIRST, relations=[("alice", "prefers", "postgres")])
    before = export(store)
    stats_before = store.stats()

    remember(
        store,
        "second",
        SECOND,
        relations=[("bob", "recommends", "pagination"), ("alice", "prefers", "postgres")],
        associate_with=["first"],
    )
    assert export(store) != before

    assert store.delete_engram("second") is True
    after = export(store)
    assert after == before
    assert "second" not in str(after)
    for name in ("bob", "pagination", "cursor", "orders-api", "slow-offsets", "backend"):
        assert f"'{name}'" not in str(after), name
    stats_after = store.stats()
    for key in ("engrams", "cues", "cue_links", "associations"):
        assert getattr(stats_after, key) == getattr(stats_before, key), key
    assert store.relations_of(["second"]) == []
    assert store.engrams_by_cues(["bob"], 5) == []
    assert store.delete_engram("second") is False


def test_forget_weakens_shared_pairs_and_keeps_cues_others_encode(store):
    remember(store, "one", [Cue("kafka"), Cue("redis"), Cue("nginx")])
    remember(store, "two", [Cue("kafka"), Cue("redis"), Cue("docker")])

    def strengths() -> dict[frozenset[str], float]:
        return {
            frozenset((r["source"], r["target"])): r["strength"]
            for r in store.export_records()
            if r["kind"] == "co_occurs"
        }

    assert strengths()[frozenset(("kafka", "redis"))] == pytest.approx(2.0)
    assert store.delete_engram("one")
    assert strengths() == {
        frozenset(("kafka", "redis")): pytest.approx(1.0),
        frozenset(("docker", "kafka")): pytest.approx(1.0),
        frozenset(("docker", "redis")): pytest.approx(1.0),
    }
    assert {c.name for c in store.cues_of(["two"])["two"]} == {"kafka", "redis", "docker"}
    assert store.stats().cues == 3  # nginx, only "one" encoded it, is gone
    assert store.delete_engram("two")
    assert strengths() == {}
    assert store.stats().cues == 0
