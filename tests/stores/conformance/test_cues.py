"""The cues part on every backend (see conftest.BACKENDS): cues by normalised name, their EncodedBy
links, CoOccurs strengths and RelatesTo facts, typed, taken back and cleaned up."""

from __future__ import annotations

from datetime import timedelta

import pytest

from smriti.nodes.link import write_links
from smriti.stores.base import MAX_CUE_NAME, Association, Cue, Engram, Relation
from tests.stores.conformance.data import T0, embedded, engram

pytestmark = pytest.mark.cues


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


def test_cue_types_are_replaced_by_name_and_read_back_everywhere(store):
    from smriti.stores.base import Engram

    store.create_engram(Engram(id="e1", content="the database engineer recommends cursors"))
    [cue] = store.link_cues("e1", [Cue(name="Database Engineer", cue_type="technology")])
    store.cues_of(["e1"])  # a backend caching cues must not keep the old type
    store.set_cue_types({"database engineer": "agent", "no such cue": "person", "cursor": ""})
    [after] = store.cues_of(["e1"])["e1"]
    assert (after.id, after.name, after.cue_type) == (cue.id, cue.name, "agent")
    assert [c.cue_type for c in store.upsert_cues([Cue(name="database-engineer")])] == ["agent"]
    assert store.cue_engram_counts(["no such cue"]) == {}  # an unknown name creates nothing
    [row] = store.recall_rows(["e1"])
    assert [(c.name, c.cue_type) for c in row.cues] == [(cue.name, "agent")]


def test_weaken_cooccurrences_never_creates_and_removes_spent_edges(store):
    store.add_cooccurrence("a", "b", 2.0)
    store.weaken_cooccurrences([("b", "a", 1.0), ("a", "zzz", 1.0), ("x", "y", 1.0)])
    records = [r for r in store.export_records() if r["kind"] == "co_occurs"]
    assert [(r["source"], r["target"], r["strength"]) for r in records] == [("a", "b", pytest.approx(1.0))]
    assert {r["name"] for r in store.export_records() if r["kind"] == "cue"} == {"a", "b"}
    store.weaken_cooccurrences([("a", "b", 1.0)])
    assert [r for r in store.export_records() if r["kind"] == "co_occurs"] == []


def test_delete_orphan_cues_by_name_touches_only_those(store):
    store.create_engram(Engram(id="k", content="kept", created_at=T0, last_accessed_at=T0))
    store.link_cues("k", [Cue("kept")])
    store.upsert_cues([Cue("lonely"), Cue("other-lonely")])
    assert store.delete_orphan_cues(["Lonely", "kept", "never-existed"]) == 1
    assert {r["name"] for r in store.export_records() if r["kind"] == "cue"} == {"kept", "other-lonely"}


def test_take_back_links_then_relinking_leaves_no_trace_of_the_first_analysis(store):
    store.create_engram(embedded("e1", "Alice prefers pgvector"))
    store.create_engram(embedded("e2", "Bob shares the cue pgvector"))
    first = {
        "cues": [{"name": "Alice", "type": "person"}, {"name": "pgvector", "type": "keyword"}],
        "relations": [{"source": "alice", "relation": "prefers", "target": "pgvector"}],
    }
    write_links(store, "e1", first, "")
    write_links(store, "e2", {"cues": [{"name": "pgvector", "type": "keyword"}], "relations": []}, "")

    store.take_back_links("e1")
    assert store.cues_of(["e1"])["e1"] == []
    assert store.relations_of(["e1"]) == []
    assert store.cue_engram_counts(["alice", "pgvector"]) == {"pgvector": 1}  # alice was e1's alone
    assert [c.name for c in store.cues_of(["e2"])["e2"]] == ["pgvector"]  # e2 keeps its cue

    second = {
        "cues": [{"name": "Alice", "type": "person"}, {"name": "Qdrant", "type": "technology"}],
        "relations": [{"source": "alice", "relation": "prefers", "target": "qdrant"}],
    }
    for _ in range(2):  # an analysis landing twice (a kill -9 between landing and finishing)
        store.take_back_links("e1")
        write_links(store, "e1", second, "")
    assert sorted(c.name for c in store.cues_of(["e1"])["e1"]) == ["alice", "qdrant"]
    assert [(r.source, r.relation, r.target) for r in store.relations_of(["e1"])] == [
        ("alice", "prefers", "qdrant")
    ]
    pairs = {
        tuple(sorted((r["source"], r["target"]))): r["strength"]
        for r in store.export_records()
        if r["kind"] == "co_occurs"
    }
    assert pairs == {("alice", "qdrant"): 1.0}  # the first analysis' pair is gone, none doubled


def test_link_many_links_each_engram_as_link_cue_ids_does(store):
    for eid in ("m1", "m2", "m3"):
        store.create_engram(engram(eid))
    alpha, beta = store.upsert_cues([Cue("alpha"), Cue("beta")])
    store.link_cue_ids("m1", [alpha.id, alpha.id, "no-such-cue"])  # idempotent; a missing end: no-op
    store.link_many({"m2": [alpha.id, beta.id], "m3": [beta.id], "ghost": [alpha.id]})
    cues = store.cues_of(["m1", "m2", "m3"])
    assert {eid: sorted(c.name for c in found) for eid, found in cues.items()} == {
        "m1": ["alpha"],
        "m2": ["alpha", "beta"],
        "m3": ["beta"],
    }
    assert store.cue_engram_counts(["alpha", "beta"]) == {"alpha": 2, "beta": 2}
    store.link_many({})


def test_unlink_engram_keeps_the_engram_its_associations_and_others_links(store):
    for eid in ("u1", "u2"):
        store.create_engram(engram(eid))
    store.link_cues("u1", [Cue("shared"), Cue("own")])
    store.link_cues("u2", [Cue("shared")])
    store.add_relations([Relation("own", "is", "shared", engram_id="u1", created_at=T0)])
    store.associate(Association("u1", "u2", 0.5))
    store.unlink_engram("u1")
    assert store.cues_of(["u1"]).get("u1", []) == [] and store.relations_of(["u1"]) == []
    assert [c.name for c in store.cues_of(["u2"])["u2"]] == ["shared"]
    assert store.get_engram("u1") is not None and len(store.neighbours(["u1"])) == 1
