"""Model providers: the offline embedder and analyser, LLM answer repair, the OpenAI-compatible path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from smriti.memory import Memory
from smriti.providers import analysis, heuristic
from smriti.providers.hashing import HashingEmbeddings
from smriti.providers.models import (
    ProviderError,
    build_chat_model,
    build_embedder,
    check_embedding_identity,
    offline_notice,
)
from smriti.stores.base import EmbeddingMismatchError

from .openai_stub import OpenAIStub

ANALYSIS_JSON = {
    "summary": "Priya moved the search service to pgvector",
    "memory_type": "Semantic",  # models capitalise; must still be accepted
    "cues": [{"name": "Priya", "type": "Person"}, {"name": "pgvector", "type": "technology"}],
    "relations": [{"source": "search-service", "relation": "runs on", "target": "pgvector"}],
}


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# ------------------------------------------------------------------------ hashing embedder
def test_hashing_embeddings_are_normalised_and_lexical():
    embedder = HashingEmbeddings(256)
    a, b, c = embedder.embed_documents(
        ["Caroline adopted a puppy", "Caroline's puppies", "The quarterly tax report is due"]
    )
    assert len(a) == 256
    assert abs(_cosine(a, a) - 1.0) < 1e-9
    assert _cosine(a, b) > 0.3  # shared name and stemmed "puppy"
    assert abs(_cosine(a, c)) < 0.2
    assert embedder.embed_query("the and of") == [0.0] * 256  # stop words only: no direction


def test_hashing_embeddings_are_stable_across_processes():
    """Python's str hash is salted per process; stored vectors must not depend on it."""
    code = (
        "from smriti.providers.hashing import HashingEmbeddings; "
        "print(HashingEmbeddings(32).embed_query('x y'))"
    )
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(other) == pytest.approx(HashingEmbeddings(32).embed_query("x y"))


# ------------------------------------------------------------------------ heuristic analyser
def test_heuristic_analysis_finds_entities_keywords_relations_and_type():
    result = heuristic.analyze_offline(
        "Yesterday Caroline went to a support group in Boston. The database-engineer uses pgvector."
    )
    names = {c.name: c.type for c in result.cues}
    assert names["Caroline"] == "person"
    assert names["Boston"] == "place"
    assert names["database-engineer"] == "technology"
    assert "support" in names and "group" in names
    assert ("database-engineer", "uses", "pgvector") in {
        (r.source, r.relation, r.target) for r in result.relations
    }
    assert result.memory_type == "episodic"
    assert heuristic.memory_type("To deploy, run `make release` then tag the commit") == "procedural"
    assert heuristic.memory_type("Alice prefers tea over coffee") == "semantic"


@pytest.mark.parametrize(
    ("query", "intent"),
    [
        ("What pagination approach did database-engineer recommend?", "decision"),
        ("How do I rotate the API keys?", "procedure"),
        ("When did Caroline go to the support group?", "event"),
        ("Who maintains the billing service?", "person"),
        ("What is Melanie's favourite book?", "fact"),
        ("pagination", "general"),
    ],
)
def test_query_intent(query, intent):
    assert heuristic.query_intent(query) == intent


def test_parse_query_normalises_cues_and_names_entities():
    parsed = analysis.parse_query(
        None, "What pagination approach did database-engineer recommend in New York?"
    )
    assert "database-engineer" in parsed.entity_hints
    assert "new-york" in parsed.cues  # normalised like stored cue names
    assert "pagination" in parsed.cues
    assert all(c == c.lower() for c in parsed.cues)


# ------------------------------------------------------------------------ LLM answers
@pytest.mark.parametrize(
    "answer",
    [
        json.dumps(ANALYSIS_JSON),
        "```json\n" + json.dumps(ANALYSIS_JSON) + "\n```",
        "Sure! Here is the analysis:\n"
        + json.dumps(ANALYSIS_JSON, indent=1).replace("}\n]", "},\n]")
        + "\nDone.",
    ],
    ids=["plain", "fenced", "prose-and-trailing-comma"],
)
def test_llm_analysis_is_repaired_when_almost_json(answer):
    result, analyzer = analysis.analyze_memory(
        FakeListChatModel(responses=[answer]), "Priya moved search to pgvector"
    )
    assert analyzer == "llm"
    assert result.memory_type == "semantic"
    assert [c.name for c in result.cues] == ["Priya", "pgvector"]
    assert result.relations[0].relation == "runs_on"


class ExplodingChatModel(FakeListChatModel):
    def _call(self, *args, **kwargs):
        raise TimeoutError("the model did not answer in time")


@pytest.mark.parametrize(
    "llm",
    [FakeListChatModel(responses=["I cannot help with that."]), ExplodingChatModel(responses=["unused"])],
    ids=["not-json", "raises"],
)
def test_llm_failure_falls_back_to_the_heuristic(llm, caplog):
    result, analyzer = analysis.analyze_memory(llm, "Caroline visited Boston last week")
    assert analyzer == "heuristic"
    assert "Caroline" in [c.name for c in result.cues]
    assert "heuristic" in caplog.text


def test_llm_query_parsing_keeps_heuristic_cues():
    answer = json.dumps(
        {"cues": ["Billing Service"], "entity_hints": ["Billing Service"], "intent": "person"}
    )
    parsed = analysis.parse_query(FakeListChatModel(responses=[answer]), "who owns invoices")
    assert parsed.cues[0] == "billing-service"
    assert "invoice" in parsed.cues
    assert parsed.intent == "person"


