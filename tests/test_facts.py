"""The facts and the time a memory states, from the queued LLM analysis (real HTTP to the local
OpenAI-compatible stub, real SQLite and Kuzu files; only the model is scripted).

The model is asked for the atomic facts a memory states and when its event happened, resolved
against the store time the prompt gives. When the analysis lands the facts are stored on the
memory (and found by keyword search), and the stated time becomes the memory's time, unless the
caller gave ``occurred_at``. A time that is malformed, in the future or after the store is
ignored without failing the job.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from smriti.memory import Memory
from smriti.nodes.enrich import Enrichment
from smriti.providers.schemas import MAX_FACT_CHARS, MAX_FACTS
from smriti.stores.queue import AnalysisQueue
from smriti.stores.records import import_into

from .openai_stub import OpenAIStub, queued_llm_settings

STORED = datetime(2026, 5, 8, 9, 30, tzinfo=UTC)
CONTENT = "Yesterday Alice told me she is switching our vector store for the RAG project."
FACTS = ["Alice prefers Qdrant over pgvector", "The RAG project gets a new vector store"]
OTHERS = [
    "Bob plans the quarterly offsite in Lisbon with the design team.",
    "The billing service retries failed card payments three times.",
]


def _stored_at(prompt: str) -> datetime:
    """The store time the prompt gives the model (what it resolves "yesterday" against)."""
    match = re.search(r"stored at (\S+) \(UTC\)", prompt)
    assert match, prompt[-400:]
    return datetime.fromisoformat(match.group(1))


def _model(occurred_at=None, facts=FACTS):
    """A stub model: the facts, and ``occurred_at(store time)`` as the time it states."""

    def answer(prompt: str) -> str:
        if "Query:" in prompt:  # recall's query parsing
            return json.dumps({"cues": [], "entity_hints": [], "intent": "fact"})
        stated = occurred_at(_stored_at(prompt)) if callable(occurred_at) else occurred_at
        told = re.match(r"Yesterday (\w+) told me", prompt.split("Memory:\n", 1)[-1])
        if told is None:  # another memory: no facts, no time
            return json.dumps({"summary": "other", "memory_type": "semantic", "cues": [], "facts": []})
        name = told.group(1)  # CONTENT's, or the same told by someone else
        return json.dumps(
            {
                "summary": "Alice is switching the RAG project's vector store",
                "memory_type": "episodic",
                "cues": [{"name": name, "type": "person"}, {"name": "RAG", "type": "concept"}],
                "relations": [],
                "facts": [fact.replace("Alice", name) for fact in facts],
                "occurred_at": stated,
            }
        )

    return answer


def _yesterday(stored: datetime) -> str:
    return (stored - timedelta(days=1)).date().isoformat()


def _settings(settings, stub: OpenAIStub, **extra):
    extra.setdefault("analysis_max_attempts", 1)  # a failed job would be parked at once
    return queued_llm_settings(settings, stub, **extra)


def _cues(memory: Memory, engram_id: str) -> list[tuple[str, str]]:
    return sorted((c.name, c.cue_type) for c in memory.context.store.cues_of([engram_id])[engram_id])


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu"])
def test_facts_and_a_relative_time_land_and_are_found(settings, db_type):
    with (
        OpenAIStub(_model(_yesterday), dims=64) as stub,
        Memory.open(_settings(settings, stub, db_type=db_type)) as memory,
    ):
        store = memory.context.store
        for other in OTHERS:
            memory.store(other, created_at=STORED)
        stored = memory.store(CONTENT, created_at=STORED)["id"]
        assert store.fulltext_search("Qdrant", 5) == []  # the word is only in a fact
        assert store.get_engram(stored).facts == ""

        report = memory.enrich(wait=True, timeout=20)
        assert report["ran"] == {"landed": 3} and report["queue"]["failed"] == 0
        engram = store.get_engram(stored)
        assert engram.fact_list() == FACTS
        assert engram.created_at == datetime(2026, 5, 7, tzinfo=UTC)  # "yesterday" of the store
        assert engram.last_accessed_at == STORED  # not decayed as unused since the event
        assert ("2026-05-07", "time") in _cues(memory, stored)

        assert [hit.id for hit in store.fulltext_search("Qdrant", 5)] == [stored]
        found = memory.recall("Qdrant", limit=3, explain=True)["results"]
        assert found[0]["id"] == stored and found[0]["components"]["text_score"] > 0
        assert found[0]["timestamp"] == "2026-05-07T00:00:00+00:00"


def test_a_replayed_job_lands_the_same_memory(settings):
    """A crash between the landing and the job's removal (Kuzu, Cypher: no transaction spans
    both) replays the job: facts replaced, no cue doubled, the time resolved the same."""
    with (
        OpenAIStub(_model(_yesterday), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        store = memory.context.store
        stored = memory.store(CONTENT, created_at=STORED)["id"]
        queue = AnalysisQueue(store)
        job = queue.get(stored)
        assert job is not None and datetime.fromisoformat(job.store_time) == STORED
        assert memory.enrich()["ran"] == {"landed": 1}
        first = (store.get_engram(stored), _cues(memory, stored))

        queue._save(job)  # the job as it was before the landing: what a crash leaves
        assert memory.enrich()["ran"] == {"landed": 1}
        again = store.get_engram(stored)
        assert (again, _cues(memory, stored)) == first
        assert again.created_at == datetime(2026, 5, 7, tzinfo=UTC)  # not a day earlier again
        assert again.fact_list() == FACTS


def test_the_callers_occurred_at_is_never_overwritten(settings):
    told = datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    with (
        OpenAIStub(_model(_yesterday), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        stored = memory.store(CONTENT, created_at=STORED, occurred_at=told)["id"]
        assert AnalysisQueue(memory.context.store).get(stored).store_time == ""
        prompts: list[str] = []
        answer = stub.chat_reply
        stub.chat_reply = lambda prompt: prompts.append(prompt) or answer(prompt)
        assert memory.enrich()["ran"] == {"landed": 1}
        engram = memory.context.store.get_engram(stored)
        assert engram.created_at == told
        assert engram.fact_list() == FACTS  # the rest of the analysis lands
        assert not any(cue_type == "time" for _, cue_type in _cues(memory, stored))
        # the model still resolves relative times against the memory's own time
        assert _stored_at(prompts[0]) == told


@pytest.mark.parametrize(
    "stated",
    [
        "last Tuesday",  # not ISO
        "2026-13-45",  # not a date
        "2999-01-01",  # in the future
        "2026-06-01",  # after the store (the store time is 2026-05-08)
        12345,  # not a string
    ],
)
def test_a_malformed_or_future_time_is_ignored_and_the_job_lands(settings, stated):
    with (
        OpenAIStub(_model(stated), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        stored = memory.store(CONTENT, created_at=STORED)["id"]
        report = memory.enrich()
        assert report["ran"] == {"landed": 1} and report["queue"]["failed"] == 0
        engram = memory.context.store.get_engram(stored)
        assert engram.created_at == STORED
        assert engram.fact_list() == FACTS
        assert not any(cue_type == "time" for _, cue_type in _cues(memory, stored))


def test_no_stated_time_keeps_the_store_time_and_no_facts_clears_old_ones(settings):
    with (
        OpenAIStub(_model(None, facts=[]), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        stored = memory.store(CONTENT, created_at=STORED)["id"]
        memory.context.store.update_engram(stored, facts="An old fact")
        assert memory.enrich()["ran"] == {"landed": 1}
        engram = memory.context.store.get_engram(stored)
        assert engram.created_at == STORED and engram.facts == ""


def test_facts_survive_export_and_import(settings, tmp_path):
    with (
        OpenAIStub(_model(_yesterday), dims=64) as stub,
        Memory.open(_settings(settings, stub)) as memory,
    ):
        stored = memory.store(CONTENT, created_at=STORED)["id"]
        memory.enrich()
        records = list(memory.export_records())
    engram_record = next(r for r in records if r["kind"] == "engram")
    assert engram_record["facts"] == "\n".join(FACTS)
    other = settings.model_copy(update={"storage_location": tmp_path / "other", "db_type": "kuzu"})
    with Memory.open(other) as copy:
        import_into(copy.context.store, records)
        engram = copy.context.store.get_engram(stored)
        assert engram.fact_list() == FACTS and engram.created_at == datetime(2026, 5, 7, tzinfo=UTC)
        assert [hit.id for hit in copy.context.store.fulltext_search("Qdrant", 5)] == [stored]


def test_the_analysis_schema_is_lenient_about_facts_and_time():
    base = {"summary": "s", "memory_type": "semantic"}
    facts = ["  Alice   prefers Qdrant ", "", "x" * (MAX_FACT_CHARS + 1), 7, None, "Alice prefers Qdrant"]
    facts += [f"fact {n}" for n in range(20)]
    analysis = Enrichment.model_validate({**base, "facts": facts, "occurred_at": "2026-05-07"})
    assert analysis.facts[:3] == ["Alice prefers Qdrant", "7", "fact 0"]  # cleaned, deduplicated
    assert len(analysis.facts) == MAX_FACTS
    assert analysis.stated_time() == datetime(2026, 5, 7, tzinfo=UTC)
    offset = Enrichment.model_validate({**base, "occurred_at": "2026-05-07T10:00:00+02:00"})
    assert offset.stated_time() == datetime(2026, 5, 7, 8, 0, tzinfo=UTC)
    assert Enrichment.model_validate({**base, "facts": "one\ntwo"}).facts == ["one", "two"]
    for bad in ("yesterday", "", None, 3, "2999-01-01", ["2026-05-07"]):
        answer = Enrichment.model_validate({**base, "facts": {"a": 1}, "occurred_at": bad})
        assert answer.occurred_at is None and answer.facts == []
    # the prompt's schema asks for both
    schema = Enrichment.model_json_schema()["properties"]
    assert "facts" in schema and "occurred_at" in schema
