"""GraphStore's own methods on every backend (see conftest.BACKENDS): stats and transactions.
(The ``exclusive`` lock: tests/stores/test_leases.py; a failed write batch leaving nothing:
tests/test_atomic_store.py and test_falkordb_atomic_store.py, Kuzu's writes commit one by one.)"""

from __future__ import annotations

import pytest

from smriti.stores.base import Association, Cue
from tests.stores.conformance.data import T0, engram, vec

pytestmark = pytest.mark.lifecycle


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


def _write_one_memory(store) -> None:
    """What a store writes for one memory, in the store pipeline's order (nodes/link.py)."""
    store.create_engram(engram("b1", embedding=vec(1)))
    store.create_engram(engram("b2", embedding=vec(2)))
    store.link_cues("b1", [Cue("billing"), Cue("postgres", "technology")])
    store.add_cooccurrences([("billing", "postgres", 1.0)])
    store.associate_many([Association("b1", "b2", 0.6, created_at=T0)])


def test_a_write_batch_commits_its_writes_together(store):
    with store.write_batch():
        _write_one_memory(store)
    assert [e.id for e in store.get_engrams(["b1", "b2"])] == ["b1", "b2"]
    assert sorted(c.name for c in store.cues_of(["b1"])["b1"]) == ["billing", "postgres"]
    assert [(a.source_id, a.target_id) for a in store.all_associations()] == [("b1", "b2")]


def test_nested_transactions_join_the_outer_one(store):
    with store.transaction():
        store.create_engram(engram("t1"))
        with store.transaction():
            store.create_engram(engram("t2"))
        store.update_engrams({"t1": {"importance": 0.9}})
    assert [e.id for e in store.get_engrams(["t1", "t2"])] == ["t1", "t2"]
    assert store.get_engram("t1").importance == pytest.approx(0.9)
