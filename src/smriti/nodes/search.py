"""Recall's first steps: validate, parse the query, the three direct branches, gather; and list mode.

validate routes by mode: ``list`` ends here with the most recently accessed memories;
``search`` runs :func:`vector_search` alone; ``recall`` parses the query into cues and runs
:func:`cue_traverse`, :func:`vector_search` and :func:`fulltext_search` in parallel. Each
branch writes its signals into ``hits`` (merged per engram id); :func:`gather` loads them as
candidates and fuses their signals into one relevance (the formula is ``nodes/scoring.py``'s).
The helpers that load and score candidates (load_candidates, query_vector, fill_similarity,
score_relevance, best_with_ties) are ``nodes/candidates.py``'s: the later steps that add
candidates use them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from smriti.nodes.candidates import (
    SIGNALS,
    lexical_coverage,
    load_candidates,
    query_vector,
    score_relevance,
    word_matched,
)
from smriti.nodes.scoring import cue_score, hub_ceiling, idf, recency
from smriti.nodes.state import Candidate, Hit, MemoryContext, RecallState, trace_scores, traced
from smriti.stores.base import normalise_cue_name
from smriti.text import light_stem
from smriti.validators import check_recall, input_is_checked

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

# What a caller may give the recall graph (validators.check_recall's arguments).
RECALL_ARGUMENTS = ("query", "limit", "mode", "memory_type", "explain", "include_superseded")


# Keyword hits scoring below this share of the best one are not hits (scores are normalised
# to the best, so this is relative): see fulltext_search.
TEXT_MIN_SHARE = 0.05


def candidate_pool(limit: int) -> int:
    """How many hits each direct branch returns: generous, since fusion and hops re-rank them.

    30 for the usual limits (5-10): 50 ranked every shape the same (held out within 0.4 points of
    first, R@5 and R@10; docs/recall.md, step 3) and cost a fifth to a quarter more of a recall
    at 10k, each candidate being loaded, weighed and focused."""
    return max(3 * limit, 30)


@traced
def validate_recall(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Check the request before anything is read (``validators.check_recall``), unless its caller
    already did (``validators.checked_input``: the MCP tools, the CLI, ``Memory``); an empty
    query is mode ``list``."""
    if input_is_checked():
        request: dict[str, Any] = {}
        mode = state["mode"]
    else:
        raw = {key: state[key] for key in RECALL_ARGUMENTS if key in state}  # type: ignore[literal-required]
        request = dict(check_recall(max_results=runtime.context.settings.memory_fabric_max_results, **raw))
        mode = request["mode"]
    return {**request, "_notes": f"mode={mode}"}


@traced
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


@traced
def extract_query_cues(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Cues, entity hints and intent of the query (LLM when configured, else the heuristic)."""
    from smriti.providers.analysis import parse_query

    data = parse_query(runtime.context.llm, state["query"]).model_dump()
    return {
        "parsed": data,
        "_notes": f"cues={data['cues']} entity_hints={data['entity_hints']} intent={data['intent']}",
    }


def cue_forms(cues: Sequence[str]) -> dict[str, str]:
    """Each name a query cue may have in the store -> the query cue (both normalised).

    Offline keyword cues are lemmas now (``move``); memories analysed before are linked to the
    stems search uses (``mov``). Looking a cue up under both keeps those memories reachable
    through the graph, and the two forms count as one cue (one share of the score, one idf).
    """
    forms: dict[str, str] = {}
    for cue in cues:
        name = normalise_cue_name(cue)
        if not name:
            continue
        forms.setdefault(name, name)
        if name.isalpha():
            forms.setdefault(light_stem(name), name)
    return forms


def without_names(query: str, names: Iterable[str]) -> str:
    """``query`` without these names (whole words, any case, with a possessive ``'s``); the
    query itself when fewer than two words would be left."""
    stripped = query
    for name in names:
        stripped = re.sub(rf"(?i)\b{re.escape(name)}(?:['’]s)?\b", " ", stripped)
    stripped = " ".join(stripped.split())
    return stripped if len(stripped.split()) >= 2 else query


@traced
def recognise(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """What the graph knows of the query's cues, read once for the branches after it: how many
    memories each encodes (their idf) and which are hubs."""
    context = runtime.context
    store = context.store
    parsed = state.get("parsed", {})
    forms = cue_forms(list(dict.fromkeys(parsed.get("cues", []))))
    hints = {normalise_cue_name(hint): hint for hint in parsed.get("entity_hints", [])}
    hints.pop("", None)
    counts = store.cue_engram_counts([*forms, *hints])
    total = max(store.count_engrams(), 1)
    ceiling = hub_ceiling(total)
    hubs = sorted(name for name in {*forms.values(), *hints} if counts.get(name, 0) > ceiling)
    hub_names = [hints[name] for name in hubs if name in hints]
    return {
        "recognised": {
            "forms": forms,
            "counts": counts,
            "total": total,
            "hubs": hubs,
            "embedded_query": without_names(state["query"], hub_names)
            if context.settings.query_hub_names
            else state["query"],
        },
        "_notes": f"hubs={hubs}",
    }


def query_cue_weights(recognised: dict[str, Any]) -> dict[str, float]:
    """Each query cue -> its idf in the graph (a stem's memories count for the cue it stands
    for; a cue no memory holds gets the highest idf)."""
    forms: dict[str, str] = recognised.get("forms", {})
    counts: dict[str, int] = {}
    for form, count in recognised.get("counts", {}).items():
        if form in forms:
            counts[forms[form]] = counts.get(forms[form], 0) + count
    total = recognised.get("total", 1)
    return {name: idf(counts.get(name, 0), total) for name in dict.fromkeys(forms.values())}


@traced
def cue_traverse(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Engrams encoded by the query's cues, scored by the idf-weighted share of the query's cues
    matched (a stem counts as the cue it stands for)."""
    store = runtime.context.store
    recognised = state.get("recognised", {})
    forms: dict[str, str] = recognised.get("forms", {})
    cues = list(dict.fromkeys(forms.values()))
    if not cues:
        return {"_notes": "no cues in the query"}
    weights = query_cue_weights(recognised)
    hits = store.engrams_by_cues(list(forms), candidate_pool(state["limit"]))
    scored: dict[str, Hit] = {}
    for hit in hits:
        matched = list(dict.fromkeys(forms.get(name, name) for name in hit.cues))
        scored[hit.engram_id] = {
            "cue_score": cue_score(matched, cues, weights),
            "matched_cues": matched,
            "origins": ["cue"],
        }
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1]["cue_score"], kv[0]))
    return {
        "hits": scored,
        "_candidates": [{"id": i, "score": h["cue_score"]} for i, h in ranked],
        "_notes": f"{sum(c in recognised.get('counts', {}) for c in forms)} of {len(cues)} cues known; "
        f"{len(hits)} engrams reached",
    }


