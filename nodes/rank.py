"""Recall's last steps: score with the profile and keep the top ``limit``, reinforce what was
recalled, and format the unified result (DESIGN.md, Memory Fabric).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langgraph.runtime import Runtime

from smriti.errors import ProviderError, StoreFull
from smriti.nodes.parsed import parsed_result
from smriti.nodes.scoring import SIMILARITY, rank
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced

logger = logging.getLogger(__name__)


def rerank_order(candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
    """The ``top_n`` candidates most likely to end on top: the reranker reads these only."""
    return sorted(candidates, key=lambda c: (-c.relevance, c.id))[:top_n]


@traced("rerank")
def rerank(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """With a reranker (RERANKER), blend its score into the top candidates' relevance:

        relevance' = (1 - RERANK_WEIGHT) * relevance + RERANK_WEIGHT * reranker score

    A failing reranker is skipped for this recall (a warning, a trace note), never an error.
    """
    context = runtime.context
    reranker = context.reranker
    candidates = state.get("candidates", [])
    if reranker is None or context.settings.reranker == "none" or not candidates:
        return {"_notes": "no reranker"}
    settings = context.settings
    top = rerank_order(candidates, settings.rerank_top_n)
    try:
        scores = reranker.score(state.get("query", ""), [c.text for c in top])
    except ProviderError as error:
        logger.warning("recall not reranked: %s", error)
        return {"_notes": f"reranker failed, pipeline order kept: {error}"}
    weight = settings.rerank_weight
    new = {}
    for candidate, value in zip(top, scores, strict=True):
        item = candidate.copy()
        item.rerank_score = value
        item.relevance = (1 - weight) * candidate.relevance + weight * value
        new[item.id] = item
    out = [new.get(c.id, c) for c in candidates]
    return {
        "candidates": out,
        "_candidates": trace_scores(sorted(new.values(), key=lambda c: -c.relevance)),
        "_notes": f"{reranker.name} reranked {len(new)} candidate(s)",
    }


@traced("score")
def score(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Score every candidate with the configured profile (composite or Memory Fabric), keep the top.

    In ``search`` mode the score is the cosine similarity alone: that mode promises a
    fast, shallow vector ranking.
    """
    context = runtime.context
    profile = SIMILARITY if state["mode"] == "search" else context.scoring
    now = context.clock()
    seed = state.get("seed_cluster", -1)
    scored = []
    for candidate in state.get("candidates", []):
        item = candidate.copy()
        item.score, item.components = profile.score(item, now, seed)
        scored.append(item)
    top = rank(scored)[: state["limit"]]
    return {
        "results": top,
        "_candidates": trace_scores(top, "score"),
        "_notes": f"profile={profile.name}; kept {len(top)} of {len(scored)}",
    }


@traced("reinforce")
def reinforce(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Recalled memories get stronger: access_count + 1, last_accessed_at = now, decay_factor up."""
    context = runtime.context
    results = state.get("results", [])
    if state["mode"] == "list" or not results:
        return {"_notes": "nothing reinforced"}
    now = context.clock()
    try:
        written = context.reinforcer.reinforce([r.id for r in results], now)
    except StoreFull as error:  # a full disk must not stop recall: answer, unreinforced
        logger.warning("recall not reinforced: %s", error)
        return {"_notes": "not reinforced: the disk is full"}
    boost = context.settings.reinforce_boost
    # Queued behind another writer: show the values it will write.
    after = (
        written
        if written is not None
        else {r.id: (r.access_count + 1, min(1.0, r.decay_factor + boost)) for r in results}
    )
    refreshed = []
    for r in results:
        if r.id in after:  # a memory forgotten meanwhile keeps the values it was read with
            access_count, decay_factor = after[r.id]
            r = dataclasses.replace(
                r, access_count=access_count, decay_factor=decay_factor, last_accessed_at=now
            )
        refreshed.append(r)
    note = f"reinforced {len(after)} memories" + (" (queued behind a writer)" if written is None else "")
    return {"results": refreshed, "_notes": note}


def format_item(candidate: Candidate, explain: bool) -> dict[str, Any]:
    """One result: {id, text, score, source, timestamp, entities, graph_relations, memory_type,
    cluster_id, metadata} (+ ``components`` with ``explain``)."""
    item: dict[str, Any] = {
        "id": candidate.id,
        "text": candidate.text,
        "score": round(float(candidate.score), 6),
        "source": candidate.source or "memory",
        "timestamp": candidate.created_at.isoformat(),
        "entities": list(candidate.entities),
        "graph_relations": list(candidate.graph_relations),
        "memory_type": candidate.memory_type,
        "cluster_id": candidate.cluster_id,
        "metadata": {
            "summary": candidate.summary,
            "tags": candidate.tags,
            "importance": candidate.importance,
            "access_count": candidate.access_count,
            "decay_factor": round(candidate.decay_factor, 6),
            "last_accessed_at": candidate.last_accessed_at.isoformat(),
            "retrieved_by": list(candidate.origins),
            "hops": candidate.hops,
            "via": candidate.via,
            "matched_cues": list(candidate.matched_cues),
            "cross_validated": candidate.cross_validated,
            "merged_ids": list(candidate.merged_ids),
            "boosted": candidate.boosted,
        },
    }
    if candidate.superseded_by:  # a correction replaced it: shown only with include_superseded
        item["superseded_by"] = candidate.superseded_by
    if explain:
        item["components"] = {
            "similarity": round(candidate.similarity, 6),
            "text_score": round(candidate.text_score, 6),
            "cue_score": round(candidate.cue_score, 6),
            "relevance": round(candidate.relevance, 6),
            # each branch's rank, as fused into relevance
            **{f"rank_{branch}": rank for branch, rank in candidate.ranks.items()},
            **{f"focus_{name}": round(value, 6) for name, value in candidate.focus.items()},
            **(
                {"rerank_score": round(candidate.rerank_score, 6)}
                if candidate.rerank_score is not None
                else {}
            ),
            **{k: round(v, 6) for k, v in candidate.components.items()},
        }
    return item


def unified_result(query: str, mode: str, candidates: Sequence[Candidate], explain: bool) -> dict[str, Any]:
    """{query, mode, total_results, sources, retrieval_paths, results}.

    As the Memory Fabric specification has it, ``sources`` counts each result once, by its
    ``source`` (so the counts add up to ``total_results``); ``retrieval_paths`` counts how many
    results each path found (cue, fulltext, vector, hop...), where a result found by two paths
    counts twice.
    """
    items = [format_item(c, explain) for c in candidates]
    sources = Counter(item["source"] for item in items)
    paths = Counter(origin for c in candidates for origin in (c.origins or [mode]))
    return {
        "query": query,
        "mode": mode,
        "total_results": len(candidates),
        "sources": dict(sorted(sources.items())),
        "retrieval_paths": dict(sorted(paths.items())),
        "results": items,
    }


@traced("format")
def format_result(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The unified result the tools return (with each score's components when ``explain``)."""
    result = unified_result(
        state.get("query", ""), state["mode"], state.get("results", []), state.get("explain", False)
    )
    if "parsed" in state:  # recall mode: how the query was read (search and list do not parse it)
        result["parsed"] = parsed_result(state.get("query", ""), state["parsed"])
    return {"result": result, "_notes": f"{result['total_results']} result(s)"}
