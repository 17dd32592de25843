"""Gather the direct hits into candidates, then expand them over AssociatedWith (multi-hop)."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.results import engram_candidate
from smriti.nodes.scoring import cosine, hop_relevance, rank_fusion
from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState

# Expansion starts from this many of the best direct hits (and of each hop's results): the
# rest are unlikely to lead anywhere useful. Each hop keeps at most HOP_WIDTH associates,
# the ones passed the most relevance, so two hops never load hundreds of engrams.
HOP_SEEDS = 10
HOP_WIDTH = 30


def load_candidates(
    context: MemoryContext, ids: list[str], hits: dict[str, dict[str, Any]], memory_type: str | None
) -> list[dict[str, Any]]:
    """Engrams with their cues as candidate dicts, dropping other memory types."""
    engrams = [
        e for e in context.store.get_engrams(ids) if memory_type is None or e.memory_type == memory_type
    ]
    cues = context.store.cues_of([e.id for e in engrams]) if engrams else {}
    return [engram_candidate(e, cues.get(e.id, []), hits.get(e.id)) for e in engrams]


# The candidate field behind each fused branch (the keys of scoring.FUSION_WEIGHTS).
SIGNAL_KEYS = {"similarity": "similarity", "text": "text_score", "cue": "cue_score"}


def fill_similarity(candidate: dict[str, Any], query_embedding: list[float] | None) -> None:
    """Similarity for hits found without the vector branch, so every candidate has all signals."""
    if (
        query_embedding is not None
        and candidate.get("embedding") is not None
        and "vector" not in candidate["origins"]
    ):
        candidate["similarity"] = max(0.0, cosine(query_embedding, candidate["embedding"]))


def branch_scores(candidates: list[dict[str, Any]]) -> dict[str, list[float]]:
    """Each signal's positive scores among the direct hits, best first: the ranks fusion uses."""
    return {
        branch: sorted((c[key] for c in candidates if c[key] > 0), reverse=True)
        for branch, key in SIGNAL_KEYS.items()
    }


def score_relevance(candidate: dict[str, Any], ranked: dict[str, list[float]], mode: str) -> None:
    """Relevance: the similarity in search mode, else the rank fusion of the three signals."""
    if mode == "search":
        candidate["relevance"] = candidate["similarity"]
        return
    signals = {branch: candidate[key] for branch, key in SIGNAL_KEYS.items()}
    candidate["relevance"], candidate["ranks"] = rank_fusion(signals, ranked)


@traced("gather")
def gather(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    hits = state.get("hits", {})
    candidates = load_candidates(runtime.context, sorted(hits), hits, state.get("memory_type"))
    for candidate in candidates:
        fill_similarity(candidate, state.get("query_embedding"))
    ranked = branch_scores(candidates)
    for candidate in candidates:
        score_relevance(candidate, ranked, state["mode"])
    candidates.sort(key=lambda c: (-c["relevance"], c["id"]))
    return {
        "candidates": candidates,
        "branch_scores": ranked,
        "_candidates": [{"id": c["id"], "score": c["relevance"]} for c in candidates],
        "_notes": f"{len(candidates)} direct hits fused by rank (similarity, full text, cues)",
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
        widest = sorted(reached, key=lambda i: (-reached[i][0], i))[:HOP_WIDTH]
        new = load_candidates(context, sorted(widest), {}, state.get("memory_type"))
        for candidate in new:
            passed, via, strength = reached[candidate["id"]]
            fill_similarity(candidate, state.get("query_embedding"))
            score_relevance(candidate, state.get("branch_scores", {}), state["mode"])
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
        frontier = sorted(new, key=lambda c: (-c["relevance"], c["id"]))[:HOP_SEEDS]
    hop_ids = [{"id": c["id"], "score": c["relevance"]} for c in candidates if c["hops"]]
    return {
        "candidates": candidates,
        "_candidates": hop_ids,
        "_notes": f"{added} associate(s) reached within {context.settings.max_hops} hop(s)",
    }
