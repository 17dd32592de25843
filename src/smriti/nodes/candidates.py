"""Candidates: loading them from the store and scoring their relevance, for every recall step.

gather (``nodes/search.py``) builds the first candidates with these helpers, and the steps that
add candidates later (``nodes/associate.py``: activate, conversation_context, multi_hop,
episode_context; ``nodes/relations.py``: relation_traverse, bridge) load and score theirs the
same way, so each step module holds only its steps. The fusion formula itself is
``nodes/scoring.py``'s. :func:`memory_subject` (who a memory is about) serves focus and the bridge.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from smriti.nodes.learned import learned_relevance
from smriti.nodes.scoring import DEFAULT_FUSION, Fusion, cosine, coverage, fused_relevance, vector_norm
from smriti.nodes.state import Candidate, Hit, MemoryContext, RecallState
from smriti.providers.cue_words import ENGLISH, cue_terms
from smriti.stores.base import MAX_CUE_NAME, normalise_cue_name
from smriti.text import light_stem, strip_label, words

# The candidate attribute behind each fused branch (the keys of scoring.FUSION_WEIGHTS).
SIGNALS = {"similarity": "similarity", "text": "text_score", "cue": "cue_score", "graph": "graph_score"}


def load_candidates(
    context: MemoryContext,
    ids: list[str],
    hits: dict[str, Hit],
    memory_type: str | None,
    query: np.ndarray | None = None,
) -> list[Candidate]:
    """Engrams with their cues as candidates (embeddings as float32 arrays), dropping other
    memory types; with the ``query`` embedding, each one's similarity is filled in too
    (:func:`fill_similarity`: the store may have computed it instead of sending the embedding)."""
    candidates = []
    query_norm = None if query is None else vector_norm(np.asarray(query, dtype=np.float32))
    for row in context.store.recall_rows(ids, query):
        if memory_type is None or row.engram.memory_type == memory_type:
            candidate = Candidate.from_engram(row.engram, row.cues, hits.get(row.engram.id), row.vector)
            fill_similarity(candidate, query, row.similarity, query_norm)
            candidates.append(candidate)
    return candidates


def query_vector(state: RecallState) -> np.ndarray | None:
    """The query embedding as a float32 array (converted once per node, not per candidate)."""
    embedding = state.get("query_embedding")
    return None if embedding is None else np.asarray(embedding, dtype=np.float32)


def fill_similarity(
    candidate: Candidate,
    query_embedding: Sequence[float] | np.ndarray | None,
    computed: float | None = None,
    query_norm: np.floating | None = None,
) -> None:
    """Similarity for hits found without the vector branch, so every candidate has all signals:
    the cosine the store ``computed`` with the query when it did, else that of the embeddings
    (``query_norm``: the query's :func:`~smriti.nodes.scoring.vector_norm`, computed once)."""
    if query_embedding is None or "vector" in candidate.origins:
        return
    if computed is not None:
        candidate.similarity = max(0.0, computed)
    elif candidate.embedding is not None:
        candidate.similarity = max(0.0, cosine(query_embedding, candidate.embedding, query_norm))


def score_relevance(
    candidate: Candidate, ranked: dict[str, list[float]], mode: str, fusion: Fusion = DEFAULT_FUSION
) -> None:
    """Relevance: the similarity in search mode, else the fusion of the branch signals (ranks and scores)."""
    if mode == "search":
        candidate.relevance = candidate.similarity
        return
    signals = {branch: getattr(candidate, attr) for branch, attr in SIGNALS.items()}
    if fusion.model is not None:
        candidate.relevance, candidate.ranks, candidate.fused = learned_relevance(
            signals, ranked, fusion.model
        )
        return
    candidate.relevance, candidate.ranks = fused_relevance(signals, ranked, fusion, candidate.coverage)


def best_with_ties(candidates: Sequence[Candidate], n: int) -> list[Candidate]:
    """The ``n`` most relevant candidates, and every other as relevant as the ``n``-th.

    Which of several equally relevant candidates made a cut would otherwise depend on their
    ids (random), and a stage seeded by them would rank the same memories differently per store.
    """
    ordered = sorted(candidates, key=lambda c: (-c.relevance, c.tie))
    if n <= 0:
        return []
    if len(ordered) <= n:
        return ordered
    floor = ordered[n - 1].relevance
    return [c for c in ordered if c.relevance >= floor]


@functools.lru_cache(maxsize=1 << 16)
def word_forms(folded: str) -> tuple[str, ...]:
    """A case-folded word as a query cue may name it: itself, its lemma (a content word's) and
    its light stem (cached per word: a recall at 10k reads ~80 new texts of mostly known words)."""
    return tuple({folded, light_stem(folded), *cue_terms((folded,), ENGLISH)})


@functools.lru_cache(maxsize=1 << 14)
def memory_words(text: str) -> frozenset[str]:
    """The words of ``text`` as a query cue may name them (:func:`word_forms`; cached: the same
    memories come back recall after recall)."""
    return frozenset().union(*map(word_forms, set(map(str.casefold, words(text)))))


def word_matched(candidate: Candidate) -> bool:
    """Whether full-text search or cue traversal found the candidate (its coverage is measured)."""
    return candidate.text_score > 0 or candidate.cue_score > 0


def nearest_in_meaning(candidates: Iterable[Candidate]) -> Candidate | None:
    """The candidate most similar to the query (ties: the older, then by content), or None."""
    return min(candidates, key=lambda c: (-c.similarity, c.tie), default=None)


def lexical_coverage(candidate: Candidate, weights: Mapping[str, float]) -> float:
    """:func:`~smriti.nodes.scoring.coverage` of the query cues (``weights``: cue -> idf) that the
    candidate is linked to or whose words it holds (``team-kestrel``: both words), in its text,
    summary or facts: what full-text search matched it on."""
    have = memory_words("\n".join([candidate.text, candidate.summary, *candidate.facts]))
    linked = {*candidate.matched_cues, *candidate.entities}
    matched = [
        name for name in weights if name in linked or all(part in have for part in name.split("-") if part)
    ]
    return coverage(matched, weights)


# "The database-engineer recommends ..." is about the database-engineer: an article is not a subject.
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+(?=\S)", re.IGNORECASE)
# Cue types that say when or what kind, never who or what a memory is about.
NOT_SUBJECTS = frozenset({"keyword", "tag", "time", "nationality"})


def memory_subject(text: str, entities: Iterable[str], types: Mapping[str, str]) -> str:
    """The entity a memory is about: the longest of its entity cues that its text starts with as
    a whole word ("Melanie: ...", "John Smith prefers ..."), after any label ("Title: ...",
    "Note: ...", "## ") and a leading article ("The database-engineer recommends ..."); "" when
    none. Times, nationalities and keywords are never subjects.

    The text's head is normalised as cue names are (lower case, hyphens for spaces), so a
    multi-word name matches its cue; by the uncached function, as every head is new. Only as
    much of the text as the longest name can cover is normalised: focus asks this of every
    candidate, and normalising 200 characters each time was ~3 ms of a recall at 10k.
    """
    names = [name for name in entities if types.get(name) not in NOT_SUBJECTS]
    if not names:
        return ""
    text = _LEADING_ARTICLE.sub("", strip_label(text), count=1)
    longest = max(map(len, names))
    cut = min(2 * longest + 2, MAX_CUE_NAME + 1)  # twice: runs of spaces fold into one hyphen
    head = normalise_cue_name.__wrapped__(text[:cut])
    if len(head) <= longest and len(text) > cut:
        head = normalise_cue_name.__wrapped__(text[: MAX_CUE_NAME + 1])
    best = ""
    for name in names:
        if len(name) <= len(best) or not head.startswith(name):
            continue
        rest = head[len(name) : len(name) + 1]
        if not rest or not rest.isalnum():
            best = name
    return best
