"""Every GraphStore behaviour, run against every backend (see conftest.BACKENDS)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from smriti.stores.base import MAX_CUE_NAME, Association, Cue, Engram, Relation
from smriti.stores.records import LOCAL_META_KEYS, import_into

DIMS = 16  # conftest.DIMS: the backend fixture opens stores with EMBEDDING_DIMS=16
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def vec(seed: int) -> list[float]:
    """A deterministic random DIMS-dimensional vector."""
    return np.random.default_rng(seed).normal(size=DIMS).round(6).tolist()


def engram(eid: str, content: str = "", **fields) -> Engram:
    fields.setdefault("created_at", T0)
    fields.setdefault("last_accessed_at", T0)
    return Engram(id=eid, content=content or f"memory {eid}", **fields)


def numpy_ranking(query: list[float], vectors: dict[str, list[float]], k: int) -> list[str]:
    """Expected vector_search order: cosine descending, ties by id."""
    q = np.asarray(query)
    scores = {
        i: round(float(np.dot(v, q) / (np.linalg.norm(v) * np.linalg.norm(q))), 6) for i, v in vectors.items()
    }
    return sorted(scores, key=lambda i: (-scores[i], i))[:k]


# -- engrams ----------------------------------------------------------------------------------
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


def test_cluster_ids_reads_only_existing_engrams(store):
    store.create_engram(engram("a", cluster_id=3))
    store.create_engram(engram("b"))
    for eid in ("c", "d", "e", "f"):  # more ids than Kuzu's per-id lookups: the IN query
        store.create_engram(engram(eid, cluster_id=ord(eid)))
    assert store.cluster_ids(["a", "b", "missing"]) == {"a": 3, "b": -1}
    expected = {"c": 99, "d": 100, "e": 101, "f": 102, "a": 3}
    assert store.cluster_ids(["f", "e", "d", "c", "a", "a"]) == expected
    assert store.cluster_ids([]) == {}


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


def test_engram_states_and_count(store):
    store.create_engram(engram("s1", importance=0.2, access_count=1, cluster_id=3))
    store.create_engram(engram("s2"))
    assert store.count_engrams() == 2
    states = {s.id: s for s in store.engram_states()}
    assert set(states) == {"s1", "s2"}
    assert (states["s1"].importance, states["s1"].access_count, states["s1"].cluster_id) == (
        pytest.approx(0.2),
        1,
        3,
    )
    assert states["s1"].created_at == T0 and states["s1"].created_at.tzinfo is not None
    # Some ids only (consolidation re-reads in chunks): the existing ones, by id.
    assert [s.id for s in store.engram_states(["s2", "missing", "s1"])] == ["s1", "s2"]
    assert store.engram_states([]) == []


# -- cues -------------------------------------------------------------------------------------
def test_upsert_cue_is_unique_by_normalised_name(store):
    first = store.upsert_cue(Cue(name="Machine Learning", cue_type="concept"))
    again = store.upsert_cue(Cue(name="  machine   learning ", cue_type="technology"))
    assert first.name == "machine-learning"
    assert again.id == first.id and again.cue_type == "concept"
    assert store.stats().cues == 1


def test_cue_names_and_relations_lose_control_characters_and_are_bounded(store):
    # FalkorDB 4.22 segfaulted on these in its unique-constraint check; every backend now
    # stores the same cleaned, bounded name, so exports move between backends.
    nul = store.upsert_cue(Cue(name="release\x00notes\x01v2"))
    long = store.upsert_cue(Cue(name="x" * 5_000))
    assert nul.name == "release-notes-v2"
    assert long.name == "x" * MAX_CUE_NAME
    store.add_relation(Relation("al\x01ice", "wro\x00te", "notes\x7f"))
    (relation,) = store.relations_of([""])  # recorded without an engram
    assert (relation.source, relation.relation, relation.target) == ("al-ice", "wro te", "notes")
    assert store.upsert_cue(Cue(name="x" * 6_000)).id == long.id  # the same cue once cut


def test_link_cues_of_and_engrams_by_cues_ranking(store):
    for eid in ("e3", "e1", "e2"):
        store.create_engram(engram(eid))
    python = store.upsert_cue(Cue(name="python", cue_type="technology"))
    db = store.upsert_cue(Cue(name="database"))
    store.link_cue("e1", python.id)
    store.link_cue("e1", db.id)
    store.link_cue("e1", db.id)  # idempotent
    store.link_cue("e2", python.id)
    store.link_cue("e3", db.id)
    assert store.stats().cue_links == 4
    cues = store.cues_of(["e1", "e2"])
    assert sorted(c.name for c in cues["e1"]) == ["database", "python"]
    assert [c.name for c in cues["e2"]] == ["python"]
    assert cues["e2"][0].id == python.id and cues["e2"][0].cue_type == "technology"
    hits = store.engrams_by_cues(["Python", "database", "unknown"], 10)
    assert [h.engram_id for h in hits] == ["e1", "e2", "e3"]  # most cues first, then time, content
    assert set(hits[0].cues) == {"python", "database"}
    # A limit inside a tie of one cue each: the tied engrams by creation time, then content (the
    # same in every build of the same memory; ids are random).
    assert [h.engram_id for h in store.engrams_by_cues(["database"], 1)] == ["e1"]
    assert [h.engram_id for h in store.engrams_by_cues(["python"], 1)] == ["e1"]
    assert hits[1].cues == ("python",)
    assert [h.engram_id for h in store.engrams_by_cues(["python", "database"], 2)] == ["e1", "e2"]
    assert store.engrams_by_cues(["unknown"], 10) == []


def test_cue_engram_counts(store):
    for eid in ("c1", "c2"):
        store.create_engram(engram(eid))
    shared = store.upsert_cue(Cue(name="shared"))
    single = store.upsert_cue(Cue(name="single"))
    store.upsert_cue(Cue(name="lonely"))
    for eid in ("c1", "c2"):
        store.link_cue(eid, shared.id)
    store.link_cue("c1", single.id)
    counts = store.cue_engram_counts(["shared", "single", "absent"])
    assert counts["shared"] == 2 and counts["single"] == 1
    assert "absent" not in counts
    assert store.cue_engram_counts(["lonely"]).get("lonely", 0) == 0


def _co_occurs(store) -> dict[tuple[str, str], float]:
    return {
        (r["source"], r["target"]): r["strength"] for r in store.export_records() if r["kind"] == "co_occurs"
    }


def test_cooccurrence_is_symmetric_adds_and_replaces(store):
    store.upsert_cue(Cue(name="a"))
    store.upsert_cue(Cue(name="b"))
    store.add_cooccurrence("a", "b")
    store.add_cooccurrence("B", "a", 2.5)  # the other way round strengthens the same edge
    assert _co_occurs(store) == {("a", "b"): pytest.approx(3.5)}
    store.add_cooccurrence("a", "b", 0.5, replace=True)
    assert _co_occurs(store) == {("a", "b"): pytest.approx(0.5)}
    store.add_cooccurrence("a", "A")  # a cue with itself is ignored
    assert len(_co_occurs(store)) == 1


def test_edges_between_cue_names_create_missing_cues(store):
    store.add_cooccurrence("New Topic", "fresh")
    store.add_relation(Relation("alice", "prefers", "New Topic", engram_id="e9", created_at=T0))
    cues = {r["name"]: r for r in store.export_records() if r["kind"] == "cue"}
    assert set(cues) == {"new-topic", "fresh", "alice"}
    assert {c["cue_type"] for c in cues.values()} == {"keyword"}
    assert [(r.source, r.target) for r in store.relations_of(["e9"])] == [("alice", "new-topic")]
    with pytest.raises(ValueError):
        store.add_relation(Relation("alice", "  ", "fresh"))
    with pytest.raises(ValueError):
        store.upsert_cue(Cue(name="   "))
    assert store.stats().cues == 3


def test_relations_of_engrams(store):
    store.upsert_cue(Cue(name="database-engineer", cue_type="person"))
    store.upsert_cue(Cue(name="cursor-pagination", cue_type="concept"))
    relation = Relation("database-engineer", "recommends", "cursor-pagination", engram_id="r1", created_at=T0)
    store.add_relation(relation)
    store.add_relation(relation)  # idempotent
    found = store.relations_of(["r1", "other"])
    assert len(found) == 1
    assert (found[0].source, found[0].relation, found[0].target, found[0].engram_id) == (
        "database-engineer",
        "recommends",
        "cursor-pagination",
        "r1",
    )
    assert found[0].created_at == T0
    assert store.relations_of(["other"]) == []
    earlier = Relation(
        "cursor-pagination", "needs", "database-engineer", engram_id="r2", created_at=T0 - timedelta(days=1)
    )
    store.add_relation(earlier)
    assert [r.engram_id for r in store.relations_of(["r1", "r2"])] == ["r2", "r1"]  # oldest first


def test_related_entities_follow_relations_either_way_newest_first(store):
    store.add_relation(Relation("database-engineer", "recommends", "cursor-pagination", "m1", T0))
    store.add_relation(
        Relation("Cursor Pagination", "relies_on", "opaque tokens", "m2", T0 + timedelta(hours=1))
    )
    store.add_relation(
        Relation("frontend-team", "dislikes", "cursor-pagination", "m3", T0 - timedelta(days=1))
    )
    store.add_relation(Relation("unrelated", "uses", "elsewhere", "m4", T0))
    found = store.related_entities(["cursor-pagination", "nobody"], 10)
    # Outgoing and incoming edges of the cue (names normalised), newest first.
    assert [(r.source, r.relation, r.target, r.engram_id) for r in found] == [
        ("cursor-pagination", "relies_on", "opaque-tokens", "m2"),
        ("database-engineer", "recommends", "cursor-pagination", "m1"),
        ("frontend-team", "dislikes", "cursor-pagination", "m3"),
    ]
    assert found[0].created_at == T0 + timedelta(hours=1)
    assert [r.engram_id for r in store.related_entities(["CURSOR-PAGINATION"], 2)] == ["m2", "m1"]
    assert store.related_entities(["nobody"], 10) == []
    assert store.related_entities([], 10) == []
    assert store.related_entities(["cursor-pagination"], 0) == []


def test_delete_orphan_cues_keeps_linked_ones(store):
    store.create_engram(engram("o1"))
    kept = store.upsert_cue(Cue(name="kept"))
    store.link_cue("o1", kept.id)
    store.upsert_cue(Cue(name="orphan-1"))
    store.upsert_cue(Cue(name="orphan-2"))
    assert store.delete_orphan_cues() == 2
    assert store.stats().cues == 1
    assert store.cue_engram_counts(["kept"]) == {"kept": 1}
    assert store.delete_orphan_cues() == 0


# -- associations -----------------------------------------------------------------------------
def test_associate_is_symmetric_and_keeps_the_strongest(store):
    for eid in ("x", "y"):
        store.create_engram(engram(eid))
    store.associate(Association("x", "y", 0.4, relation_type="similar", created_at=T0))
    store.associate(Association("y", "x", 0.9, relation_type="session"))
    store.associate(Association("x", "y", 0.5))
    store.associate(Association("x", "x", 1.0))  # self-association ignored
    store.associate(Association("x", "ghost", 1.0))  # missing engram ignored
    [edge] = store.all_associations()
    assert (edge.source_id, edge.target_id, edge.relation_type) == ("x", "y", "similar")
    assert edge.strength == pytest.approx(0.9)
    assert edge.created_at == T0


def test_neighbours_in_both_directions(store):
    for eid in ("a", "b", "c", "d"):
        store.create_engram(engram(eid))
    store.associate(Association("a", "b", 0.7))
    store.associate(Association("c", "a", 0.6))
    store.associate(Association("b", "c", 0.5))
    store.associate(Association("c", "d", 0.4))
    assert {(n.source_id, n.target_id) for n in store.neighbours(["a"])} == {("a", "b"), ("c", "a")}
    assert {(n.source_id, n.target_id) for n in store.neighbours(["a", "d"])} == {
        ("a", "b"),
        ("c", "a"),
        ("c", "d"),
    }
    assert store.neighbours([]) == []
    assert [(n.source_id, n.target_id) for n in store.all_associations()] == [
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
    ]


# -- batch forms --------------------------------------------------------------------------------
def test_link_cues_upserts_links_and_is_idempotent(store):
    store.create_engram(engram("b1"))
    store.create_engram(engram("b2"))
    old = store.upsert_cue(Cue(name="python", cue_type="technology"))
    stored = store.link_cues(
        "b1",
        [Cue(name="Python", cue_type="keyword"), Cue(name="New Cue", cue_type="concept"), Cue(name="python")],
    )
    assert [(c.name, c.cue_type) for c in stored] == [("python", "technology"), ("new-cue", "concept")]
    assert stored[0].id == old.id
    again = store.link_cues("b1", [Cue(name="new cue"), Cue(name="python")])
    assert [c.id for c in again] == [stored[1].id, old.id]
    assert store.link_cues("b2", [Cue(name="python")])[0].id == old.id
    store.link_cue("b2", old.id)  # the single form agrees with the batch
    assert store.stats().cue_links == 3 and store.stats().cues == 2
    assert sorted(c.name for c in store.cues_of(["b1"])["b1"]) == ["new-cue", "python"]
    assert [c.name for c in store.link_cues("ghost", [Cue(name="orphan")])] == ["orphan"]  # cue, no edge
    assert store.stats().cue_links == 3 and store.stats().cues == 3
    assert store.link_cues("b1", []) == []
    with pytest.raises(ValueError):
        store.link_cues("b1", [Cue(name="fine"), Cue(name="   ")])
    assert store.stats().cues == 3  # nothing written


def test_link_cues_on_a_reopened_engram_skips_existing_edges(store):
    store.create_engram(engram("r1"))
    first = store.upsert_cue(Cue(name="alpha"))
    store.link_cue("r1", first.id)
    store.link_cues("r1", [Cue(name="alpha"), Cue(name="beta")])
    store.link_cues("r1", [Cue(name="alpha"), Cue(name="beta")])
    assert store.stats().cue_links == 2


def test_add_cooccurrences_matches_the_single_form(store):
    store.add_cooccurrence("b", "a", 1.0)
    store.add_cooccurrences(
        [("a", "b", 2.0), ("A", "c", 1.0), ("c", "a", 0.5), ("d", "D", 9.0), ("c", "d", 1.0)]
    )
    assert _co_occurs(store) == {
        ("b", "a"): pytest.approx(3.0),
        ("a", "c"): pytest.approx(1.5),
        ("c", "d"): pytest.approx(1.0),
    }
    cues = {r["name"]: r["cue_type"] for r in store.export_records() if r["kind"] == "cue"}
    assert cues == dict.fromkeys("abcd", "keyword")
    store.add_cooccurrences([])
    with pytest.raises(ValueError):
        store.add_cooccurrences([("a", " ", 1.0)])


def test_add_relations_is_idempotent_and_types_created_cues(store):
    store.upsert_cue(Cue(name="alice", cue_type="person"))
    relations = [
        Relation("Alice", "prefers", "Dark Mode", engram_id="x1", created_at=T0),
        Relation("alice", "prefers", "dark-mode", engram_id="x1", created_at=T0),  # the same fact
        Relation("dark mode", "needs", "contrast", engram_id="x2", created_at=T0 + timedelta(hours=1)),
    ]
    store.add_relations(relations, cue_type="concept")
    store.add_relations(relations[:1], cue_type="concept")
    store.add_relation(relations[0])
    found = store.relations_of(["x1", "x2"])
    assert [(r.source, r.relation, r.target, r.engram_id) for r in found] == [
        ("alice", "prefers", "dark-mode", "x1"),
        ("dark-mode", "needs", "contrast", "x2"),
    ]
    assert found[0].created_at == T0
    cues = {r["name"]: r["cue_type"] for r in store.export_records() if r["kind"] == "cue"}
    assert cues == {"alice": "person", "dark-mode": "concept", "contrast": "concept"}
    with pytest.raises(ValueError):
        store.add_relations([Relation("a", "rel", "b"), Relation("a", " ", "b")])
    assert len(store.relations_of(["", "x1", "x2"])) == 2


def test_add_relations_for_a_new_engram(store):
    store.create_engram(engram("n1"))
    relation = Relation("team", "uses", "kuzu", engram_id="n1", created_at=T0)
    store.add_relations([relation])
    store.add_relations([relation])
    store.add_relation(relation)
    assert len(store.relations_of(["n1"])) == 1


def test_associate_many_matches_the_single_form(store):
    for eid in ("p", "q", "r", "s"):
        store.create_engram(engram(eid))
    store.associate(Association("q", "p", 0.5, relation_type="similar", created_at=T0))
    store.associate_many(
        [
            Association("p", "q", 0.8, relation_type="session"),  # strengthens q->p
            Association("p", "r", 0.3, relation_type="similar", created_at=T0),
            Association("r", "p", 0.6, relation_type="session"),  # same pair: max strength, first type
            Association("p", "p", 1.0),
            Association("p", "ghost", 1.0),
            Association("s", "q", 0.2, relation_type="same_source", created_at=T0),
        ]
    )
    store.associate_many([Association("q", "s", 0.1)])  # weaker: unchanged
    edges = {(a.source_id, a.target_id): (a.strength, a.relation_type) for a in store.all_associations()}
    assert edges == {
        ("q", "p"): (pytest.approx(0.8), "similar"),
        ("p", "r"): (pytest.approx(0.6), "similar"),
        ("s", "q"): (pytest.approx(0.2), "same_source"),
    }
    assert {(n.source_id, n.target_id) for n in store.neighbours(["p"])} == {("q", "p"), ("p", "r")}
    store.associate_many([])


# -- search -----------------------------------------------------------------------------------
@pytest.mark.parametrize("indexed", [False, True], ids=["brute-force", "indexed"])
def test_vector_search_matches_numpy_cosine_ranking(store, indexed):
    vectors = {f"v{i:02d}": vec(100 + i) for i in range(30)}
    types = {eid: ("semantic" if i % 3 == 0 else "episodic") for i, eid in enumerate(vectors)}
    for eid, vector in vectors.items():
        store.create_engram(engram(eid, embedding=vector, memory_type=types[eid]))
    store.create_engram(engram("no-vector"))
    state = store.ensure_indexes(10_000)
    assert not any(state.values()), "no index below the threshold"
    if indexed:
        store.ensure_indexes(0)
        if store.capabilities.vector_index:
            assert store.stats().vector_index
    query = vec(7)
    found = store.vector_search(query, 10)
    assert [h.id for h in found] == numpy_ranking(query, vectors, 10)
    for hit in found:
        v = np.asarray(vectors[hit.id])
        cosine = float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query)))
        assert hit.score == pytest.approx(cosine, abs=1e-4)  # raw cosine similarity, -1..1
    semantic = {i: v for i, v in vectors.items() if types[i] == "semantic"}
    filtered = store.vector_search(query, 4, memory_type="semantic")
    assert [h.id for h in filtered] == numpy_ranking(query, semantic, 4)


@pytest.mark.parametrize("indexed", [False, True], ids=["brute-force", "indexed"])
def test_vector_search_breaks_ties_by_id(store, indexed):
    target = vec(3)
    for eid in ("tie-c", "tie-a", "tie-b"):
        store.create_engram(engram(eid, embedding=target))
    store.create_engram(engram("other", embedding=vec(4)))
    if indexed:
        store.ensure_indexes(0)
    found = store.vector_search(target, 3)
    assert [h.id for h in found] == ["tie-a", "tie-b", "tie-c"]
    assert all(h.score == pytest.approx(1.0, abs=1e-5) for h in found)


@pytest.mark.parametrize("indexed", [False, True], ids=["scan", "indexed"])
def test_fulltext_finds_words_and_filters_by_type(store, indexed):
    store.create_engram(engram("f1", "The quick brown fox jumps"))
    store.create_engram(engram("f2", "A lazy dog sleeps all day", memory_type="semantic"))
    store.create_engram(engram("f3", "Quick thinking saves the day", memory_type="semantic"))
    store.create_engram(engram("f4", "Nothing to see here"))
    store.create_engram(engram("f5", "Untitled", summary="a zebra crossing"))
    if indexed:
        store.ensure_indexes(0)
    assert {h.id for h in store.fulltext_search("quick", 10)} == {"f1", "f3"}
    day = store.fulltext_search("day", 10, memory_type="semantic")
    assert {h.id for h in day} == {"f2", "f3"}
    assert [h.id for h in store.fulltext_search("quick", 10, memory_type="episodic")] == ["f1"]
    hits = store.fulltext_search("lazy dog", 10)
    assert hits and hits[0].id == "f2"
    assert all(0.0 < h.score <= 1.0 for h in hits)
    assert [h.id for h in store.fulltext_search("zebra", 10)] == ["f5"]  # summaries are searched too
    assert store.fulltext_search("giraffe", 10) == []


# -- metadata, stats, portability -------------------------------------------------------------
def test_meta_get_and_set(store):
    assert store.get_meta("embedding_model") is None
    store.set_meta("embedding_model", "test-model")
    store.set_meta("embedding_model", "other-model")
    store.set_meta("embedding_dims", "16")
    assert store.get_meta("embedding_model") == "other-model"
    assert store.get_meta("embedding_dims") == "16"


def test_stats_counts(store):
    for i, eid in enumerate(("s1", "s2", "s3")):
        store.create_engram(engram(eid, cluster_id=i % 2))
    store.create_engram(engram("s4"))  # no cluster
    cue = store.upsert_cue(Cue(name="topic"))
    store.upsert_cue(Cue(name="other"))
    store.link_cue("s1", cue.id)
    store.link_cue("s2", cue.id)
    store.associate(Association("s1", "s2", 0.5))
    stats = store.stats()
    assert (stats.engrams, stats.cues, stats.cue_links, stats.associations, stats.clusters) == (4, 2, 2, 1, 2)
    assert stats.backend == store.backend


def _populate(store) -> None:
    store.set_meta("embedding_model", "test-model")
    for i in range(4):
        store.create_engram(
            engram(f"p{i}", f"portable memory {i}", embedding=vec(200 + i), cluster_id=i % 2, tags="t")
        )
    python = store.upsert_cue(Cue(name="python", cue_type="technology", embedding=vec(300)))
    sql = store.upsert_cue(Cue(name="sql"))
    for eid in ("p0", "p1"):
        store.link_cue(eid, python.id)
    store.link_cue("p2", sql.id)
    store.associate(Association("p0", "p1", 0.8, created_at=T0))
    store.associate(Association("p2", "p0", 0.3, relation_type="session", created_at=T0))
    store.add_cooccurrence("python", "sql", 2.0)
    store.add_relation(Relation("python", "queries", "sql", engram_id="p2", created_at=T0))


def _comparable(records: list[dict]) -> list[tuple]:
    """Records as sortable tuples; embeddings compared separately (float32 storage)."""
    out = []
    for record in records:
        if record["kind"] == "meta" and record["key"] in LOCAL_META_KEYS:
            continue  # describes the physical store, not the memories
        item = dict(record)
        item.pop("embedding", None)
        for key in ("created_at", "last_accessed_at"):
            if key in item:
                item[key] = datetime.fromisoformat(item[key]).astimezone(UTC)
        if "strength" in item:
            item["strength"] = round(float(item["strength"]), 5)
        for key in ("importance", "decay_factor"):
            if key in item:
                item[key] = round(float(item[key]), 9)
        out.append(tuple(sorted(item.items())))
    return sorted(out, key=repr)


def _embeddings(records: list[dict]) -> dict[tuple[str, str], list[float] | None]:
    return {
        (r["kind"], r.get("id", "")): r.get("embedding") for r in records if r["kind"] in ("engram", "cue")
    }


def test_export_then_import_into_a_fresh_store_round_trips(backend):
    source = backend.open("alice")
    _populate(source)
    exported = list(source.export_records())
    kinds = [r["kind"] for r in exported]
    assert kinds == sorted(
        kinds, key=["meta", "engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to"].index
    )
    assert {"meta", "engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to"} <= set(kinds)
    target = backend.open("bob")
    assert import_into(target, exported) == len(exported)
    imported = list(target.export_records())
    assert _comparable(imported) == _comparable(exported)
    before, after = _embeddings(exported), _embeddings(imported)
    assert before.keys() == after.keys()
    for key, values in before.items():
        if values is None:
            assert after[key] is None
        else:
            assert after[key] == pytest.approx(values, rel=1e-5, abs=1e-6)
    # Importing the same file again changes nothing.
    stats = target.stats()
    import_into(target, exported)
    assert _comparable(list(target.export_records())) == _comparable(exported)
    again = target.stats()
    assert (again.engrams, again.cues, again.cue_links, again.associations) == (
        stats.engrams,
        stats.cues,
        stats.cue_links,
        stats.associations,
    )