# ------------------------------------------------------------------------ building from settings
def test_auto_without_keys_is_offline(settings, caplog):
    offline = settings.model_copy(update={"llm_provider": "auto", "embedding_provider": "auto"})
    assert build_chat_model(offline) is None
    embedder = build_embedder(offline)
    assert isinstance(embedder, HashingEmbeddings) and embedder.dims == settings.embedding_dims
    notice = offline_notice(offline)
    assert notice is not None and "heuristic" in notice and "hashing" in notice
    assert offline_notice(settings) is None  # chosen explicitly: nothing to warn about
    only_llm = offline.model_copy(update={"embedding_api_key": "sk-x"})
    assert offline_notice(only_llm) == "offline analysis (no LLM_API_KEY): the heuristic cue extractor"


def test_local_embedder_never_downloads(settings, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = settings.model_copy(
        update={"embedding_provider": "local", "local_embedding_model": "no-such/model"}
    )
    with pytest.raises(ProviderError) as error:
        build_embedder(local)
    message = str(error.value)
    assert "sentence-transformers" in message or "never downloaded" in message


def test_store_refuses_another_embedding_model(make_context):
    context = make_context()
    Memory(context).store("Alice likes green tea")
    check_embedding_identity(context.store, context.embedder, context.settings)  # same model: fine

    class OtherModel(HashingEmbeddings):
        model = "other-model-v2"

    with pytest.raises(EmbeddingMismatchError, match="other-model-v2"):
        check_embedding_identity(context.store, OtherModel(64), context.settings)


# ------------------------------------------------------------------------ OpenAI-compatible HTTP path
def _reply(prompt: str) -> str:
    if "Query:" in prompt:
        return json.dumps({"cues": ["pgvector"], "entity_hints": ["pgvector"], "intent": "fact"})
    return json.dumps(ANALYSIS_JSON)


def _openai_settings(settings, stub: OpenAIStub, **extra):
    return settings.model_copy(
        update={
            "llm_provider": "openai",
            "embedding_provider": "openai",
            "llm_base_url": stub.base_url,
            "embedding_base_url": stub.base_url,
            "llm_api_key": "sk-test",
            "embedding_model": "stub-embed",
            **extra,
        }
    )


def test_openai_compatible_endpoint_drives_store_and_recall(settings):
    with OpenAIStub(_reply, dims=settings.embedding_dims) as stub:
        cfg = _openai_settings(settings, stub)
        with Memory.open(cfg) as memory:
            stored = memory.store("Priya moved the search service to pgvector")
            # The store answers with the offline analysis; the model's is queued and lands later.
            assert stored["analysis_queued"] is True
            assert memory.enrich()["ran"] == {"landed": 1}
            engram = memory.context.store.get_engram(stored["id"])
            assert engram.memory_type == "semantic"
            cues = memory.context.store.cues_of([stored["id"]])[stored["id"]]
            assert ("priya", "person") in {(c.name, c.cue_type) for c in cues}
            found = memory.recall("which vector database do we use?", explain=True)
    paths = stub.paths()
    assert "/v1/chat/completions" in paths and "/v1/embeddings" in paths
    assert found["results"][0]["id"] == stored["id"]
    sent = dict(stub.requests)["/v1/chat/completions"]
    assert sent["model"] == settings.llm_model


def test_slow_endpoint_times_out_and_the_memory_is_still_stored(settings):
    with OpenAIStub(_reply, dims=settings.embedding_dims, delay=2.0) as stub:
        cfg = _openai_settings(
            settings, stub, llm_timeout=0.5, llm_max_retries=0, embedding_provider="hashing"
        )
        with Memory.open(cfg) as memory:
            stored = memory.store("Caroline visited Boston last week")
            assert any(s["notes"].startswith("heuristic") for s in stored["trace"] if s["node"] == "analyze")
            assert memory.stats()["engrams"] == 1


def test_hashing_embeddings_are_the_full_vector_pass_to_the_last_bit():
    """embed_query sums and divides only the axes its features hash to: every float must be
    what the pass over the whole vector gave (colliding and cancelling features included)."""
    import math
    import random
    import struct

    from smriti.providers.hashing import _bucket

    def whole_vector(embedder, text):
        vector = [0.0] * embedder.dims
        for feature, weight in embedder._features(text):
            axis, sign = _bucket(feature, embedder.dims)
            vector[axis] += sign * weight
        norm = math.sqrt(sum(v * v for v in vector))
        return [v / norm for v in vector] if norm else vector

    rng = random.Random(5)
    vocabulary = "alice bob moved to paris in may cats dogs rain seventh largest country moth genus".split()
    texts = ["", "the of and", "x x x x y y", "Melanie painted a sunrise in 2022"]
    texts += [" ".join(rng.choices(vocabulary, k=rng.randint(1, 40))) for _ in range(300)]
    for dims in (8, 64, 1536):  # 8: most features collide, some cancel out
        embedder = HashingEmbeddings(dims)
        for text in texts:
            got, want = embedder.embed_query(text), whole_vector(embedder, text)
            assert [struct.pack("<d", v) for v in got] == [struct.pack("<d", v) for v in want], text
