"""The analysis queue and supersession on every backend (see conftest.BACKENDS): the metadata
listing the queue is kept in, taking back a memory's links before a new analysis is linked,
and ``superseded_by`` kept, found and cleared by forget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from smriti.nodes.link import write_links
from smriti.stores.base import ANALYSIS_QUEUE_PREFIX, Engram
from smriti.stores.queue import AnalysisQueue

DIMS = 16
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def _engram(eid: str, content: str, **fields) -> Engram:
    vector = np.random.default_rng(sum(map(ord, eid))).normal(size=DIMS).tolist()
    return Engram(id=eid, content=content, created_at=T0, last_accessed_at=T0, embedding=vector, **fields)


def test_meta_items_lists_by_literal_prefix_and_delete_meta_removes(store):
    store.set_meta("analysis-queue/a", "1")
    store.set_meta("analysis-queue/b_2", "2")
    store.set_meta("analysis-queueX", "no")  # shares the prefix minus the slash
    store.set_meta("other", "x")
    assert store.meta_items("analysis-queue/") == {"analysis-queue/a": "1", "analysis-queue/b_2": "2"}
    assert store.meta_items("analysis-queue/b_") == {"analysis-queue/b_2": "2"}
    store.delete_meta("analysis-queue/a")
    store.delete_meta("never-set")  # a no-op
    assert store.get_meta("analysis-queue/a") is None
    assert list(store.meta_items("analysis-queue/")) == ["analysis-queue/b_2"]


def test_the_queue_keeps_jobs_until_finished_and_parks_after_max_attempts(store):
    store.create_engram(_engram("e1", "first"))
    store.create_engram(_engram("e2", "second"))
    queue = AnalysisQueue(store)
    queue.enqueue("e1", T0)
    queue.enqueue("e2", T0 + timedelta(seconds=1))
    assert [job.engram_id for job in queue.pending()] == ["e1", "e2"]
    assert queue.next_due(T0).engram_id == "e1"

    job = queue.fail(queue.get("e1"), "Timeout: no answer", T0 + timedelta(seconds=60), max_attempts=2)
    assert (job.status, job.attempts) == ("pending", 1)
    assert queue.next_due(T0 + timedelta(seconds=2)).engram_id == "e2"  # e1 waits out its backoff
    parked = queue.fail(job, "Timeout: again", T0 + timedelta(seconds=120), max_attempts=2)
    assert parked.status == "failed"
    summary = queue.summary()
    assert (summary["pending"], summary["failed"]) == (1, 1)
    assert summary["failed_memories"] == [{"id": "e1", "attempts": 2, "error": "Timeout: again"}]

    queue.finish("e2")
    assert queue.next_due(T0 + timedelta(days=1)) is None
    assert queue.retry_failed(T0) == 1 and queue.get("e1").attempts == 0
    # forget drops the job of the forgotten memory
    assert store.delete_engram("e1")
    assert store.meta_items(ANALYSIS_QUEUE_PREFIX) == {}


def test_take_back_links_then_relinking_leaves_no_trace_of_the_first_analysis(store):
    store.create_engram(_engram("e1", "Alice prefers pgvector"))
    store.create_engram(_engram("e2", "Bob shares the cue pgvector"))
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


def test_superseded_by_is_kept_found_and_cleared_when_the_newer_is_forgotten(store):
    store.create_engram(_engram("old", "Alice prefers pgvector"))
    store.create_engram(_engram("older", "Alice prefers FAISS"))
    store.create_engram(_engram("new", "Alice now prefers Qdrant"))
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
