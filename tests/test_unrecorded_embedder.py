"""A store with memories but no recorded embedding model (what the Go server leaves in
``memory.lbug``) is never stamped with an offline guess: opened offline it asks for the model,
and the user's real (OpenAI-compatible) model then opens it, is recorded, and serves."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from smriti.errors import EmbedderUnknown
from smriti.memory import Memory
from smriti.pipelines.context import build_context
from smriti.providers.hashing import HashingEmbeddings
from smriti.stores import make_store, recorded_embedding
from smriti.stores.base import Engram
from tests.openai_stub import OpenAIStub

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
OLD_MEMORY = "Priya moved the search service to pgvector last spring."


def without_a_model_record(settings) -> None:
    """A store with one memory whose embedding model was never recorded."""
    store = make_store(settings)
    try:
        vector = HashingEmbeddings(settings.embedding_dims).embed_query(OLD_MEMORY)  # the stub's model
        engram = Engram(content=OLD_MEMORY, embedding=vector, created_at=NOW, last_accessed_at=NOW)
        store.create_engram(engram)
        assert store.get_meta("embedding_model") is None
    finally:
        store.close()


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu"])
def test_offline_it_asks_for_the_model_and_the_real_model_then_serves(settings, db_type):
    base = settings.model_copy(update={"db_type": db_type})
    without_a_model_record(base)
    # No key: auto would run the offline hashing embedder (EMBEDDING_DIMS=64 is set, as the
    # dimension refusal advises). Twice: the first refusal locked nothing.
    offline = base.model_copy(update={"embedding_provider": "auto"})
    for _ in range(2):
        with pytest.raises(EmbedderUnknown, match=r"holds 1 memories but records no embedding model \(64"):
            build_context(offline)
    recorded = recorded_embedding(offline)
    assert recorded is not None and recorded.model is None

    with OpenAIStub(lambda prompt: json.dumps({}), dims=64) as stub:
        real = offline.model_copy(
            update={
                "embedding_api_key": SecretStr("sk-test"),
                "embedding_base_url": stub.base_url,
                "embedding_model": "stub-embed",
            }
        )
        with Memory.open(real) as memory:
            stored = memory.store("Bob prefers cursor pagination for the orders API.")
            found = memory.recall("pgvector search service")
        with Memory.open(real) as again:  # reopened with the same model: recorded, accepted
            listed = again.recall("", mode="list")
    assert "/v1/embeddings" in stub.paths()
    assert found["results"][0]["text"] == OLD_MEMORY
    assert {item["id"] for item in listed["results"]} >= {stored["id"]}
    assert recorded_embedding(real).model == "stub-embed"  # type: ignore[union-attr]


def test_a_model_chosen_by_the_user_is_recorded_and_said(settings, caplog):
    without_a_model_record(settings)
    chosen = settings.model_copy(update={"embedding_provider": "hashing"})  # explicit: for good
    build_context(chosen).store.close()
    assert recorded_embedding(chosen).model == "smriti-hashing-v1"  # type: ignore[union-attr]
    assert "recorded no embedding model: recording 'smriti-hashing-v1'" in caplog.text


def test_an_empty_store_without_a_record_takes_the_offline_embedder(settings):
    make_store(settings).close()  # nothing in it: no memories to misread
    offline = settings.model_copy(update={"embedding_provider": "auto"})
    build_context(offline).store.close()
    assert recorded_embedding(offline).model == "smriti-hashing-v1"  # type: ignore[union-attr]
