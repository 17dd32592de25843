"""The clusters part on every backend (see conftest.BACKENDS): the bulk reads of consolidation
(engram states, association weights) and the cluster ids a new memory inherits from."""

from __future__ import annotations

import pytest

from smriti.stores.base import Association
from tests.stores.conformance.data import T0, engram

pytestmark = pytest.mark.clusters


def test_cluster_ids_reads_only_existing_engrams(store):
    store.create_engram(engram("a", cluster_id=3))
    store.create_engram(engram("b"))
    for eid in ("c", "d", "e", "f"):  # more ids than Kuzu's per-id lookups: the IN query
        store.create_engram(engram(eid, cluster_id=ord(eid)))
    assert store.cluster_ids(["a", "b", "missing"]) == {"a": 3, "b": -1}
    expected = {"c": 99, "d": 100, "e": 101, "f": 102, "a": 3}
    assert store.cluster_ids(["f", "e", "d", "c", "a", "a"]) == expected
    assert store.cluster_ids([]) == {}


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


def test_association_weights_are_every_association_s_strength(store):
    for eid in ("a", "b", "c"):
        store.create_engram(engram(eid))
    store.associate_many(
        [Association("a", "b", 0.7), Association("c", "a", 0.25), Association("b", "c", 0.5)]
    )
    expected = sorted((a.source_id, a.target_id, a.strength) for a in store.all_associations())
    weights = sorted(store.association_weights())
    assert (
        [(s, t) for s, t, _ in weights]
        == [(s, t) for s, t, _ in expected]
        == [
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
        ]
    )
    assert [w for _, _, w in weights] == pytest.approx([0.7, 0.5, 0.25])
    store.delete_engram("c")
    assert sorted((s, t) for s, t, _ in store.association_weights()) == [("a", "b")]
