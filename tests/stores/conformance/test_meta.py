"""The metadata part on every backend (see conftest.BACKENDS): key/value metadata and the LLM
analysis queue kept in it."""

from __future__ import annotations

from datetime import timedelta

import pytest

from smriti.stores.base import ANALYSIS_QUEUE_PREFIX
from smriti.stores.queue import AnalysisQueue
from tests.stores.conformance.data import T0, embedded

pytestmark = pytest.mark.meta


def test_meta_get_and_set(store):
    assert store.get_meta("embedding_model") is None
    store.set_meta("embedding_model", "test-model")
    store.set_meta("embedding_model", "other-model")
    store.set_meta("embedding_dims", "16")
    assert store.get_meta("embedding_model") == "other-model"
    assert store.get_meta("embedding_dims") == "16"


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
    store.create_engram(embedded("e1", "first"))
    store.create_engram(embedded("e2", "second"))
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
