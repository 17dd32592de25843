"""Recall's first steps: validate, parse the query, the three direct branches, and list mode.

validate routes by mode: ``list`` ends here with the most recently accessed memories;
``search`` runs :func:`vector_search` alone; ``recall`` parses the query into cues and runs
:func:`cue_traverse`, :func:`vector_search` and :func:`fulltext_search` in parallel. Each
branch writes its signals into ``hits`` (merged per engram id); ``nodes/expand.py`` turns
them into candidates.
"""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from smriti.errors import InvalidInput
from smriti.nodes.scoring import cue_score, idf, recency
from smriti.nodes.state import Candidate, Hit, MemoryContext, RecallState, trace_scores, traced
from smriti.validators import check_limit, check_memory_type, check_mode


def candidate_pool(limit: int) -> int:
    """How many hits each direct branch returns: generous, since fusion and hops re-rank them."""
    return max(4 * limit, 50)


def load_candidates(
    context: MemoryContext, ids: list[str], hits: dict[str, Hit], memory_type: str | None
) -> list[Candidate]:
    """Engrams with their cues as candidates (embeddings as float32 arrays), dropping other
    memory types."""
    return [
        Candidate.from_engram(row.engram, row.cues, hits.get(row.engram.id), row.vector)
        for row in context.store.recall_rows(ids)
        if memory_type is None or row.engram.memory_type == memory_type
    ]


@traced("validate")
def validate_recall(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Check the request before anything is read; an empty query becomes mode ``list``."""
    settings = runtime.context.settings
    query = state.get("query") or ""
    if not isinstance(query, str):
        raise InvalidInput("query must be a string")
    mode = check_mode(state.get("mode"))
    if not query.strip() and mode != "list":
        mode = "list"  # an empty query returns recent memories (Memory Fabric: "empty query")
    return {
        "query": query.strip(),
        "mode": mode,
        "limit": check_limit(state.get("limit", 5), settings.memory_fabric_max_results),
        "memory_type": check_memory_type(state.get("memory_type")),
        "explain": bool(state.get("explain", False)),
        "_notes": f"mode={mode}",
    }


@traced("list_recent")
def list_recent(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Mode list: the most recently accessed memories, scored by recency of access; no search."""
    context = runtime.context
    engrams = context.store.list_recent(state["limit"], state.get("memory_type"))
    hits: dict[str, Hit] = {e.id: {"origins": ["list"]} for e in engrams}
    candidates = load_candidates(context, [e.id for e in engrams], hits, state.get("memory_type"))
    now = context.clock()
    for candidate in candidates:
        candidate.score = recency(candidate.last_accessed_at, now, context.settings.recency_half_life_days)
    return {
        "results": candidates,
        "_candidates": trace_scores(candidates, "score"),
        "_notes": f"{len(candidates)} most recently accessed",
    }


@traced("parse_query")
def extract_query_cues(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Cues, entity hints and intent of the query (LLM when configured, else the heuristic)."""
    from smriti.providers.analysis import parse_query

    data = parse_query(runtime.context.llm, state["query"]).model_dump()
    return {
        "parsed": data,
        "_notes": f"cues={data['cues']} entity_hints={data['entity_hints']} intent={data['intent']}",
    }


@traced("cue_traverse")
def cue_traverse(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Engrams encoded by the query's cues, scored by the idf-weighted share of cues matched."""
    store = runtime.context.store
    cues = list(dict.fromkeys(state.get("parsed", {}).get("cues", [])))
    if not cues:
        return {"_notes": "no cues in the query"}
    found = store.cue_engram_counts(cues)
    total = max(store.count_engrams(), 1)
    weights = {name: idf(found.get(name, 0), total) for name in cues}
    hits = store.engrams_by_cues(cues, candidate_pool(state["limit"]))
    scored: dict[str, Hit] = {
        hit.engram_id: {
            "cue_score": cue_score(hit.cues, cues, weights),
            "matched_cues": list(hit.cues),
            "origins": ["cue"],
        }
        for hit in hits
    }
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1]["cue_score"], kv[0]))
    return {
        "hits": scored,
        "_candidates": [{"id": i, "score": h["cue_score"]} for i, h in ranked],
        "_notes": f"{len(found)} of {len(cues)} cues known; {len(hits)} engrams reached",
    }


@traced("vector_search")
def vector_search(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Cosine similarity over engram embeddings (HNSW index when built, else brute force)."""
    context = runtime.context
    # An embedding endpoint failure propagates: it is the caller's error to report.
    embedding = list(context.embedder.embed_query(state["query"]))
    floor = context.settings.vector_min_similarity
    # Search mode ranks by similarity alone, so the top ``limit`` is all it needs; recall
    # fuses branches and expands, so it takes a deeper pool.
    k = state["limit"] if state["mode"] == "search" else candidate_pool(state["limit"])
    found = context.store.vector_search(embedding, k, state.get("memory_type"))
    # Brute force returns k rows whatever their score; unrelated memories are not candidates.
    # The relative floor admits only hits close to the best one, so that weak matches are left
    # for the hops and the conversation context to reach (with a reason) instead of entering
    # as direct hits of their own.
    if found and state["mode"] != "search":
        floor = max(floor, max(h.score for h in found) * context.settings.vector_relative_floor)
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
