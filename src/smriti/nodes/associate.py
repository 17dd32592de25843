"""Recall's associative steps: the candidates reach memories the query itself does not match.

Four ways, in pipeline order:

1. :func:`activate`, the graph branch (off by default, ``GRAPH_ACTIVATION``): spreading
   activation from the best hits and the query's cues over the local cue graph, fused by rank
   as a fourth branch. The engine, Personalized PageRank over a graph built around the query,
   is ``nodes/pagerank.py``.
2. :func:`conversation_context`: the turns next to a relevant turn are relevant too.
3. :func:`multi_hop`: breadth-first over AssociatedWith (similar memories, neighbouring turns).
4. :func:`episode_context`: a memory's episode (its source and day, a conversation's session)
   holds evidence too: the more of the episode is relevant, the more relevant each of its memories.

**Conversation context.** A conversation stored turn by turn links each turn to the few before it
of the same source (``associate`` in ``nodes/link.py``: AssociatedWith of type ``same_source``,
strength falling with the distance). In LoCoMo half of the evidence turns that keyword and dense search miss
in their top 5 sit within two turns of one they find: the answer to a question asked in the
turn before, the photo the next turn talks about. :func:`conversation_context` lets the best
candidates pass relevance to their neighbours:

    context(n) = max over the top ``CONTEXT_SEEDS`` candidates p next to n of
                 relevance(p) * strength(p, n) * CONTEXT_WEIGHT * (CONTEXT_BACKWARD if n is before p)
    relevance'(n) = max(relevance(n), context(n))

One store read for the edges and one for the neighbours not yet candidates, whatever the size
of the memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from smriti.nodes.candidates import (
    best_with_ties,
    load_candidates,
    query_vector,
    score_relevance,
)
from smriti.nodes.pagerank import spread
from smriti.nodes.scoring import episode_evidence, episode_of, episode_relevance, hop_relevance
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.stores.base import Association

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

CONTEXT_TYPE = "same_source"

# Expansion starts from this many of the best direct hits (and of each hop's results): the
# rest are unlikely to lead anywhere useful. Each hop keeps at most HOP_WIDTH associates,
# the ones passed the most relevance, so two hops never load hundreds of engrams.
HOP_SEEDS = 10
HOP_WIDTH = 30


@traced
def activate(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The graph branch: spread activation from the query's cues and best hits, fuse its ranks."""
    context = runtime.context
    settings = context.settings
    candidates = list(state.get("candidates", []))
    if not settings.graph_activation or not candidates:
        return {"_notes": "graph activation off" if candidates else "no direct hits to spread from"}
    # Only the best hits seed and shape the graph: they do not depend on how deep each branch
    # searched (the limit), so neither does the activation.
    query_cues = list(dict.fromkeys(state.get("parsed", {}).get("cues", [])))
    seeds = best_with_ties(candidates, settings.activation_seeds)
    graph, summary = spread(context.store, settings, seeds, query_cues)
    known = {c.id for c in candidates}
    by_score = sorted(graph, key=lambda e: (-graph[e], e))
    reached = [e for e in by_score if e not in known][: settings.activation_new]
    query = query_vector(state)
    new = load_candidates(context, sorted(reached), {}, state.get("memory_type"), query)
    for candidate in new:
        candidate.origins = ["graph"]
    everything = [c.copy() for c in candidates] + new
    ranked = {**state.get("branch_scores", {}), "graph": [graph[e] for e in by_score]}
    for candidate in everything:
        candidate.graph_score = graph.get(candidate.id, 0.0)
        if candidate.graph_score > 0 and "graph" not in candidate.origins:
            candidate.origins = [*candidate.origins, "graph"]
        score_relevance(candidate, ranked, state["mode"], context.fusion)
    everything.sort(key=lambda c: (-c.relevance, c.tie))
    return {
        "candidates": everything,
        "branch_scores": ranked,
        "_candidates": [{"id": e, "score": graph[e]} for e in by_score],
        "_notes": f"{summary}; {len(new)} new engram(s) activated",
    }


