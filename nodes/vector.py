"""Direct search branches: vector similarity and full text; and the plain recent listing."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.cues import candidate_pool
from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState


def embed_query(context: MemoryContext, query: str) -> list[float]:
    """Embed the query; an embedding endpoint failure is the caller's error to report."""
    return list(context.embedder.embed_query(query))


@traced("vector_search")
def vector_search(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Cosine similarity over engram embeddings (HNSW index when built, else brute force)."""
    context = runtime.context
    embedding = embed_query(context, state["query"])
    floor = context.settings.vector_min_similarity
    # Search mode ranks by similarity alone, so the top ``limit`` is all it needs; recall
    # fuses branches and expands, so it takes a deeper pool.
    k = state["limit"] if state["mode"] == "search" else candidate_pool(state["limit"])
    found = context.store.vector_search(embedding, k, state.get("memory_type"))
    # Brute force returns k rows whatever their score; unrelated memories are not candidates.
    hits = [h for h in found if h.score > floor]
    return {
        "query_embedding": embedding,
        "hits": {h.id: {"similarity": h.score, "origins": ["vector"]} for h in hits},
        "_candidates": [{"id": h.id, "score": h.score} for h in hits],
        "_notes": f"{len(hits)} nearest engrams",
    }


@traced("fulltext_search")
def fulltext_search(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Keyword search (FTS index when built, else a scan); scores normalised to (0, 1]."""
    hits = runtime.context.store.fulltext_search(
        state["query"], candidate_pool(state["limit"]), state.get("memory_type")
    )
    return {
        "hits": {h.id: {"text_score": h.score, "origins": ["fulltext"]} for h in hits},
        "_candidates": [{"id": h.id, "score": h.score} for h in hits],
        "_notes": f"{len(hits)} keyword matches",
    }
