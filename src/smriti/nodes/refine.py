"""Recall's refining steps: steer, narrow and merge the candidates before the final score.

In pipeline order:

1. :func:`focus`: the parsed query's entity hints, the memory's subject, the intent and time window
   as factors on relevance.
2. :func:`rerank`: the optional cross-encoder (``RERANKER``), before the shortlist, whose bounds
   it could otherwise break.
3. :func:`current_only`: memories a newer one corrected are hidden (``include_superseded``
   keeps them; ``nodes/rank.py`` demotes them after scoring). It runs before the shortlist so
   that hidden memories never take the places of current ones.
4. :func:`find_seed_cluster`: the cluster the query is about, for the cluster-aware score.
5. The Memory Fabric stages: :func:`shortlist_candidates` keeps only the candidates that can
   still reach the top (the scoring profile's bounds), :func:`merge_duplicates` merges
   near-identical results, :func:`cross_reference` boosts results whose entities other results
   share and attaches the graph relations that explain them. Pure functions
   (``dedupe_results``, ``cross_reference_boost``) carry those rules.

**Query focus**: what the parsed query says beyond its words steers relevance.
``extract_query_cues`` yields the entities a question names (``entity_hints``), its ``intent`` and,
when it names a time ("in May 2023", "last week", "yesterday"), a window. The direct branches
only match words; this step turns the rest into four factors on each candidate's relevance:

    entity  = (1 - ENTITY_HINT_WEIGHT) + ENTITY_HINT_WEIGHT * share
    subject = 1 when the memory is about the one entity the query names, else 1 - SUBJECT_WEIGHT
    intent  = 1 when the memory's type suits the intent, else 1 - INTENT_TYPE_WEIGHT
    time    = 1 inside the window (or no window), else 1 - TIME_WINDOW_WEIGHT
    relevance' = relevance * entity * subject * intent * time

``share`` is the idf-weighted share of the hinted entities that the memory is linked to as
cues; only hints the graph knows count, so naming something unknown changes no score. Why
a factor and not a branch: a question that names a person is about that person, and among
memories that match its words equally well the ones about that person are the answers, but
a memory that matches the words much better should still win.

**The subject.** Being linked to a person is not being about them: "Caroline: Wow, Melanie,
great painting!" is linked to Melanie as surely as "Melanie: I painted a sunrise", yet of
the LoCoMo evidence turns of a question naming one speaker, 96 % are that speaker's own (250
of 260 on the tuning conversations). A memory's subject is the entity cue its text starts
with (:func:`memory_subject`: a transcript's speaker, the subject of "Alice prefers tea");
when the query names exactly one entity that is the subject of some candidate, memories with
another subject or none weigh 1 - SUBJECT_WEIGHT (chosen on conv-26/30: +2.6 R@5 / +2.3
R@10 there, +3.5 / +2.4 on held-out conversations, bench/RESULTS.md). Two named subjects ("what
did Caroline and Melanie do together?") or none leave every memory as it was.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti.errors import ProviderError
from smriti.nodes.candidates import memory_subject, nearest_in_meaning
from smriti.nodes.graph_relations import MAX_PATHS, by_entity, entity_relations, relation_entry
from smriti.nodes.scoring import hub_ceiling, idf, shortlist
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.nodes.textsim import candidate_similarity
from smriti.providers.lexicon import time_word
from smriti.stores.base import NO_CLUSTER, normalise_cue_name
from smriti.time_window import TimeWindow, find_time_window

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- focus
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


def is_time_name(name: str) -> bool:
    """A day, a month (or their plurals) or a year: when, not who or what."""
    word = name.strip()
    return bool(time_word(word)) or (len(word) == 4 and word.isdigit())


def entity_words(entities: Iterable[str]) -> set[str]:
    """Cue names and the words of the hyphenated ones: the query's ``kestrel`` names the cue
    ``team-kestrel``, ``payments`` the cue ``payments-api``."""
    have = set(entities)  # cue names, normalised as stored
    have.update(part for name in entities if "-" in name for part in name.split("-") if part)
    return have


def entity_factor(entities: Sequence[str], weights: Mapping[str, float], weight: float) -> float:
    """(1 - weight) + weight * (idf-weighted share of the hinted entities among ``entities``
    and their words, :func:`entity_words`)."""
    if not weights or weight <= 0:
        return 1.0
    have = entity_words(entities)
    share = sum(w for name, w in weights.items() if name in have) / sum(weights.values())
    return (1.0 - weight) + weight * share


def named_subject(hints: Iterable[str], subjects: Iterable[str]) -> str:
    """The one hinted entity that is among the candidates' ``subjects``; "" when none or several are."""
    known = set(subjects)
    named = [h for h in hints if h in known]
    return named[0] if len(named) == 1 else ""