# ----------------------------------------------------------------------------- conversation_context
def context_relevance(
    seeds: Mapping[str, float], edges: Iterable[Association], weight: float, backward: float = 1.0
) -> dict[str, tuple[float, str]]:
    """Neighbour id -> (relevance passed on, the seed it came from), the best seed per neighbour.

    passed = relevance(seed) * strength * ``weight``, times ``backward`` for the turn before the
    seed (a ``same_source`` edge runs from the later memory to the earlier one): an answer
    follows its question, so the turn after a relevant one is the likelier evidence. Over
    ``same_source`` edges touching a seed; ties go to the smaller seed id so the result never
    depends on order.
    """
    passed: dict[str, tuple[float, str]] = {}
    for edge in edges:
        if edge.relation_type != CONTEXT_TYPE:
            continue
        later, earlier = edge.source_id, edge.target_id
        for here, there, factor in ((earlier, later, 1.0), (later, earlier, backward)):
            if here not in seeds or there == here:
                continue
            value = seeds[here] * edge.strength * weight * factor
            best = passed.get(there)
            if best is None or value > best[0] or (value == best[0] and here < best[1]):
                passed[there] = (value, here)
    return passed


@traced
def conversation_context(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Raise the neighbours (same source, nearby in time) of the best candidates, see the module doc."""
    context = runtime.context
    settings = context.settings
    candidates = list(state.get("candidates", []))
    if settings.context_weight <= 0 or not candidates:
        return {"_notes": "conversation context off" if candidates else "no candidates"}
    top = best_with_ties(candidates, settings.context_seeds)
    seeds = {c.id: c.relevance for c in top}
    edges = context.store.neighbours(sorted(seeds))
    passed = context_relevance(seeds, edges, settings.context_weight, settings.context_backward)
    by_id = {c.id: c for c in candidates}
    missing = sorted(n for n in passed if n not in by_id)
    query = query_vector(state)
    for candidate in load_candidates(context, missing, {}, state.get("memory_type"), query):
        candidate.origins = []
        by_id[candidate.id] = candidate
        candidates.append(candidate)
    raised: list[Candidate] = []
    out = []
    for candidate in candidates:
        value, via = passed.get(candidate.id, (0.0, ""))
        if settings.context_additive and value > 0:
            value += candidate.relevance
        if value > candidate.relevance:
            candidate = candidate.copy()
            candidate.relevance = value
            candidate.origins = [*candidate.origins, "context"]
            if candidate.via is None:
                candidate.via = via
            raised.append(candidate)
        out.append(candidate)
    out.sort(key=lambda c: (-c.relevance, c.tie))
    return {
        "candidates": out,
        "_candidates": trace_scores(raised),
        "_notes": f"{len(raised)} neighbour(s) raised, {len(missing)} of them new, from {len(seeds)} seed(s)",
    }


# ----------------------------------------------------------------------------- multi-hop
@traced
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
        new = load_candidates(context, sorted(widest), {}, state.get("memory_type"), query)
        for candidate in new:
            _, via, strength = reached[candidate.id]
            score_relevance(candidate, state.get("branch_scores", {}), state["mode"], context.fusion)
            candidate.hops, candidate.via, candidate.origins = depth, via, ["hop"]
            candidate.relevance = hop_relevance(candidate.relevance, known[via].relevance, strength)
            known[candidate.id] = candidate
        candidates.extend(new)
        added += len(new)
        frontier = sorted(new, key=lambda c: (-c.relevance, c.tie))[:HOP_SEEDS]
    return {
        "candidates": candidates,
        "_candidates": trace_scores([c for c in candidates if c.hops]),
        "_notes": f"{added} associate(s) reached within {context.settings.max_hops} hop(s)",
    }


# ----------------------------------------------------------------------------- episodes
@traced
def episode_context(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Raise each candidate by the evidence of its episode (see :func:`episode_relevance`)."""
    settings = runtime.context.settings
    candidates = list(state.get("candidates", []))
    if settings.episode_weight <= 0 or not candidates:
        return {"_notes": "episodes off" if candidates else "no candidates"}
    evidence = episode_evidence(candidates, settings.episode_evidence)
    best = max(evidence.values())
    out = []
    for candidate in candidates:
        candidate = candidate.copy()
        candidate.relevance = episode_relevance(
            candidate.relevance, evidence[episode_of(candidate)], best, settings.episode_weight
        )
        out.append(candidate)
    out.sort(key=lambda c: (-c.relevance, c.tie))
    strongest = sorted(evidence.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return {
        "candidates": out,
        "_candidates": trace_scores(out),
        "_notes": f"{len(evidence)} episode(s); strongest: "
        + ", ".join(f"{source or '-'} {day} ({value:.2f})" for (source, day), value in strongest),
    }
