"""The engrams part on every backend (see conftest.BACKENDS): rows written and read back whole,
updated, reinforced, listed, forgotten and superseded."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from smriti.stores.base import Association, Cue, Engram, Relation
from tests.stores.conformance.data import DIMS, T0, embedded, engram, vec

pytestmark = pytest.mark.engrams


def test_engram_round_trip_keeps_every_property(store):
    original = Engram(
        id="e-1",
        content='She said "hi" to O\'Brien\nthen left `quickly` {braces} \\ ünïcödé ✓',
        summary="a greeting",
        memory_type="semantic",
        importance=0.73,
        access_count=5,
        created_at=datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        last_accessed_at=datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
        decay_factor=0.42,
        embedding=vec(1),
        source="chat:42",
        tags="greeting,people",
        cluster_id=7,
    )
    store.create_engram(original)
    got = store.get_engram("e-1")
    assert got is not None
    for name in ("id", "content", "summary", "memory_type", "access_count", "source", "tags", "cluster_id"):
        assert getattr(got, name) == getattr(original, name), name
    assert got.importance == pytest.approx(0.73)
    assert got.decay_factor == pytest.approx(0.42)
    for name in ("created_at", "last_accessed_at"):
        value = getattr(got, name)
        assert value.tzinfo is not None and value.utcoffset() is not None, f"{name} must be tz-aware"
        assert value == getattr(original, name), name
    assert got.embedding == pytest.approx(original.embedding, rel=1e-5, abs=1e-6)
    assert store.get_engram("missing") is None


def test_engram_without_embedding_reads_back_none(store):
    store.create_engram(engram("plain", "no vector here"))
    assert store.get_engram("plain").embedding is None


def test_get_engrams_keeps_the_asked_order_and_skips_missing(store):
    for eid in ("a", "b", "c"):
        store.create_engram(engram(eid))
    assert [e.id for e in store.get_engrams(["c", "nope", "a", "b"])] == ["c", "a", "b"]
    assert store.get_engrams([]) == []


def test_recall_rows_are_the_engrams_with_float32_vectors_and_their_cues(store):
    store.create_engram(engram("v", "with a vector", embedding=[0.5] * DIMS, importance=0.7))
    store.create_engram(engram("p", "no vector here"))
    store.link_cues("v", [Cue("Postgres", "technology"), Cue("billing")])
    rows = store.recall_rows(["p", "missing", "v"])
    assert [r.engram.id for r in rows] == ["p", "v"]
    plain, vectored = rows
    assert plain.vector is None and plain.cues == []
    assert vectored.vector.dtype == np.float32
    assert vectored.vector.tolist() == pytest.approx([0.5] * DIMS)
    assert vectored.engram.content == "with a vector" and vectored.engram.importance == pytest.approx(0.7)
    cues = sorted((c.name, c.cue_type) for c in vectored.cues)
    assert cues == [("billing", "keyword"), ("postgres", "technology")]
    assert store.recall_rows([]) == []


def test_update_engram_changes_fields_and_reports_missing(store):
    store.create_engram(engram("u1", importance=0.5))
    later = T0 + timedelta(days=3)
    assert store.update_engram(
        "u1", importance=0.9, access_count=3, last_accessed_at=later, cluster_id=4, tags="x,y", summary="s2"
    )
    got = store.get_engram("u1")
    assert (got.importance, got.access_count, got.cluster_id, got.tags, got.summary) == (
        pytest.approx(0.9),
        3,
        4,
        "x,y",
        "s2",
    )
    assert got.last_accessed_at == later
    assert store.update_engram("missing", importance=0.1) is False
    with pytest.raises(ValueError):
        store.update_engram("u1", embedding=[0.0] * DIMS)
    with pytest.raises(ValueError):
        store.update_engram("u1", summary=None)
    assert store.get_engram("u1").summary == "s2"


def test_update_engrams_batch_counts_only_existing(store):
    for eid in ("b1", "b2", "b3"):
        store.create_engram(engram(eid))
    changed = store.update_engrams(
        {
            "b1": {"decay_factor": 0.5},
            "b3": {"decay_factor": 0.25, "cluster_id": 2},
            "ghost": {"cluster_id": 1},
        }
    )
    assert changed == 2
    states = {s.id: s for s in store.engram_states()}
    assert states["b1"].decay_factor == pytest.approx(0.5)
    assert (states["b3"].decay_factor, states["b3"].cluster_id) == (pytest.approx(0.25), 2)
    assert states["b2"].decay_factor == pytest.approx(1.0)


def test_reinforce_increments_the_stored_values(store):
    store.create_engram(engram("r1", access_count=5, decay_factor=0.5))
    store.create_engram(engram("r2", decay_factor=0.95))
    store.create_engram(engram("r3"))
    later = T0 + timedelta(days=3)
    after = store.reinforce(["r1", "r2", "ghost", "r1"], later, 0.1)
    assert set(after) == {"r1", "r2"}
    assert after["r1"] == (6, pytest.approx(0.6))
    assert after["r2"] == (1, pytest.approx(1.0))  # clamped at 1
    got = {e.id: e for e in store.get_engrams(["r1", "r2", "r3"])}
    assert (got["r1"].access_count, got["r1"].last_accessed_at) == (6, later)
    assert got["r1"].decay_factor == pytest.approx(0.6)
    assert (got["r3"].access_count, got["r3"].last_accessed_at) == (0, T0)  # not asked: untouched
    # Values come from the store, not from what a caller read earlier: a second reinforce counts.
    assert store.reinforce(["r1"], later, 0.1)["r1"] == (7, pytest.approx(0.7))
    assert store.reinforce([], later, 0.1) == {}


def test_delete_engram_removes_it_and_its_edges(store):
    for eid in ("d1", "d2", "d3"):
        store.create_engram(engram(eid))
    cue = store.upsert_cue(Cue(name="topic"))
    store.link_cue("d1", cue.id)
    store.associate(Association("d1", "d2", 0.8))
    store.associate(Association("d3", "d1", 0.6))
    store.associate(Association("d2", "d3", 0.5))
    assert store.delete_engram("d1") is True
    assert store.get_engram("d1") is None
    assert [(a.source_id, a.target_id) for a in store.all_associations()] == [("d2", "d3")]
    assert store.engrams_by_cues(["topic"], 10) == []
    assert store.stats().cue_links == 0
    assert store.delete_engram("d1") is False


def test_list_recent_orders_by_access_then_creation_then_id(store):
    store.create_engram(engram("old", last_accessed_at=T0 - timedelta(days=2)))
    store.create_engram(engram("new", last_accessed_at=T0 + timedelta(hours=1), memory_type="semantic"))
    # Same last access: the newer creation first, then id.
    store.create_engram(engram("tie-b", created_at=T0 - timedelta(days=1)))
    store.create_engram(engram("tie-a", created_at=T0 - timedelta(days=1), memory_type="semantic"))
    store.create_engram(engram("tie-new", created_at=T0))
    assert [e.id for e in store.list_recent(10)] == ["new", "tie-new", "tie-a", "tie-b", "old"]
    assert [e.id for e in store.list_recent(2)] == ["new", "tie-new"]
    assert [e.id for e in store.list_recent(10, memory_type="semantic")] == ["new", "tie-a"]
    assert store.list_recent(10, memory_type="procedural") == []


def test_uncued_engram_ids_lists_engrams_without_cue_links(store):
    for engram_id in ("c", "a", "b"):
        store.create_engram(Engram(id=engram_id, content=f"memory {engram_id}"))
    store.link_cues("b", [Cue("linked")])
    assert store.uncued_engram_ids() == ["a", "c"]
    store.link_cues("a", [Cue("linked"), Cue("other")])
    assert store.uncued_engram_ids() == ["c"]


def test_superseded_by_is_kept_found_and_cleared_when_the_newer_is_forgotten(store):
    store.create_engram(embedded("old", "Alice prefers pgvector"))
    store.create_engram(embedded("older", "Alice prefers FAISS"))
    store.create_engram(embedded("new", "Alice now prefers Qdrant"))
    assert store.get_engram("old").superseded_by == ""
    assert store.update_engrams({"old": {"superseded_by": "new"}, "older": {"superseded_by": "new"}}) == 2
    assert store.get_engram("old").superseded_by == "new"
    assert store.superseded_ids("new") == ["old", "older"]
    assert store.superseded_ids("old") == []
    rows = {row.engram.id: row.engram.superseded_by for row in store.recall_rows(["old", "new"])}
    assert rows == {"old": "new", "new": ""}
    exported = {r["id"]: r["superseded_by"] for r in store.export_records() if r["kind"] == "engram"}
    assert exported["old"] == "new"

    assert store.delete_engram("new")
    assert store.get_engram("old").superseded_by == "" and store.get_engram("older").superseded_by == ""
    assert store.superseded_ids("new") == []


def test_count_engrams_follows_creates_and_deletes(store):
    assert store.count_engrams() == 0
    store.create_engrams([engram("n1"), engram("n2"), engram("n3")])
    store.create_engram(engram("n4"))
    assert store.count_engrams() == 4
    assert store.delete_engram("n2") and not store.delete_engram("n2")
    assert store.count_engrams() == 3


def test_remove_engram_takes_its_edges_and_facts_and_leaves_the_rest_to_delete_engram(store):
    for eid in ("gone", "kept"):
        store.create_engram(engram(eid, embedding=vec(len(eid))))
    store.link_cues("gone", [Cue("ledger")])
    store.add_relations([Relation("ledger", "feeds", "reports", engram_id="gone", created_at=T0)])
    store.associate(Association("gone", "kept", 0.5))
    assert store.remove_engram("gone") is True
    assert store.get_engram("gone") is None and store.neighbours(["kept"]) == []
    assert store.relations_of(["gone"]) == [] and store.cues_of(["gone"]).get("gone", []) == []
    assert [h.id for h in store.vector_search(vec(4), 5)] == ["kept"]
    # The cues it alone encoded are delete_engram's to take back (StoreBase), not remove_engram's.
    stats = store.stats()
    assert (stats.engrams, stats.cue_links, stats.associations) == (1, 0, 0)
    assert {r["name"] for r in store.export_records() if r["kind"] == "cue"} >= {"ledger"}
    assert store.remove_engram("gone") is False


def test_latest_of_source_is_newest_first_where_the_store_answers(store):
    for i, source in enumerate(("chat:1", "chat:1", "other", "chat:1")):
        store.create_engram(engram(f"s{i}", source=source, created_at=T0 + timedelta(minutes=i)))
    try:
        latest = store.latest_of_source("chat:1", 2)
    except NotImplementedError:  # only a shared store must answer (the pipeline asks no other)
        assert not store.capabilities.shared
        return
    assert latest == ["s3", "s1"]
    assert store.latest_of_source("nobody", 5) == []