def subject_factor(subject: str, named: str, weight: float) -> float:
    """1 when the memory's ``subject`` is the entity the query ``named`` (or it named none),
    else 1 - weight."""
    return 1.0 if not named or subject == named else 1.0 - weight


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
    subject: tuple[str, str],
    intent: str,
    window: TimeWindow | None,
    settings: Any,
) -> dict[str, float]:
    """The candidate's four factors (for ``explain``: ``focus_entity``, ``focus_subject``,
    ``focus_intent``, ``focus_time``); ``subject`` is (the memory's subject, the one the query names)."""
    return {
        "entity": entity_factor(candidate.entities, hints, settings.entity_hint_weight),
        "subject": subject_factor(*subject, settings.subject_weight),
        "intent": intent_factor(candidate.memory_type, intent, settings.intent_type_weight),
        "time": time_factor(candidate.created_at, window, settings.time_window_weight),
    }


@traced
def focus(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Scale each candidate's relevance by its entity, subject, intent and time factors (see the module)."""
    context = runtime.context
    parsed = state.get("parsed", {})
    # A day, month or year an LLM names as an entity is a time (the window below reads it).
    hints = [h for h in parsed.get("entity_hints", []) if not is_time_name(h)]
    # recognise read how many memories each hint encodes (keyed by the normalised name).
    recognised = state.get("recognised", {})
    known = recognised.get("counts", {})
    counts = {hint: known[name] for hint in hints if (name := normalise_cue_name(hint)) in known}
    weights = hint_weights(hints, counts, recognised.get("total", 1)) if hints else {}
    intent = str(parsed.get("intent", "general"))
    window = find_time_window(state.get("query", ""), context.clock())
    everything = state.get("candidates", [])
    subjects = {}
    if weights and context.settings.subject_weight > 0:
        subjects = {c.id: memory_subject(c.text, c.entities, c.entity_types) for c in everything}
    named = named_subject(weights, subjects.values())
    # The memory nearest the query in meaning is demoted only by evidence against it (a time
    # window it is outside of, a subject other than the one the query names), never for not
    # naming what the question names: a question asked in other words often names a thing its
    # answer calls otherwise.
    nearest = nearest_in_meaning(everything)
    candidates = []
    for candidate in everything:
        item = candidate.copy()
        subject = (subjects.get(item.id, ""), named)
        item.focus = focus_factors(item, weights, subject, intent, window, context.settings)
        about_another = bool(named and subject[0] and subject[0] != named)
        if candidate is nearest and context.settings.focus_spares_nearest and not about_another:
            item.focus.update(entity=1.0, subject=1.0, intent=1.0)
        for factor in item.focus.values():
            item.relevance *= factor
        candidates.append(item)
    candidates.sort(key=lambda c: (-c.relevance, c.tie))
    return {
        "candidates": candidates,
        "_candidates": trace_scores(candidates),
        "_notes": f"entities={sorted(weights)} subject={named or '-'} intent={intent} window={window}",
    }


# ----------------------------------------------------------------------------- rerank
def rerank_order(candidates: Sequence[Candidate], top_n: int) -> list[Candidate]:
    """The ``top_n`` candidates most likely to end on top: the reranker reads these only."""
    return sorted(candidates, key=lambda c: (-c.relevance, c.tie))[:top_n]


@traced
def rerank(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """With a reranker (RERANKER; none by default), blend its score into the relevance of the top
    RERANK_TOP_N candidates.

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


# ----------------------------------------------------------------------------- current_only
@traced
def current_only(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Drop superseded memories before scoring, unless ``include_superseded`` keeps them."""
    candidates: list[Candidate] = state.get("candidates", [])
    superseded = [c for c in candidates if c.superseded_by]
    if state.get("include_superseded"):
        return {"_notes": f"{len(superseded)} superseded kept (include_superseded); demoted after scoring"}
    if not superseded:
        return {"_notes": "no superseded memory among the candidates"}
    kept = [c for c in candidates if not c.superseded_by]
    hidden = ", ".join(f"{c.id} (superseded by {c.superseded_by})" for c in superseded)
    return {
        "candidates": kept,
        "_candidates": trace_scores(superseded),
        "_notes": f"hid {len(superseded)} superseded: {hidden}; include_superseded=true shows them",
    }


# ----------------------------------------------------------------------------- seed cluster
def seed_cluster(cluster_ids: Iterable[int]) -> int:
    """The most common cluster among the direct hits of a recall, or -1.

    Negative ids (unclustered) are ignored; ties go to the smallest cluster id.
    """
    counts = Counter(c for c in cluster_ids if c is not None and c >= 0)
    if not counts:
        return NO_CLUSTER
    return min(counts, key=lambda c: (-counts[c], c))


@traced
def find_seed_cluster(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The most common cluster among the direct hits (the topic the query is about)."""
    seed = seed_cluster(c.cluster_id for c in state.get("candidates", []) if not c.hops)
    return {"seed_cluster": seed, "_notes": f"seed cluster {seed}" if seed >= 0 else "no seed cluster"}


# ----------------------------------------------------------------------------- Memory Fabric stages
# Entity cue types: keywords and tags are words, not things results can share.
ENTITY_FREE_TYPES = frozenset({"keyword", "tag"})
# Relations of a result's cross-referenced entities attached to it, at most (Memory Fabric step 5).
MAX_ENTITY_RELATIONS = 5


def unit_rows(results: Sequence[Candidate]) -> np.ndarray:
    """The results' embeddings as float32 rows of norm 1 (a zero row without an embedding)."""
    dims = next((len(r.embedding) for r in results if r.embedding is not None), 0)
    matrix = np.zeros((len(results), max(dims, 1)), dtype=np.float32)
    for row, result in enumerate(results):
        if result.embedding is not None:
            matrix[row] = result.embedding
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def dedupe_results(
    results: Sequence[Candidate],
    threshold: float,
    similarity: Callable[[Sequence[Candidate]], np.ndarray] | None = None,
) -> list[Candidate]:
    """Merge results whose texts are more than ``threshold`` similar (Memory Fabric step 4).

    Walks results by relevance (best first); a result whose similarity (cosine of the
    embeddings unless ``similarity`` is given: it returns the n x n similarities of the
    results in the order it is passed them) to one already kept is > ``threshold`` is
    merged into it: the kept one has the higher relevance, gains the other's id (and the ids
    it had merged) in ``merged_ids``, the union of entities, tags and origins, and is marked
    ``cross_validated``. Returns copies; the inputs are not changed.
    """
    ordered = sorted(results, key=lambda r: (-r.relevance, r.tie))
    unit = unit_rows(ordered) if similarity is None else None
    pairs = similarity(ordered) if similarity is not None else None
    kept_unit = np.empty_like(unit) if unit is not None else None  # kept rows, contiguous
    kept: list[Candidate] = []
    kept_rows: list[int] = []
    for row, candidate in enumerate(ordered):
        # The first kept result (best first) this one is a near-duplicate of, if any.
        if unit is not None and kept_unit is not None:
            # Cosines with the kept rows only (half the products of the full matrix), in
            # numpy's own loop, not BLAS (whose threads compete with the database's);
            # compared as float64, as before.
            cosines = np.einsum("ij,j->i", kept_unit[: len(kept)], unit[row]).astype(np.float64)
            twins = np.flatnonzero(cosines > threshold)
            index = int(twins[0]) if len(twins) else None
        else:
            assert pairs is not None
            twins = np.flatnonzero(pairs[row, kept_rows] > threshold)
            index = int(twins[0]) if len(twins) else None
        if index is None:
            if kept_unit is not None and unit is not None:
                kept_unit[len(kept)] = unit[row]
            kept.append(candidate.copy())
            kept_rows.append(row)
            continue
        twin = kept[index]
        twin.cross_validated = True
        twin.merged_ids = [*twin.merged_ids, candidate.id, *candidate.merged_ids]
        twin.entities = sorted(set(twin.entities) | set(candidate.entities))
        tags = {t for t in (twin.tags + "," + candidate.tags).split(",") if t.strip()}
        twin.tags = ",".join(sorted(t.strip() for t in tags))
        twin.origins = sorted(set(twin.origins) | set(candidate.origins))
        twin.relation_paths = [*twin.relation_paths, *candidate.relation_paths][:MAX_PATHS]
    return kept


def cross_reference_boost(
    results: Sequence[Candidate],
    cue_counts: Mapping[str, int],
    cue_types: Mapping[str, str],
    factor: float,
    total: int | None = None,
) -> list[Candidate]:
    """Multiply relevance by ``factor`` when an entity of the result appears elsewhere in the graph.

    relevance' = relevance * factor if shared else relevance, where shared = the result's
    entity cues (any cue type but keyword or tag) that also encode at least one other memory
    (``cue_counts[name] >= 2``) and is no hub (at most ``scoring.hub_ceiling(total)`` memories):
    an entity in most memories (the user's own name, the two speakers of a conversation)
    corroborates nothing and would boost every result alike. Boosted results are marked
    ``boosted`` and list the shared entities in ``cross_references`` (Memory Fabric step 5).
    Returns copies; the inputs are not changed.
    """
    ceiling = hub_ceiling(total) if total else None
    boosted = []
    for result in results:
        shared = sorted(
            name
            for name in result.entities
            if cue_types.get(name, "keyword") not in ENTITY_FREE_TYPES
            and cue_counts.get(name, 0) >= 2
            and (ceiling is None or cue_counts[name] <= ceiling)
        )
        item = result.copy()
        if shared:
            item.relevance = result.relevance * factor
            item.boosted = True
            item.cross_references = shared
        boosted.append(item)
    return boosted


@traced
def shortlist_candidates(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Drop candidates that cannot reach the top ``limit`` whatever dedupe and boost do.

    Uses the scoring profile's bounds; keeps twice the limit as a margin, since dedupe may
    merge some of the best ones.
    """
    candidates = state.get("candidates", [])
    seed = state.get("seed_cluster", -1)
    profile = runtime.context.scoring
    now = runtime.context.clock()
    keep = shortlist([profile.bounds(c, seed, now) for c in candidates], 2 * state["limit"])
    kept = [candidates[i] for i in keep]
    return {
        "candidates": kept,
        "_candidates": trace_scores(kept),
        "_notes": f"{len(kept)} of {len(candidates)} candidates can still reach the top {state['limit']}",
    }


@traced
def merge_duplicates(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Merge results whose texts are near-identical (text similarity above
    MEMORY_FABRIC_DEDUP_THRESHOLD, :mod:`smriti.nodes.textsim`), see :func:`dedupe_results`."""
    threshold = runtime.context.settings.memory_fabric_dedup_threshold
    before = state.get("candidates", [])
    after = dedupe_results(before, threshold, candidate_similarity(threshold))
    merged = len(before) - len(after)
    return {
        "candidates": after,
        "_candidates": trace_scores(after),
        "_notes": f"merged {merged} near-duplicate(s) above {threshold:.2f} text similarity",
    }


@traced
def cross_reference(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Boost results whose entities appear elsewhere, and attach their graph relations.

    ``graph_relations`` of a result: its own relations (kind ``own``), the traversal paths that
    reached it (kind ``path``, nodes/relations.py) and at most MAX_ENTITY_RELATIONS relations of
    its cross-referenced entities recorded by other memories (kind ``entity``).
    """
    store = runtime.context.store
    candidates = state.get("candidates", [])
    types = {name: t for c in candidates for name, t in c.entity_types.items()}
    # Only entity cues can cross-reference: counting keywords too would only cost time.
    names = sorted({n for c in candidates for n in c.entities if types.get(n) not in ENTITY_FREE_TYPES})
    counts = store.cue_engram_counts(names) if names else {}
    factor = runtime.context.settings.memory_fabric_boost_factor
    boosted = cross_reference_boost(candidates, counts, types, factor, total=store.count_engrams())
    relations = store.relations_of([c.id for c in boosted]) if boosted else []
    by_engram: dict[str, list[dict[str, Any]]] = {}
    for relation in relations:
        by_engram.setdefault(relation.engram_id, []).append(relation_entry(relation, "own"))
    shared = sorted({name for item in boosted for name in item.cross_references})
    # One read for every result: enough newest edges that each result can fill its share.
    around = (
        by_entity(store.related_entities(shared, MAX_ENTITY_RELATIONS * (len(boosted) + 1))) if shared else {}
    )
    for item in boosted:
        ids = [item.id, *item.merged_ids]
        item.graph_relations = [
            *(rel for i in ids for rel in by_engram.get(i, [])),
            *item.relation_paths,
            *entity_relations(item.cross_references, ids, around, MAX_ENTITY_RELATIONS),
        ]
    count = sum(1 for item in boosted if item.boosted)
    return {
        "candidates": boosted,
        "_candidates": trace_scores(boosted),
        "_notes": f"boosted {count} result(s) x{factor} for entities shared elsewhere in the graph",
    }
