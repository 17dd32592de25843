"""Gather the direct hits into candidates, then expand them over AssociatedWith (multi-hop)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.results import engram_candidate
from smriti.nodes.scoring import cosine, fuse_relevance, hop_relevance
from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState

# Expansion starts from this many of the best direct hits: the rest are unlikely to lead
# anywhere useful, and each seed costs a neighbour query.
HOP_SEEDS = 10


def load_candidates(
    context: MemoryContext, ids: list[str], hits: dict[str, dict[str, Any]], memory_type: str | None
) -> list[dict[str, Any]]:
    """Engrams with their cues as candidate dicts, dropping other memory types."""
    engrams = [
        e for e in context.store.get_engrams(ids) if memory_type is None or e.memory_type == memory_type
    ]
    cues = context.store.cues_of([e.id for e in engrams]) if engrams else {}
    return [engram_candidate(e, cues.get(e.id, []), hits.get(e.id)) for e in engrams]


def score_relevance(candidate: dict[str, Any], query_embedding: list[float] | None, mode: str) -> None:
    """Fill in similarity for hits found without the vector branch, then the fused relevance."""
    if (
        query_embedding is not None
        and candidate.get("embedding") is not None
        and "vector" not in candidate["origins"]
    ):
        candidate["similarity"] = max(0.0, cosine(query_embedding, candidate["embedding"]))
    if mode == "search":
        candidate["relevance"] = candidate["similarity"]
    else:
        candidate["relevance"] = fuse_relevance(
            candidate["similarity"], candidate["text_score"], candidate["cue_score"]
        )


@traced("gather")
def gather(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    hits = state.get("hits", {})
    candidates = load_candidates(runtime.context, sorted(hits), hits, state.get("memory_type"))
    for candidate in candidates:
        score_relevance(candidate, state.get("query_embedding"), state["mode"])
    candidates.sort(key=lambda c: (-c["relevance"], c["id"]))
    return {
        "candidates": candidates,
        "_candidates": [{"id": c["id"], "score": c["relevance"]} for c in candidates],
        "_notes": f"{len(candidates)} direct hits fused (similarity, full text, cues)",
    }


@traced("multi_hop")
def multi_hop(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Breadth-first over AssociatedWith from the best direct hits, up to MAX_HOPS.

    A reached engram gets relevance max(own, parent * strength); the hop-depth penalty
    and the cross-cluster penalty are applied by the composite score.
    """
    context = runtime.context
    candidates = list(state.get("candidates", []))
    known = {c["id"]: c for c in candidates}
    frontier = [c for c in candidates[:HOP_SEEDS]]
    added = 0
    for depth in range(1, context.settings.max_hops + 1):
        if not frontier:
            break
        by_id = {c["id"]: c for c in frontier}
        reached: dict[str, tuple[float, str, float]] = {}  # id -> (passed relevance, via, strength)
        for edge in context.store.neighbours(list(by_id)):
            for here, there in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
                if here in by_id and there not in known:
                    passed = by_id[here]["relevance"] * edge.strength
                    if passed > reached.get(there, (-1.0, "", 0.0))[0]:
                        reached[there] = (passed, here, edge.strength)
        new = load_candidates(context, sorted(reached), {}, state.get("memory_type"))
        for candidate in new:
            passed, via, strength = reached[candidate["id"]]
            score_relevance(candidate, state.get("query_embedding"), state["mode"])
            own = candidate["relevance"]
            candidate.update(
                hops=depth,
                via=via,
                origins=["hop"],
                relevance=hop_relevance(own, known[via]["relevance"], strength),
            )
            known[candidate["id"]] = candidate
        candidates.extend(new)
        added += len(new)
        frontier = new
    hop_ids = [{"id": c["id"], "score": c["relevance"]} for c in candidates if c["hops"]]
    return {
        "candidates": candidates,
        "_candidates": hop_ids,
        "_notes": f"{added} associate(s) reached within {context.settings.max_hops} hop(s)",
    }
