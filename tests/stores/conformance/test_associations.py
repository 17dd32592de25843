"""The associations part on every backend (see conftest.BACKENDS): symmetric AssociatedWith edges
that keep the strongest weight."""

from __future__ import annotations

import pytest

from smriti.stores.base import Association
from tests.stores.conformance.data import T0, engram

pytestmark = pytest.mark.associations


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
