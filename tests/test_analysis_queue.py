"""The LLM analysis queue against the local OpenAI-compatible stub (real HTTP, real SQLite).

A store answers after the offline analysis whatever the model does; the model's analysis runs
from the queue: slow, hanging, failing, rate-limited (429 + Retry-After) and non-JSON
endpoints are retried with backoff and parked after ANALYSIS_MAX_ATTEMPTS, with the error in
stats. Only the model is scripted.
"""

from __future__ import annotations

import json
import time

import pytest

from smriti.errors import InvalidInput, NotFound, StoreError
from smriti.memory import Memory
from smriti.nodes.enrich import backoff, retry_after
from smriti.stores.queue import AnalysisQueue

from .openai_stub import OpenAIStub, Reply, queued_llm_settings

LLM_ANALYSIS = {
    "summary": "Priya moved the search service to pgvector",
    "memory_type": "semantic",
    "cues": [{"name": "Priya", "type": "person"}, {"name": "pgvector", "type": "technology"}],
    "relations": [{"source": "search-service", "relation": "runs on", "target": "pgvector"}],
}
CONTENT = "Priya moved the search service to pgvector last week"


def _answer(prompt: str) -> str:
    if "Query:" in prompt:  # recall's query parsing
        return json.dumps({"cues": [], "entity_hints": [], "intent": "fact"})
    return json.dumps(LLM_ANALYSIS)


def _settings(settings, stub: OpenAIStub, **extra):
    return queued_llm_settings(settings, stub, **extra)


def _cues(memory: Memory, engram_id: str) -> list[tuple[str, str]]:
    return sorted((c.name, c.cue_type) for c in memory.context.store.cues_of([engram_id])[engram_id])


def _chat_calls(stub: OpenAIStub) -> int:
    return sum(path.endswith("/chat/completions") for path in stub.paths())


