"""Conversation context: the turns next to a relevant turn are relevant too.

A conversation stored turn by turn links each turn to the few before it of the same source
(``associate`` in ``nodes/link.py``: AssociatedWith of type ``same_source``, strength falling
with the distance). In LoCoMo half of the evidence turns that keyword and dense search miss
in their top 5 sit within two turns of one they find: the answer to a question asked in the
turn before, the photo the next turn talks about. :func:`conversation_context` lets the best
candidates pass relevance to their neighbours:

    context(n) = max over the top ``CONTEXT_SEEDS`` candidates p next to n of
                 relevance(p) * strength(p, n) * CONTEXT_WEIGHT
    relevance'(n) = max(relevance(n), context(n))

One store read for the edges and one for the neighbours not yet candidates, whatever the size
of the memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.expand import best_with_ties, fill_similarity, query_vector
from smriti.nodes.search import load_candidates
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.stores.base import Association

CONTEXT_TYPE = "same_source"


def context_relevance(
    seeds: Mapping[str, float], edges: Iterable[Association], weight: float
) -> dict[str, tuple[float, str]]:
    """Neighbour id -> (relevance passed on, the seed it came from), the best seed per neighbour.

    passed = relevance(seed) * strength * ``weight``, over ``same_source`` edges touching a seed
    (either direction); ties go to the smaller seed id so the result never depends on order.
    """
    passed: dict[str, tuple[float, str]] = {}
    for edge in edges:
        if edge.relation_type != CONTEXT_TYPE:
            continue
        for here, there in ((edge.source_id, edge.target_id), (edge.target_id, edge.source_id)):
            if here not in seeds or there == here:
                continue
            value = seeds[here] * edge.strength * weight
            best = passed.get(there)
            if best is None or value > best[0] or (value == best[0] and here < best[1]):
                passed[there] = (value, here)
    return passed


@traced("conversation_context")
def conversation_context(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Raise the neighbours (same source, nearby in time) of the best candidates, see the module doc."""
    context = runtime.context
    settings = context.settings
    candidates = list(state.get("candidates", []))
    if settings.context_weight <= 0 or not candidates:
        return {"_notes": "conversation context off" if candidates else "no candidates"}
    top = best_with_ties(candidates, settings.context_seeds)
    seeds = {c.id: c.relevance for c in top}
    passed = context_relevance(seeds, context.store.neighbours(sorted(seeds)), settings.context_weight)
    by_id = {c.id: c for c in candidates}
    missing = sorted(n for n in passed if n not in by_id)
    query = query_vector(state)
    for candidate in load_candidates(context, missing, {}, state.get("memory_type")):
        fill_similarity(candidate, query)
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
    out.sort(key=lambda c: (-c.relevance, c.id))
    return {
        "candidates": out,
        "_candidates": trace_scores(raised),
        "_notes": f"{len(raised)} neighbour(s) raised, {len(missing)} of them new, from {len(seeds)} seed(s)",
    }