def _nearest(state: RecallState, context: MemoryContext, k: int, relative: bool) -> dict[str, Any]:
    """The ``k`` engrams nearest the query embedding above the similarity floors (HNSW index
    when built, else brute force); ``relative`` also admits only hits close to the best one."""
    # An embedding endpoint failure propagates: it is the caller's error to report.
    # Recall embeds the query without hub names (recognise); search mode, the query as given.
    text = state.get("recognised", {}).get("embedded_query") or state["query"]
    embedding = list(context.embedder.embed_query(text))
    floor = context.settings.vector_min_similarity
    found = context.store.vector_search(embedding, k, state.get("memory_type"))
    # Brute force returns k rows whatever their score; unrelated memories are not candidates.
    # The relative floor admits only hits close to the best one, so that weak matches are left
    # for the hops and the conversation context to reach (with a reason) instead of entering
    # as direct hits of their own.
    if found and relative:
        floor = max(floor, max(h.score for h in found) * context.settings.vector_relative_floor)
    hits = [h for h in found if h.score > floor]
    return {
        "query_embedding": embedding,
        "hits": {h.id: {"similarity": h.score, "origins": ["vector"]} for h in hits},
        "_candidates": [{"id": h.id, "score": h.score} for h in hits],
        "_notes": f"{len(hits)} nearest engrams",
    }


@traced
def vector_search(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Recall's vector branch: cosine similarity over engram embeddings, a deep pool (fusion and
    the expansions re-rank it), admitted above VECTOR_RELATIVE_FLOOR of the best cosine."""
    return _nearest(state, runtime.context, candidate_pool(state["limit"]), relative=True)


@traced
def vector_only(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Mode search: similarity alone ranks, so the top ``limit`` nearest engrams are all it needs."""
    return _nearest(state, runtime.context, state["limit"], relative=False)


@traced
def fulltext_search(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Keyword search (FTS index when built, else a scan); scores normalised to (0, 1]."""
    found = runtime.context.store.fulltext_search(
        state["query"], candidate_pool(state["limit"]), state.get("memory_type")
    )
    # A match on words nearly every memory holds (a speaker's name) scores ~0 (FTS5 floors
    # their idf near zero), yet rank fusion would credit it by its rank alone: rank 2 of 50.
    hits = [h for h in found if h.score >= TEXT_MIN_SHARE]
    return {
        "hits": {h.id: {"text_score": h.score, "origins": ["fulltext"]} for h in hits},
        "_candidates": [{"id": h.id, "score": h.score} for h in hits],
        "_notes": f"{len(hits)} keyword matches",
    }


# ----------------------------------------------------------------------------- gather
def branch_scores(candidates: Iterable[Candidate]) -> dict[str, list[float]]:
    """Each signal's positive scores among the direct hits, best first: the ranks fusion uses."""
    candidates = list(candidates)
    return {
        branch: sorted((v for c in candidates if (v := getattr(c, attr)) > 0), reverse=True)
        for branch, attr in SIGNALS.items()
    }


@traced
def gather(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Load the engrams the branches hit and fuse their signals into one relevance."""
    hits = state.get("hits", {})
    query = query_vector(state)
    candidates = load_candidates(runtime.context, sorted(hits), hits, state.get("memory_type"), query)
    ranked = branch_scores(candidates)
    fusion = runtime.context.fusion
    weights = query_cue_weights(state.get("recognised", {})) if fusion.support > 0 else {}
    for candidate in candidates:
        if weights and word_matched(candidate):
            candidate.coverage = lexical_coverage(candidate, weights)
        score_relevance(candidate, ranked, state["mode"], fusion)
    candidates.sort(key=lambda c: (-c.relevance, c.tie))
    return {
        "candidates": candidates,
        "branch_scores": ranked,
        "_candidates": trace_scores(candidates),
        "_notes": f"{len(candidates)} direct hits fused by rank (similarity, full text, cues)",
    }