def test_store_does_not_wait_for_a_slow_model_and_the_analysis_lands_later(settings):
    with (
        OpenAIStub(lambda p: Reply(_answer(p), delay=2.0), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        stored = memory.store(CONTENT, tags="search")
        assert _chat_calls(stub) == 0  # answered without asking the model (a condition, not a clock)
        assert stored["analysis_queued"] is True
        offline = _cues(memory, stored["id"])  # the heuristic's, until the model's lands
        assert ("priya", "person") in offline and ("service", "keyword") in offline
        assert memory.analysis_queue()["pending"] == 1

        report = memory.enrich()
        assert report["ran"] == {"landed": 1} and report["queue"]["pending"] == 0
        # replaced, not added: the model's cues and the tag, none of the offline keywords
        assert _cues(memory, stored["id"]) == [
            ("pgvector", "technology"),
            ("priya", "person"),
            ("search", "tag"),
        ]
        engram = memory.context.store.get_engram(stored["id"])
        assert engram.summary == LLM_ANALYSIS["summary"] and engram.memory_type == "semantic"
        facts = memory.context.store.relations_of([stored["id"]])
        assert [(f.source, f.relation, f.target) for f in facts] == [
            ("search-service", "runs_on", "pgvector")
        ]
        # the new cues are found by recall
        found = memory.recall("pgvector", mode="recall")
        assert found["results"][0]["id"] == stored["id"]


def test_the_models_types_replace_those_of_cues_another_memory_created(settings):
    with (
        OpenAIStub(lambda p: Reply(_answer(p)), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        older = memory.store("pgvector benchmarks were slow on the old disks")
        assert ("pgvector", "keyword") in _cues(memory, older["id"])  # the heuristic's guess
        stored = memory.store(CONTENT)
        assert memory.enrich()["ran"] == {"landed": 2}
        # The shared cue now has the model's type, for both memories that it encodes.
        assert ("pgvector", "technology") in _cues(memory, stored["id"])
        assert ("pgvector", "technology") in _cues(memory, older["id"])


def test_a_hanging_model_never_delays_a_store_and_its_job_is_retried(settings):
    with (
        OpenAIStub(lambda p: Reply(hang=True), dims=64) as stub,
        Memory.open(_settings(settings, stub, llm_timeout=0.5)) as memory,
    ):
        stored = memory.store(CONTENT)
        assert _chat_calls(stub) == 0  # the store never asked the hanging model
        before = _cues(memory, stored["id"])
        report = memory.enrich()
        assert report["ran"] == {"retry": 1}
        job = AnalysisQueue(memory.context.store).get(stored["id"])
        assert job is not None and job.status == "pending" and job.attempts == 1
        assert "Timeout" in job.error
        assert _cues(memory, stored["id"]) == before  # the offline analysis stays meanwhile


def test_a_failing_model_is_parked_after_max_attempts_with_its_error_in_stats(settings):
    failing = Reply("the model is down", status=500)
    with (
        OpenAIStub(lambda p: failing, dims=64) as stub,
        Memory.open(_settings(settings, stub, analysis_max_attempts=3)) as memory,
    ):
        stored = memory.store(CONTENT)
        report = memory.enrich(wait=True, timeout=20)
        assert report["ran"] == {"retry": 2, "parked": 1}
        assert _chat_calls(stub) == 3
        queue = memory.stats()["analysis_queue"]
        assert queue["pending"] == 0 and queue["failed"] == 1
        parked = queue["failed_memories"][0]
        assert parked["id"] == stored["id"] and parked["attempts"] == 3
        assert "500" in parked["error"] and "the model is down" in parked["error"]
        # parked: draining again calls nothing; retry_failed puts it back
        assert memory.enrich(wait=True, timeout=5)["ran"] == {}
        assert _chat_calls(stub) == 3
        stub.chat_reply = _answer
        again = memory.enrich(wait=True, timeout=20, retry_failed=True)
        assert again["requeued"] == 1 and again["ran"] == {"landed": 1}
        assert memory.analysis_queue()["failed"] == 0


def test_retry_after_of_a_429_is_honoured(settings):
    replies = iter([Reply("slow down", status=429, headers={"Retry-After": "1"})])

    def answer(prompt: str) -> str | Reply:
        return next(replies, None) or _answer(prompt)

    # backoff alone would retry after 0.05 s: the wait below is the endpoint's
    with OpenAIStub(answer, dims=64) as stub, Memory.open(_settings(settings, stub)) as memory:
        stored = memory.store(CONTENT)
        report = memory.enrich(wait=True, timeout=20)
        assert report["ran"] == {"retry": 1, "landed": 1}
        first, second = stub.chat_times
        assert second - first >= 0.95, second - first
        assert ("priya", "person") in _cues(memory, stored["id"])


def test_an_answer_that_is_not_json_is_retried_then_parked(settings):
    with (
        OpenAIStub(lambda p: "Sure! Here are the cues: Priya, pgvector.", dims=64) as stub,
        Memory.open(_settings(settings, stub, analysis_max_attempts=2)) as memory,
    ):
        stored = memory.store(CONTENT)
        assert memory.enrich(wait=True, timeout=20)["ran"] == {"retry": 1, "parked": 1}
        parked = memory.analysis_queue()["failed_memories"]
        assert [p["id"] for p in parked] == [stored["id"]]
        assert "Invalid JSON" in parked[0]["error"] or "did not answer with JSON" in parked[0]["error"]
    with (
        OpenAIStub(lambda p: Reply(raw=b"<html>bad gateway</html>"), dims=64) as stub,
        Memory.open(_settings(settings, stub, analysis_max_attempts=1)) as memory,
    ):
        other = memory.store("Bob moved the billing service to Kafka")
        assert memory.enrich()["ran"] == {"parked": 1}
        assert other["id"] in {p["id"] for p in memory.analysis_queue()["failed_memories"]}


def test_a_failing_embedder_is_still_an_error_with_nothing_written(settings):
    class Broken:
        model = "hashing-64"

        def embed_documents(self, texts):
            raise ConnectionError("embedding endpoint down")

        def embed_query(self, text):
            raise ConnectionError("embedding endpoint down")

    with OpenAIStub(_answer, dims=64) as stub, Memory.open(_settings(settings, stub)) as memory:
        memory.context.embedder = Broken()
        with pytest.raises(StoreError, match="nothing was stored"):
            memory.store(CONTENT)
        assert memory.context.store.count_engrams() == 0
        assert memory.analysis_queue()["pending"] == 0


def test_forget_drops_the_queued_analysis(settings):
    with OpenAIStub(_answer, dims=64) as stub, Memory.open(_settings(settings, stub)) as memory:
        stored = memory.store(CONTENT)
        memory.forget(stored["id"])
        assert memory.analysis_queue()["pending"] == 0
        assert memory.enrich()["ran"] == {}
        assert _chat_calls(stub) == 0


def test_without_a_model_nothing_is_queued_and_enrich_says_why(settings):
    with Memory.open(settings) as memory:
        stored = memory.store(CONTENT)
        assert stored["analysis_queued"] is False and memory.analysis_queue()["pending"] == 0
        with pytest.raises(InvalidInput, match="LLM_API_KEY"):
            memory.enrich()


def test_the_background_worker_drains_the_queue_at_the_rate_limit(settings):
    with OpenAIStub(_answer, dims=64) as stub:
        cfg = _settings(settings, stub, analysis_rate_per_minute=120)  # one call per 0.5 s
        with Memory.open(cfg) as memory:
            assert memory.start_analysis_worker()
            ids = [memory.store(f"Member {n} of team Orion prefers tool number {n}")["id"] for n in range(3)]
            deadline = time.monotonic() + 15
            while memory.analysis_queue()["pending"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert memory.analysis_queue()["pending"] == 0
            gaps = [b - a for a, b in zip(stub.chat_times, stub.chat_times[1:], strict=False)]
            assert len(stub.chat_times) == 3 and min(gaps) >= 0.45, gaps
            for engram_id in ids:
                assert memory.context.store.get_engram(engram_id).summary == LLM_ANALYSIS["summary"]


def test_the_model_names_the_memory_a_new_one_corrects(settings):
    """LLM-detected supersession: the analysis sees the closest earlier memories and names one."""

    def answer(prompt: str) -> str:
        listed = prompt.split("Earlier memories", 1)[-1]
        earlier = [line.split(":", 1)[0] for line in listed.splitlines() if "standup" in line]
        return json.dumps({**LLM_ANALYSIS, "relations": [], "supersedes": earlier})

    with OpenAIStub(answer, dims=64) as stub, Memory.open(_settings(settings, stub)) as memory:
        old = memory.store("The team standup is at 9:30 every morning in room Ada")["id"]
        memory.enrich()  # nothing earlier to correct
        assert memory.context.store.get_engram(old).superseded_by == ""
        new = memory.store("The team standup moved: it is at 10:00 every morning in room Ada")["id"]
        memory.enrich()
        assert memory.context.store.get_engram(old).superseded_by == new
        ranked = memory.recall("when is the team standup?", include_superseded=True, limit=5)
        ids = [r["id"] for r in ranked["results"]]
        assert ids.index(new) < ids.index(old)


def test_an_unknown_supersedes_id_stores_nothing(settings):
    with Memory.open(settings) as memory:
        with pytest.raises(NotFound, match="supersedes"):
            memory.store("Alice now prefers Qdrant", supersedes="no-such-memory")
        assert memory.context.store.count_engrams() == 0


def test_retry_after_and_backoff_rules():
    from datetime import UTC, datetime

    class Response:
        def __init__(self, headers):
            self.headers = headers

    class Failure(Exception):
        def __init__(self, headers):
            self.response = Response(headers)

    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    assert retry_after(Failure({"retry-after": "7"}), now) == 7.0
    assert retry_after(Failure({"retry-after": "Thu, 03 Dec 2026 12:00:30 GMT"}), now) == 30.0
    assert retry_after(Failure({}), now) is None and retry_after(ValueError(), now) is None
    assert [backoff(n, 5.0, 30.0) for n in (1, 2, 3, 4, 5)] == [5.0, 10.0, 20.0, 30.0, 30.0]


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu"])
def test_landing_and_detected_corrections_on_each_embedded_backend(settings, db_type):
    with (
        OpenAIStub(_answer, dims=64) as stub,
        Memory.open(_settings(settings, stub, db_type=db_type)) as memory,
    ):
        old = memory.store("Alice prefers pgvector for RAG projects")["id"]
        new = memory.store("Alice now prefers Qdrant for RAG projects")
        assert new["superseded"] == [old]
        assert memory.enrich()["ran"] == {"landed": 2}
        assert memory.context.store.get_engram(old).superseded_by == new["id"]  # kept by the landing
        for engram_id in (old, new["id"]):
            assert _cues(memory, engram_id) == [("pgvector", "technology"), ("priya", "person")]
        found = memory.recall("Alice RAG projects", limit=5)
        assert old not in [r["id"] for r in found["results"]]


def test_closing_with_a_call_in_flight_is_quick_and_keeps_the_job(settings):
    with OpenAIStub(lambda p: Reply(hang=True), dims=64) as stub:
        cfg = _settings(settings, stub, llm_timeout=30.0)
        memory = Memory.open(cfg)
        assert memory.start_analysis_worker()
        stored = memory.store(CONTENT)
        deadline = time.monotonic() + 10
        while not stub.chat_times and time.monotonic() < deadline:
            time.sleep(0.02)
        assert stub.chat_times  # the worker is waiting for the model
        started = time.perf_counter()
        memory.close()
        # Not waiting for the model's 30 s (LLM_TIMEOUT): half of it is generous under any load.
        assert time.perf_counter() - started < 15
        with Memory.open(cfg) as reopened:
            job = AnalysisQueue(reopened.context.store).get(stored["id"])
            assert job is not None and job.status == "pending" and job.attempts == 0


def test_a_hanging_model_delays_a_recall_by_the_query_timeout_at_most(settings):
    with (
        OpenAIStub(lambda p: Reply(hang=True), dims=64) as stub,
        Memory.open(
            _settings(settings, stub, llm_query_timeout=0.5, llm_max_retries=0, llm_timeout=120.0)
        ) as memory,
    ):
        stored = memory.store(CONTENT)
        started = time.perf_counter()
        found = memory.recall("Priya pgvector")
        # The query timeout (0.5 s), not LLM_TIMEOUT (120 s): a bound generous under any load.
        assert time.perf_counter() - started < 30
        assert found["results"][0]["id"] == stored["id"]  # parsed offline
        assert _chat_calls(stub) == 1
