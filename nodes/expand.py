"""Recall's middle: gather the direct hits into candidates (rank fusion), expand them over
AssociatedWith (multi-hop), and find the seed cluster the query is about.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from smriti.nodes.scoring import DEFAULT_FUSION, Fusion, cosine, fused_relevance, hop_relevance
from smriti.nodes.search import load_candidates
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.stores.base import NO_CLUSTER

# Expansion starts from this many of the best direct hits (and of each hop's results): the
# rest are unlikely to lead anywhere useful. Each hop keeps at most HOP_WIDTH associates,
# the ones passed the most relevance, so two hops never load hundreds of engrams.
HOP_SEEDS = 10
HOP_WIDTH = 30

# The candidate attribute behind each fused branch (the keys of scoring.FUSION_WEIGHTS).
SIGNALS = {"similarity": "similarity", "text": "text_score", "cue": "cue_score", "graph": "graph_score"}


def query_vector(state: RecallState) -> np.ndarray | None:
    """The query embedding as a float32 array (converted once per node, not per candidate)."""
    embedding = state.get("query_embedding")
    return None if embedding is None else np.asarray(embedding, dtype=np.float32)


def fill_similarity(candidate: Candidate, query_embedding: Sequence[float] | np.ndarray | None) -> None:
    """Similarity for hits found without the vector branch, so every candidate has all signals."""
    if query_embedding is not None and candidate.embedding is not None and "vector" not in candidate.origins:
        candidate.similarity = max(0.0, cosine(query_embedding, candidate.embedding))


def branch_scores(candidates: Iterable[Candidate]) -> dict[str, list[float]]:
    """Each signal's positive scores among the direct hits, best first: the ranks fusion uses."""
    candidates = list(candidates)
    return {
        branch: sorted((v for c in candidates if (v := getattr(c, attr)) > 0), reverse=True)
        for branch, attr in SIGNALS.items()
    }


def score_relevance(
    candidate: Candidate, ranked: dict[str, list[float]], mode: str, fusion: Fusion = DEFAULT_FUSION
) -> None:
    """Relevance: the similarity in search mode, else the fusion of the branch signals (ranks and scores)."""
    if mode == "search":
        candidate.relevance = candidate.similarity
        return
    signals = {branch: getattr(candidate, attr) for branch, attr in SIGNALS.items()}
    candidate.relevance, candidate.ranks = fused_relevance(signals, ranked, fusion)


def best_with_ties(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """The ``n`` most relevant candidates, and every other as relevant as the ``n``-th.

    Which of several equally relevant candidates made a cut would otherwise depend on their
    ids (random), and a stage seeded by them would rank the same memories differently per store.
    """
    ordered = sorted(candidates, key=lambda c: (-c.relevance, c.id))
    if n <= 0:
        return []
    if len(ordered) <= n:
        return ordered
    floor = ordered[n - 1].relevance
    return [c for c in ordered if c.relevance >= floor]


def seed_cluster(cluster_ids: Iterable[int]) -> int:
    """The most common cluster among the direct hits of a recall, or -1.

    Negative ids (unclustered) are ignored; ties go to the smallest cluster id.
    """
    counts = Counter(c for c in cluster_ids if c is not None and c >= 0)
    if not counts:
        return NO_CLUSTER
    return min(counts, key=lambda c: (-counts[c], c))


@traced("gather")
def gather(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Load the engrams the branches hit and fuse their signals into one relevance."""
    hits = state.get("hits", {})
    candidates = load_candidates(runtime.context, sorted(hits), hits, state.get("memory_type"))
    query = query_vector(state)
    for candidate in candidates:
        fill_similarity(candidate, query)
    ranked = branch_scores(candidates)
    for candidate in candidates:
        score_relevance(candidate, ranked, state["mode"], runtime.context.fusion)
    candidates.sort(key=lambda c: (-c.relevance, c.id))
    return {
        "candidates": candidates,
        "branch_scores": ranked,
        "_candidates": trace_scores(candidates),
        "_notes": f"{len(candidates)} direct hits fused by rank (similarity, full text, cues)",
    }


@traced("multi_hop")
def multi_hop(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Breadth-first over AssociatedWith from the best direct hits, up to MAX_HOPS.

    A reached engram gets relevance max(own, parent * strength); the hop-depth penalty
    and the cross-cluster penalty are applied by the scoring profile.
    """
    context = runtime.context
    candidates = list(state.get("candidates", []))
    known = {c.id: c for c in candidates}
    frontier = candidates[:HOP_SEEDS]
    query = query_vector(state)
    added = 0
    for depth in range(1, context.settings.max_hops + 1):
        if not frontier:
            break
        by_id = {c.id: c for c in frontier}
        reached: dict[str, tuple[float, str, float]] = {}  # id -> (passed relevance, via, strength)
        for edge in context.store.neighbours(list(by_id)):
            for here, there in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
                if here in by_id and there not in known:
                    passed = by_id[here].relevance * edge.strength
                    if passed > reached.get(there, (-1.0, "", 0.0))[0]:
                        reached[there] = (passed, here, edge.strength)
        widest = sorted(reached, key=lambda i: (-reached[i][0], i))[:HOP_WIDTH]
        new = load_candidates(context, sorted(widest), {}, state.get("memory_type"))
        for candidate in new:
            _, via, strength = reached[candidate.id]
            fill_similarity(candidate, query)
            score_relevance(candidate, state.get("branch_scores", {}), state["mode"], context.fusion)
            candidate.hops, candidate.via, candidate.origins = depth, via, ["hop"]
            candidate.relevance = hop_relevance(candidate.relevance, known[via].relevance, strength)
            known[candidate.id] = candidate
        candidates.extend(new)
        added += len(new)
        frontier = sorted(new, key=lambda c: (-c.relevance, c.id))[:HOP_SEEDS]
    return {
        "candidates": candidates,
        "_candidates": trace_scores([c for c in candidates if c.hops]),
        "_notes": f"{added} associate(s) reached within {context.settings.max_hops} hop(s)",
    }


@traced("seed_cluster")
def find_seed_cluster(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The most common cluster among the direct hits (the topic the query is about)."""
    seed = seed_cluster(c.cluster_id for c in state.get("candidates", []) if not c.hops)
    return {"seed_cluster": seed, "_notes": f"seed cluster {seed}" if seed >= 0 else "no seed cluster"}
