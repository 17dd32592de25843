"""The store graph on a real Kuzu store with deterministic fake models."""

from datetime import UTC, datetime

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from smriti.errors import InvalidInput
from smriti.pipelines.store import STEPS, store_graph


def _store(context, content, **extra):
    return store_graph.invoke({"content": content, **extra}, context=context)


def test_store_writes_engram_cues_and_trace(make_context):
    context = make_context()
    out = _store(
        context, "Alice uses pgvector for RAG at Acme", importance=0.7, tags="Databases, AI", source="notes"
    )
    engram = context.store.get_engram(out["id"])
    assert engram is not None and engram.importance == 0.7 and engram.source == "notes"
    assert engram.tags == "databases,ai"
    cue_names = {c.name for c in context.store.cues_of([out["id"]])[out["id"]]}
    assert {"pgvector", "databases", "ai"} <= cue_names
    assert out["deduplicated"] is False
    assert [t["node"] for t in out["trace"]] == STEPS


def test_near_duplicate_is_reinforced_not_copied(make_context):
    context = make_context()
    first = _store(context, "The deploy script lives in tools/deploy.sh", tags="ops")
    second = _store(context, "The deploy script lives in tools/deploy.sh", tags="scripts")
    assert second["deduplicated"] is True and second["id"] == first["id"]
    assert context.store.count_engrams() == 1
    engram = context.store.get_engram(first["id"])
    assert engram.access_count == 1
    assert set(engram.tag_list()) == {"ops", "scripts"}
    assert "write" not in [t["node"] for t in second["trace"]]


def test_same_source_memories_are_associated(make_context):
    context = make_context()
    a = _store(context, "We met at the harbour cafe", source="conv-1")
    b = _store(context, "The espresso there was bitter", source="conv-1")
    edges = context.store.neighbours([b["id"]])
    assert any(
        {e.source_id, e.target_id} == {a["id"], b["id"]} and e.relation_type == "same_source" for e in edges
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"content": "   "},
        {"content": "x" * 20_001},
        {"content": "ok", "importance": 1.5},
        {"content": "ok", "importance": float("nan")},
        {"content": "ok", "created_at": "yesterday"},
    ],
)
def test_bad_input_is_refused_and_changes_nothing(make_context, bad):
    context = make_context()
    with pytest.raises(InvalidInput):
        store_graph.invoke(bad, context=context)
    assert context.store.count_engrams() == 0


def test_created_at_sets_the_memory_time(make_context):
    context = make_context()
    when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    out = _store(context, "Caroline went to the LGBTQ support group", created_at=when.isoformat())
    engram = context.store.get_engram(out["id"])
    assert engram.created_at == when and engram.last_accessed_at == when


def test_llm_failure_still_stores_the_memory(make_context):
    broken = FakeListChatModel(responses=["this is { not json at all"])
    context = make_context(llm=broken)
    out = _store(context, "Bob prefers Rust for systems programming")
    assert context.store.get_engram(out["id"]) is not None
    analyze = next(t for t in out["trace"] if t["node"] == "analyze")
    assert "heuristic" in analyze["notes"]
    assert out["cues"], "the heuristic fallback still extracts cues"


def test_embedding_failure_stores_nothing(make_context):
    class Broken:
        def embed_documents(self, texts):
            raise ConnectionError("endpoint down")

        def embed_query(self, text):
            raise ConnectionError("endpoint down")

    context = make_context(embedder=Broken())
    with pytest.raises(Exception, match="nothing was stored"):
        _store(context, "anything")
    assert context.store.count_engrams() == 0


def test_new_memory_joins_the_cluster_of_its_strongest_neighbour(make_context):
    context = make_context()
    near = _store(context, "Alice tunes pgvector HNSW indexes for the search service", source="a")
    far = _store(context, "Alice bakes sourdough bread on Sundays", source="b")
    context.store.update_engrams({near["id"]: {"cluster_id": 4}, far["id"]: {"cluster_id": 9}})
    new = _store(context, "Alice tunes pgvector HNSW indexes for the search service today", source="c")
    links = context.store.neighbours([new["id"]])
    strengths = {e.target_id if e.source_id == new["id"] else e.source_id: e.strength for e in links}
    assert new["deduplicated"] is False
    assert strengths and max(strengths, key=strengths.get) == near["id"]
    assert new["cluster_id"] == 4
    assert context.store.get_engram(new["id"]).cluster_id == 4


def test_a_memory_with_no_clustered_neighbour_stays_unclustered(make_context):
    context = make_context()
    _store(context, "Alice tunes pgvector HNSW indexes for the search service", source="a")
    new = _store(context, "Alice tunes pgvector HNSW indexes for the search service today", source="c")
    assert new["cluster_id"] == -1 and context.store.get_engram(new["id"]).cluster_id == -1
