"""Recall's reinforcement never waits behind another writer, and is never lost for it."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest

from smriti.nodes.reinforcement import Reinforcer
from smriti.pipelines.recall import build_recall_graph
from smriti.pipelines.store import build_store_graph

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


@pytest.fixture
def context(make_context):
    context = make_context()
    graph = build_store_graph()
    for text in ("Alice plans the Lisbon trip", "Bob repairs the Lisbon tram", "Carol bakes bread"):
        graph.invoke({"content": text}, context=context)
    return context


def _recall(context, query: str) -> list[dict]:
    output = build_recall_graph().invoke({"query": query, "limit": 5, "mode": "search"}, context=context)
    return output["result"]["results"]


def test_a_free_lock_writes_at_once(context):
    ids = [r["id"] for r in _recall(context, "Lisbon")]
    assert ids
    for engram_id in ids:
        assert context.store.get_engram(engram_id).access_count == 1
    assert context.reinforcer.pending() == 0


def test_a_held_lock_queues_without_waiting_and_writes_when_released(context):
    held, release = threading.Event(), threading.Event()

    def writer() -> None:  # another writer (a store, a consolidation chunk) holds the lock
        with context.write_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    held.wait(5)
    try:
        results = _recall(context, "Lisbon")  # returns although the lock is held
        ids = [r["id"] for r in results]
        assert ids and context.reinforcer.pending() == 1
        # what it shows is what will be written
        assert all(r["metadata"]["access_count"] == 1 for r in results)
        assert all(context.store.get_engram(i).access_count == 0 for i in ids)
    finally:
        release.set()
        thread.join(5)
    deadline = threading.Event()
    for _ in range(100):
        if all(context.store.get_engram(i).access_count == 1 for i in ids):
            break
        deadline.wait(0.05)
    assert [context.store.get_engram(i).access_count for i in ids] == [1] * len(ids)
    assert context.reinforcer.pending() == 0


def test_close_writes_what_is_queued(make_context):
    context = make_context()
    build_store_graph().invoke({"content": "Dana sails to Porto"}, context=context)
    [engram_id] = [s.id for s in context.store.engram_states()]
    reinforcer = Reinforcer(context.store, context.write_lock, 0.1)
    with context.write_lock:
        other = threading.Thread(target=lambda: reinforcer.reinforce([engram_id], NOW))
        other.start()
        other.join(5)
        assert reinforcer.pending() == 1
        before_close = context.store.get_engram(engram_id).access_count
    reinforcer.close()
    assert before_close == 0
    assert context.store.get_engram(engram_id).access_count == 1


def test_the_queue_is_bounded(make_context, monkeypatch):
    import smriti.nodes.reinforcement as module

    monkeypatch.setattr(module, "MAX_PENDING", 3)
    context = make_context()
    reinforcer = Reinforcer(context.store, context.write_lock, 0.1)
    with context.write_lock:
        for k in range(5):
            t = threading.Thread(target=lambda k=k: reinforcer.reinforce([f"id-{k}"], NOW))
            t.start()
            t.join(5)
        assert reinforcer.pending() == 3 and reinforcer.dropped == 2
    reinforcer.close()
