"""Cluster-aware composite scoring, top-k, reinforcement and the final result."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.results import unified_result
from smriti.nodes.scoring import (
    CompositeWeights,
    FabricWeights,
    cluster_factor,
    composite_score,
    fabric_score,
    hop_factor,
    rank,
    recency,
    shortlist,
    source_authority,
)
from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState


def _now(runtime: Runtime[MemoryContext]):
    return runtime.context.clock()


@traced("seed_cluster")
def find_seed_cluster(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The most common cluster among the direct hits (the topic the query is about)."""
    from smriti.nodes.cluster import seed_cluster

    direct = [c["cluster_id"] for c in state.get("candidates", []) if not c["hops"]]
    seed = seed_cluster(direct)
    return {"seed_cluster": seed, "_notes": f"seed cluster {seed}" if seed >= 0 else "no seed cluster"}


def score_bounds(candidate: dict[str, Any], seed: int, settings: Any) -> tuple[float, float]:
    """The lowest and highest final score a candidate can still get, before dedupe and boost.

    Composite: relevance * hop * cluster times between ws (no recency, importance or decay)
    and ws + wr + wi + wd (all of them), the upper bound also times the boost factor.
    Memory Fabric: recency and authority at their extremes (authority 0.5 to 1).
    """
    hop = hop_factor(candidate["hops"], settings.hop_penalty)
    cluster = cluster_factor(candidate["hops"], candidate["cluster_id"], seed, settings.cross_cluster_penalty)
    relevance = candidate["relevance"] * hop * cluster
    boost = max(1.0, settings.memory_fabric_boost_factor)
    if settings.scoring_profile == "fabric":
        authority_floor = settings.fabric_weight_authority * 0.5 * hop * cluster
        low = settings.fabric_weight_relevance * relevance + authority_floor
        high = (settings.fabric_weight_recency + settings.fabric_weight_authority) * hop * cluster
        return low, high + settings.fabric_weight_relevance * relevance * boost
    total = (
        settings.score_weight_similarity
        + settings.score_weight_recency
        + settings.score_weight_importance
        + settings.score_weight_decay
    )
    return relevance * settings.score_weight_similarity, relevance * total * boost


@traced("shortlist")
def shortlist_candidates(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Drop candidates that cannot reach the top ``limit`` whatever dedupe and boost do.

    Keeps twice the limit as a margin, since dedupe may merge some of the best ones.
    """
    candidates = state.get("candidates", [])
    seed = state.get("seed_cluster", -1)
    settings = runtime.context.settings
    keep = shortlist([score_bounds(c, seed, settings) for c in candidates], 2 * state["limit"])
    kept = [candidates[i] for i in keep]
    return {
        "candidates": kept,
        "_candidates": [{"id": c["id"], "score": c["relevance"]} for c in kept],
        "_notes": f"{len(kept)} of {len(candidates)} candidates can still reach the top {state['limit']}",
    }


@traced("score")
def score(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Composite (or Memory Fabric) score of every candidate, then the top ``limit``.

    In ``search`` mode the score is the cosine similarity alone: that mode promises a
    fast, shallow vector ranking.
    """
    settings = runtime.context.settings
    now = _now(runtime)
    seed = state.get("seed_cluster", -1)
    composite = CompositeWeights(
        settings.score_weight_similarity,
        settings.score_weight_recency,
        settings.score_weight_importance,
        settings.score_weight_decay,
    )
    fabric = FabricWeights(
        settings.fabric_weight_recency, settings.fabric_weight_relevance, settings.fabric_weight_authority
    )
    scored = []
    for candidate in state.get("candidates", []):
        item = dict(candidate)
        if state["mode"] == "search":
            item["score"], item["components"] = item["relevance"], {}
        else:
            # Recency is the memory's own age; use (access) reaches the score through decay_factor,
            # which recall reinforces and consolidation decays since the last access. Counting the
            # last access here too made every recall boost its results for the next query
            # (2-3 points of LoCoMo recall@10 lost to that feedback alone).
            fresh = recency(item["created_at"], now, settings.recency_half_life_days)
            hop = hop_factor(item["hops"], settings.hop_penalty)
            cluster = cluster_factor(item["hops"], item["cluster_id"], seed, settings.cross_cluster_penalty)
            if settings.scoring_profile == "fabric":
                authority = source_authority(item.get("cross_validated", False), item.get("boosted", False))
                item["score"], item["components"] = fabric_score(
                    item["relevance"], fresh, authority, fabric, hop, cluster
                )
            else:
                item["score"], item["components"] = composite_score(
                    item["relevance"],
                    fresh,
                    item["importance"],
                    item["decay_factor"],
                    composite,
                    hop,
                    cluster,
                )
        if state["mode"] != "search":
            # The cross-reference boost can lift relevance to the boost factor; dividing by
            # that ceiling keeps scores in [0, 1] without changing the order.
            item["score"] /= max(1.0, settings.memory_fabric_boost_factor)
        scored.append(item)
    top = rank(scored)[: state["limit"]]
    return {
        "results": top,
        "_candidates": [{"id": c["id"], "score": c["score"]} for c in top],
        "_notes": f"profile={settings.scoring_profile if state['mode'] != 'search' else 'similarity'}; "
        f"kept {len(top)} of {len(scored)}",
    }


@traced("list_recent")
def list_recent(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Mode list: the most recently accessed memories, no search, no reinforcement."""
    from smriti.nodes.hops import load_candidates

    engrams = runtime.context.store.list_recent(state["limit"], state.get("memory_type"))
    hits = {e.id: {"origins": ["list"]} for e in engrams}
    candidates = load_candidates(runtime.context, [e.id for e in engrams], hits, state.get("memory_type"))
    now = _now(runtime)
    half_life = runtime.context.settings.recency_half_life_days
    for candidate in candidates:
        candidate["score"] = recency(candidate["last_accessed_at"], now, half_life)
    return {
        "results": candidates,
        "_candidates": [{"id": c["id"], "score": c["score"]} for c in candidates],
        "_notes": f"{len(candidates)} most recently accessed",
    }


@traced("reinforce")
def reinforce(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Recalled memories get stronger: access_count + 1, last_accessed_at = now, decay_factor up."""
    context = runtime.context
    results = state.get("results", [])
    if state["mode"] == "list" or not results:
        return {"_notes": "nothing reinforced"}
    now = _now(runtime)
    with context.write_lock:
        after = context.store.reinforce([r["id"] for r in results], now, context.settings.reinforce_boost)
    refreshed = []
    for r in results:
        if r["id"] in after:  # a memory forgotten meanwhile keeps the values it was read with
            access_count, decay_factor = after[r["id"]]
            r = {**r, "access_count": access_count, "decay_factor": decay_factor, "last_accessed_at": now}
        refreshed.append(r)
    return {"results": refreshed, "_notes": f"reinforced {len(after)} memories"}


@traced("format")
def format_result(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    result = unified_result(
        state.get("query", ""), state["mode"], state.get("results", []), state.get("explain", False)
    )
    return {"result": result, "_notes": f"{result['total_results']} result(s)"}
