"""Query focus: what the parsed query says beyond its words steers relevance.

``parse_query`` yields the entities a question names (``entity_hints``), its ``intent`` and,
when it names a time ("in May 2023", "last week", "yesterday"), a window. The direct branches
only match words; this step turns the rest into three factors on each candidate's relevance:

    entity = (1 - ENTITY_HINT_WEIGHT) + ENTITY_HINT_WEIGHT * share
    intent = 1 when the memory's type suits the intent, else 1 - INTENT_TYPE_WEIGHT
    time   = 1 inside the window (or no window), else 1 - TIME_WINDOW_WEIGHT
    relevance' = relevance * entity * intent * time

``share`` is the idf-weighted share of the hinted entities that the memory is linked to as
cues; only hints the graph knows count, so naming something unknown changes no score. Why
a factor and not a branch: a question that names a person is about that person, and among
memories that match its words equally well the ones about that person are the answers (in
LoCoMo, 96 % of the evidence turns of a question naming one speaker are that speaker's), but
a memory that matches the words much better should still win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.scoring import idf
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.stores.base import normalise_cue_name
from smriti.time_window import TimeWindow, find_time_window

# Which memory types answer which intent (providers/heuristic.query_intent and the LLM's
# ParsedQuery.intent); intents not listed here ("fact", "person", "general") prefer none.
INTENT_TYPES: Mapping[str, frozenset[str]] = {
    "procedure": frozenset({"procedural"}),
    "event": frozenset({"episodic"}),
    "decision": frozenset({"semantic"}),
    "preference": frozenset({"semantic"}),
    "pattern": frozenset({"semantic", "procedural"}),
}


def hint_weights(hints: Sequence[str], counts: Mapping[str, int], total: int) -> dict[str, float]:
    """Normalised hint (as cue names are stored) -> idf, for the hints linked to any memory."""
    return {
        normalise_cue_name(h): idf(counts[h], total) for h in dict.fromkeys(hints) if counts.get(h, 0) > 0
    }


def entity_factor(entities: Sequence[str], weights: Mapping[str, float], weight: float) -> float:
    """(1 - weight) + weight * (idf-weighted share of the hinted entities among ``entities``)."""
    if not weights or weight <= 0:
        return 1.0
    have = set(entities)  # cue names, normalised as stored
    share = sum(w for name, w in weights.items() if name in have) / sum(weights.values())
    return (1.0 - weight) + weight * share


def intent_factor(memory_type: str, intent: str, weight: float) -> float:
    """1 when ``memory_type`` suits ``intent`` (or the intent prefers no type), else 1 - weight."""
    suits = INTENT_TYPES.get(intent)
    return 1.0 if suits is None or memory_type in suits else 1.0 - weight


def time_factor(moment: datetime, window: TimeWindow | None, weight: float) -> float:
    """1 inside the query's time window (or when it names none), else 1 - weight."""
    return 1.0 if window is None or window.contains(moment) else 1.0 - weight


def focus_factors(
    candidate: Candidate,
    hints: Mapping[str, float],
    intent: str,
    window: TimeWindow | None,
    settings: Any,
) -> dict[str, float]:
    """The candidate's three factors (for ``explain``: ``focus_entity``, ``focus_intent``, ``focus_time``)."""
    return {
        "entity": entity_factor(candidate.entities, hints, settings.entity_hint_weight),
        "intent": intent_factor(candidate.memory_type, intent, settings.intent_type_weight),
        "time": time_factor(candidate.created_at, window, settings.time_window_weight),
    }


@traced("focus")
def focus(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Scale each candidate's relevance by its entity, intent and time factors (see the module)."""
    context = runtime.context
    parsed = state.get("parsed", {})
    hints = list(parsed.get("entity_hints", []))
    weights = (
        hint_weights(hints, context.store.cue_engram_counts(hints), context.store.count_engrams())
        if hints
        else {}
    )
    intent = str(parsed.get("intent", "general"))
    window = find_time_window(state.get("query", ""), context.clock())
    candidates = []
    for candidate in state.get("candidates", []):
        item = candidate.copy()
        item.focus = focus_factors(item, weights, intent, window, context.settings)
        for factor in item.focus.values():
            item.relevance *= factor
        candidates.append(item)
    candidates.sort(key=lambda c: (-c.relevance, c.id))
    return {
        "candidates": candidates,
        "_candidates": trace_scores(candidates),
        "_notes": f"entities={sorted(weights)} intent={intent} window={window}",
    }
