"""Recall's last steps: score with the profile and keep the top ``limit``, demote superseded
memories (when ``include_superseded`` kept them), reinforce what was recalled, and format the
unified result (docs/tools.md, "The result format").

The result's ``parsed`` (Memory Fabric step 1) words what the query was taken to ask:
``extract_query_cues`` (``nodes/search.py``) computed cues, hints and intent for the search itself;
:func:`parsed_result` only shows them to the caller.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from smriti.errors import StoreFull
from smriti.nodes.candidates import nearest_in_meaning, word_matched
from smriti.nodes.scoring import SIMILARITY, rank, spread_over_episodes
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.text import STOPWORDS, words

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

logger = logging.getLogger(__name__)

# A superseded memory asked for with include_superseded: its score times this, and never above
# the memory that superseded it when both are returned.
SUPERSEDED_PENALTY = 0.5


@traced
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
    ranked = rank(scored)
    moved = ""
    if state["mode"] == "recall":
        ranked, moved = nearest_first(ranked, context.settings.nearest_first_support)
    cap = 0 if state["mode"] == "search" else context.settings.max_per_episode
    top = spread_over_episodes(ranked, state["limit"], cap)
    return {
        "results": top,
        "_candidates": trace_scores(top, "score"),
        "_notes": f"profile={profile.name}; kept {len(top)} of {len(scored)}{moved}",
    }


def word_supported(candidate: Candidate, support: float) -> bool:
    """Whether a candidate's full-text or cue match covers at least ``support`` of the query."""
    return word_matched(candidate) and candidate.coverage >= support


def evidence_against(candidate: Candidate) -> bool:
    """Whether query focus lowered the candidate for being about another named entity or outside
    the time window the query names (not for merely not naming what the query names)."""
    return candidate.focus.get("subject", 1.0) < 1.0 or candidate.focus.get("time", 1.0) < 1.0


def nearest_first(ranked: list[Candidate], support: float) -> tuple[list[Candidate], str]:
    """The memory nearest the query in meaning goes first, unless the first is a word match that
    covers at least ``support`` of the query (NEAREST_FIRST_SUPPORT; 0: off), focus holds
    evidence against the nearest, or a reranker (RERANKER) ordered the candidates. Returns the
    ranking and a note for the trace ("" if unchanged).

    Measured on every shape at once (docs/recall.md, "Never below search at the top"): on notes
    asked in other words the fused first is often a memory that shares a word or an entity with the
    question, or one the bridge or the cross-reference boost raised, where search has the answer
    first; a word match that covers much of the question is real evidence and keeps its place.
    The moved memory takes the first's score, so scores still descend.
    """
    if support <= 0 or not ranked or word_supported(ranked[0], support):
        return ranked, ""
    if any(c.rerank_score is not None for c in ranked):
        return ranked, ""  # a reranker read query and memory together: a better judge of meaning
    nearest = nearest_in_meaning(c for c in ranked if not evidence_against(c))
    if nearest is None or nearest is ranked[0] or nearest.similarity <= 0:
        return ranked, ""
    first = nearest.copy()
    first.score = ranked[0].score  # ranked is best score first: the nearest's was not above it
    first.components = {**nearest.components, "nearest_first": 1.0}
    rest = [c for c in ranked if c is not nearest]
    return [first, *rest], "; the nearest in meaning moved first"


@traced
def demote_superseded(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Rank each superseded memory below the current facts: its score times SUPERSEDED_PENALTY,
    and below the memory that superseded it when that one is returned too.

    Shown in ``explain`` as the score component ``superseded`` (the factor applied).
    """
    results: list[Candidate] = state.get("results", [])
    if not any(c.superseded_by for c in results):
        return {"_notes": "no superseded memory in the results"}
    scores = {c.id: c.score for c in results}
    demoted = []
    for candidate in results:
        item = candidate.copy()
        if item.superseded_by:
            before = item.score
            item.score = before * SUPERSEDED_PENALTY
            newer = scores.get(item.superseded_by)
            if newer is not None and item.score >= newer:
                item.score = max(0.0, newer - 1e-6)
            item.components = {**item.components, "superseded": item.score / before if before else 0.0}
        demoted.append(item)
    demoted.sort(key=lambda c: (-c.score, c.tie))
    shown = [c for c in demoted if c.superseded_by]
    return {
        "results": demoted,
        "_candidates": trace_scores(shown, "score"),
        "_notes": "; ".join(f"{c.id} superseded by {c.superseded_by}: demoted" for c in shown),
    }


@traced
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


def cleaned_query(query: str) -> str:
    """The query's words without stop words and repeats, in order, case kept ("What pagination
    approach did database-engineer recommend?" -> "pagination approach database-engineer recommend")."""
    kept = [w for w in words(query) if w.casefold() not in STOPWORDS]
    return " ".join(dict.fromkeys(kept))


def parsed_result(query: str, parsed: dict[str, Any]) -> dict[str, Any]:
    """``{query, entity_hints, intent}``: the cleaned query (the parser's own when it gives one),
    the entities the query names and its intent."""
    return {
        "query": str(parsed.get("query") or cleaned_query(query)),
        "entity_hints": list(parsed.get("entity_hints", [])),
        "intent": str(parsed.get("intent", "general")),
    }


def format_item(candidate: Candidate, explain: bool) -> dict[str, Any]:
    """One result: {id, text, score, source, timestamp, entities, graph_relations, memory_type,
    cluster_id, metadata} (+ ``components`` with ``explain``).

    The reported ``score`` is clamped to [0, 1], the range the result format promises: a boost
    (the bridge's, the cross-reference's) can lift a ranking score past 1. The results are
    already in ranking order, so clamping changes no order; ``explain`` keeps the unclamped
    value as ``components["raw_score"]``.
    """
    item: dict[str, Any] = {
        "id": candidate.id,
        "text": candidate.text,
        "score": round(min(max(float(candidate.score), 0.0), 1.0), 6),
        "source": candidate.source or "memory",
        "timestamp": candidate.created_at.isoformat(),
        "entities": list(candidate.entities),
        "graph_relations": list(candidate.graph_relations),
        "memory_type": candidate.memory_type,
        "cluster_id": candidate.cluster_id,
        "metadata": {
            "summary": candidate.summary,
            "facts": list(candidate.facts),
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
            "raw_score": round(float(candidate.score), 6),
            "similarity": round(candidate.similarity, 6),
            "text_score": round(candidate.text_score, 6),
            "cue_score": round(candidate.cue_score, 6),
            "relevance": round(candidate.relevance, 6),
            # each branch's rank, as fused into relevance
            **{f"rank_{branch}": rank for branch, rank in candidate.ranks.items()},
            # with FUSION=learned: each feature's share of the model's log-odds (nodes/learned.py)
            **{f"fusion_{name}": round(value, 6) for name, value in candidate.fused.items()},
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


@traced
def format_result(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The unified result the tools return (with each score's components when ``explain``)."""
    result = unified_result(
        state.get("query", ""), state["mode"], state.get("results", []), state.get("explain", False)
    )
    if "parsed" in state:  # recall mode: how the query was read (search and list do not parse it)
        result["parsed"] = parsed_result(state.get("query", ""), state["parsed"])
    return {"result": result, "_notes": f"{result['total_results']} result(s)"}
