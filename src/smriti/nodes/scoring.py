"""Recall's scoring: fusion of the direct signals, and the scoring profiles.

The formulas are plain functions of numbers (no store, no state), each unit-tested on its
own. A scoring profile (:class:`CompositeProfile`, :class:`FabricProfile`,
:class:`SimilarityProfile`) is one object that owns a rule: its weights, its ``score``
(with the components ``explain`` shows) and its ``bounds``, the range the score can still
reach before dedupe and boost, which the shortlist relies on. :func:`build_profile` makes
the configured one from settings; ``MemoryContext.scoring`` builds it once.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.nodes.learned import FusionModel
    from smriti.nodes.state import Candidate

# How the three direct signals are fused into one relevance. Chosen on the tuning parts of three
# shapes at once (bench/shapes.py: LoCoMo turns and notes of conv-26/30, the first half of the
# HotpotQA questions), the variant whose worst change over the shapes was best: similarity 0.5,
# text 0.3, cue 0.1 gained R@5 on every shape (turns +1.9, notes +1.8, passages +1.2 points)
# over the old text-led 0.3/0.5/0.2, which was chosen on two conversations alone and let shared
# words outrank meaning on short notes. These are the defaults of FUSION_WEIGHT_* (config.py);
# the graph branch (spreading activation, nodes/associate.py) is the fourth.
FUSION_WEIGHTS = {"similarity": 0.50, "text": 0.30, "cue": 0.10}
# With the offline hashing embedder (its vectors are words, not meaning) the similarity branch is a
# second, noisier keyword search, and text leads instead: on the same tuning parts with that
# embedder, text 0.5, similarity 0.3, cue 0.2 beat the semantic weights on every shape (R@5
# turns +3.4, notes +0.7, passages +7.0 points). A FUSION_WEIGHT_* the user sets wins over both.
LEXICAL_FUSION_WEIGHTS = {"similarity": 0.30, "text": 0.50, "cue": 0.20}
# Rank-fusion constant: 1/(k + rank). Much smaller than the customary 60 because recall
# keeps only a handful of results, so the top ranks of each branch should count most
# (k = 60 lost 6 points of recall@10 against k = 10 there; 3 to 10 were within noise).
FUSION_K = 5


# Share of relevance taken from the branches' scores (each divided by its branch's best) rather
# than their ranks: ranks alone make a near-tie at the top and a distant second look the same.
# 0.3 gained 1-1.5 points of LoCoMo R@5 and R@10 on the tuning conversations; 0.6 and 1.0 lost R@10.
SCORE_SHARE = 0.3


# The branches whose hits are word matches: one common word of the question ("new", "run") is a
# match as surely as its rare ones, so their votes are weighed by how much of the query they cover.
LEXICAL_BRANCHES = ("text", "cue")


@dataclass(frozen=True, slots=True)
class Fusion:
    """How the recall branches are fused (FUSION_WEIGHT_*, FUSION_K, FUSION_SCORE_SHARE,
    FUSION_SUPPORT)."""

    weights: Mapping[str, float]  # branch -> weight
    k: int = FUSION_K
    score_share: float = SCORE_SHARE
    model: FusionModel | None = None  # FUSION=learned: the fitted model replaces the weights
    support: float = 0.0  # coverage at which a lexical hit votes fully (0: every hit does)


DEFAULT_FUSION = Fusion(FUSION_WEIGHTS)


@dataclass(frozen=True, slots=True)
class CompositeWeights:
    """Weights of the composite profile (SCORE_WEIGHT_*; the defaults live in config.py)."""

    similarity: float
    recency: float
    importance: float
    decay: float


@dataclass(frozen=True, slots=True)
class FabricWeights:
    """Weights of the Memory Fabric profile (FABRIC_WEIGHT_*; the defaults live in config.py)."""

    recency: float
    relevance: float
    authority: float


def vector_norm(vector: np.ndarray) -> np.floating:
    """``np.linalg.norm`` of a 1-D array, computed as it computes it (the square root of the
    ravelled vector's dot with itself, in the vector's dtype), without its checks: 1.3 against
    2.7 us, and recall takes ~250 norms a question."""
    flat = vector.ravel(order="K")
    return np.sqrt(flat.dot(flat))


def cosine(
    a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray, a_norm: np.floating | None = None
) -> float:
    """cos(a, b) = a.b / (|a| |b|); 0 when either vector is zero. ``a_norm`` is ``a``'s
    :func:`vector_norm` when the caller computed it once for many ``b``."""
    va = np.asarray(a, dtype=np.float32)
    vb = np.asarray(b, dtype=np.float32)
    denominator = float((vector_norm(va) if a_norm is None else a_norm) * vector_norm(vb))
    return float(va @ vb) / denominator if denominator else 0.0


def clamp01(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else value


def recency(moment: datetime, now: datetime, half_life_days: float) -> float:
    """recency = 0.5 ** (days since ``moment`` / half_life); 1.0 for "just now" or the future.

    Recall scores a memory's age (``created_at``); list mode ranks by the last access.
    """
    days = max(0.0, (now - moment).total_seconds() / 86_400)
    return 0.5 ** (days / half_life_days)


# Entities encoding more than this share of all memories are hubs (a conversation's speakers,
# the user's own name): they say nothing of which memory is meant. Relation traversal does not
# follow them, and the query's embedding leaves their names out.
MAX_HUB_SHARE = 0.1


def hub_ceiling(total: int) -> int:
    """The most memories an entity may encode and not be a hub: max(2, MAX_HUB_SHARE x total)."""
    return max(2, int(MAX_HUB_SHARE * total))


def idf(document_frequency: int, total_documents: int) -> float:
    """Smoothed inverse document frequency: ln(1 + (N - df + 0.5) / (df + 0.5)), as in BM25."""
    return math.log(1 + (total_documents - document_frequency + 0.5) / (document_frequency + 0.5))


def cue_score(matched: Iterable[str], query_cues: Sequence[str], cue_idf: Mapping[str, float]) -> float:
    """Share of the query's cue weight that an engram matches: sum idf(matched) / sum idf(query cues).

    A rare cue ("pgvector") counts for more than a common one ("work"); cues absent from the
    graph get the highest idf seen, so asking about something unknown lowers every score.
    """
    if not query_cues:
        return 0.0
    default = max(cue_idf.values(), default=1.0)
    total = sum(cue_idf.get(c, default) for c in query_cues)
    got = sum(cue_idf.get(c, default) for c in set(matched) if c in query_cues)
    return clamp01(got / total) if total else 0.0


def coverage(matched: Iterable[str], weights: Mapping[str, float]) -> float:
    """Share of the query's information a memory matches: sum idf(matched) / sum idf(query cues).

    ``weights`` maps each query cue to its idf. A note that shares only "new" with "which new
    linter did we adopt for the frontend?" covers a small share; one that shares "linter" and
    "frontend" most of it.
    """
    total = sum(weights.values())
    if total <= 0:
        return 1.0
    return clamp01(sum(weights[name] for name in set(matched) if name in weights) / total)


def support_factor(covered: float, support: float) -> float:
    """A lexical hit's vote: min(1, coverage / support); 1 when ``support`` is 0 (off).

    Below the support a full-text or cue hit votes in proportion to what it covers, so a branch
    whose only matches are common words nearly abstains instead of outranking meaning.
    """
    if support <= 0:
        return 1.0
    return min(1.0, covered / support)


def branch_rank(value: float, ranked_desc: Sequence[float]) -> int:
    """1 + how many direct hits of a branch scored strictly higher than ``value``."""
    low, high = 0, len(ranked_desc)
    while low < high:  # binary search in a descending list
        middle = (low + high) // 2
        if ranked_desc[middle] > value:
            low = middle + 1
        else:
            high = middle
    return low + 1


def rank_fusion(
    signals: Mapping[str, float],
    ranked: Mapping[str, Sequence[float]],
    k: int | None = None,
    weights: Mapping[str, float] | None = None,
    votes: Mapping[str, float] | None = None,
) -> tuple[float, dict[str, int]]:
    """Weighted reciprocal-rank fusion, normalised to [0, 1].

    relevance = sum_b w_b / (k + rank_b) / sum_b w_b / (k + 1), over the branches b
    (similarity, text, cue and graph, with ``weights``, FUSION_WEIGHTS by default) in which the
    candidate has a positive score; rank_b is its rank
    among that branch's direct hits (``ranked[b]``, scores best first). Ranks rather than raw
    scores are fused because the branches' scales are not comparable: a cosine of 0.3 may be
    the best a hashing embedder gives, while BM25 is normalised so its best is always 1.
    A candidate first in every branch scores 1. ``votes`` (branch -> factor in [0, 1], 1 when
    absent) scale a branch's term for this candidate: :func:`support_factor`. Returns the
    relevance and the ranks.
    """
    k = FUSION_K if k is None else k
    weights = FUSION_WEIGHTS if weights is None else weights
    best = sum(weights.values()) / (k + 1) or 1.0
    total, ranks = 0.0, {}
    for branch, weight in weights.items():
        if weight <= 0:
            continue
        value = signals.get(branch, 0.0)
        if value > 0:
            ranks[branch] = branch_rank(value, ranked.get(branch, ()))
            total += weight * (votes.get(branch, 1.0) if votes else 1.0) / (k + ranks[branch])
    return total / best, ranks


def score_fusion(
    signals: Mapping[str, float],
    ranked: Mapping[str, Sequence[float]],
    weights: Mapping[str, float],
    votes: Mapping[str, float] | None = None,
) -> float:
    """Weighted mean of each branch's score divided by that branch's best score, in [0, 1]
    (``votes`` scale a branch's share as in :func:`rank_fusion`)."""
    total = sum(w for w in weights.values() if w > 0)
    if not total:
        return 0.0
    got = 0.0
    for branch, weight in weights.items():
        best = ranked.get(branch)
        value = signals.get(branch, 0.0)
        if weight > 0 and best and best[0] > 0 and value > 0:
            vote = votes.get(branch, 1.0) if votes else 1.0
            got += weight * vote * min(1.0, value / best[0])
    return got / total


def fused_relevance(
    signals: Mapping[str, float],
    ranked: Mapping[str, Sequence[float]],
    fusion: Fusion,
    covered: float = 1.0,
) -> tuple[float, dict[str, int]]:
    """relevance = (1 - s) * rank_fusion + s * score_fusion, s = ``fusion.score_share``; and the
    ranks. The lexical branches vote by ``support_factor(covered, fusion.support)``."""
    vote = support_factor(covered, fusion.support)
    votes = dict.fromkeys(LEXICAL_BRANCHES, vote) if vote < 1.0 else None
    by_rank, ranks = rank_fusion(signals, ranked, fusion.k, fusion.weights, votes)
    share = fusion.score_share
    if share > 0:
        by_rank = (1 - share) * by_rank + share * score_fusion(signals, ranked, fusion.weights, votes)
    return by_rank, ranks


def hop_relevance(own: float, parent: float, strength: float) -> float:
    """A hop result is as relevant as its own match or what its parent passes on, whichever is more:
    max(own, parent * strength). The hop-depth penalty is applied in the composite score."""
    return max(own, parent * clamp01(strength))


def hop_factor(hops: int, penalty: float) -> float:
    """penalty ** hops: 1 for direct hits, 0.7 for one hop, 0.49 for two (default penalty)."""
    return penalty**hops


def cluster_factor(hops: int, cluster_id: int, seed: int, penalty: float) -> float:
    """Soft cluster boundary: hop results outside the seed cluster are multiplied by ``penalty``.

    Direct hits, results without a cluster (-1) and every result when there is no seed
    cluster keep factor 1: only expansion across topics is damped, never dropped.
    """
    if hops == 0 or seed < 0 or cluster_id < 0 or cluster_id == seed:
        return 1.0
    return penalty


def composite_score(
    relevance: float,
    recency_value: float,
    importance: float,
    decay_factor: float,
    weights: CompositeWeights,
    hop: float = 1.0,
    cluster: float = 1.0,
) -> tuple[float, dict[str, float]]:
    """Relevance-gated composite score.

    score = relevance * (ws + wr*recency + wi*importance + wd*decay) * hop * cluster.

    With the default weights (0.4, 0.2, 0.2, 0.2) a memory keeps 40 % of its relevance for
    relevance alone and earns up to the rest from being recent, important and undecayed.
    The original additive form (ws*relevance + wr*recency + ...) let a memory with no
    relevance at all score 0.6 for being new and important, above a relevant older one;
    gating by relevance keeps the same weights and components but ranks irrelevant
    memories last. Returns the score and its components (for ``explain``).
    """
    parts = {
        "similarity": weights.similarity * relevance,
        "recency": weights.recency * recency_value * relevance,
        "importance": weights.importance * clamp01(importance) * relevance,
        "decay": weights.decay * clamp01(decay_factor) * relevance,
    }
    base = sum(parts.values())
    return base * hop * cluster, {**parts, "hop_factor": hop, "cluster_factor": cluster}


def source_authority(cross_validated: bool, boosted: bool) -> float:
    """Memory Fabric authority: 0.5 base, +0.25 when cross-validated, +0.25 when graph entities boosted."""
    return 0.5 + 0.25 * cross_validated + 0.25 * boosted


def fabric_score(
    relevance: float,
    recency_value: float,
    authority: float,
    weights: FabricWeights,
    hop: float = 1.0,
    cluster: float = 1.0,
) -> tuple[float, dict[str, float]]:
    """Memory Fabric profile: (0.3 recency + 0.5 relevance + 0.2 authority) * hop * cluster."""
    parts = {
        "recency": weights.recency * recency_value,
        "relevance": weights.relevance * relevance,
        "authority": weights.authority * authority,
    }
    return sum(parts.values()) * hop * cluster, {**parts, "hop_factor": hop, "cluster_factor": cluster}


def shortlist(bounds: Sequence[tuple[float, float]], keep: int) -> list[int]:
    """Indices of the items that can still reach the top ``keep``, given (lower, upper) score bounds.

    An item whose upper bound is below the ``keep``-th largest lower bound can never be in the
    top ``keep``, whatever the later stages do within those bounds, so it is dropped before the
    costlier stages (dedupe, cross-reference lookups). Order is preserved.
    """
    if len(bounds) <= keep:
        return list(range(len(bounds)))
    floor = sorted((low for low, _ in bounds), reverse=True)[keep - 1]
    return [i for i, (_, high) in enumerate(bounds) if high >= floor]


def rank(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Best score first; ties broken by :attr:`Candidate.tie` (the same order in every store of
    the same content)."""
    return sorted(candidates, key=lambda c: (-c.score, c.tie))


# ----------------------------------------------------------------------------- profiles
class ScoringProfile(Protocol):
    """A scoring rule: the final score of a candidate and the range it can still reach."""

    @property
    def name(self) -> str: ...

    def score(self, candidate: Candidate, now: datetime, seed: int) -> tuple[float, dict[str, float]]:
        """The candidate's final score and its components (for ``explain``)."""
        ...

    def bounds(self, candidate: Candidate, seed: int, now: datetime) -> tuple[float, float]:
        """(lowest, highest) score the candidate can get, whatever dedupe and boost do later."""
        ...


@dataclass(frozen=True, slots=True)
class Shaping:
    """What every graph profile shares: the hop and cluster penalties, recency, the boost ceiling."""

    hop_penalty: float
    cross_cluster_penalty: float
    recency_half_life_days: float
    boost_factor: float  # the cross-reference boost; at least 1

    def factors(self, candidate: Candidate, seed: int) -> tuple[float, float]:
        """(hop_factor, cluster_factor) of the candidate given the seed cluster."""
        hop = hop_factor(candidate.hops, self.hop_penalty)
        cluster = cluster_factor(candidate.hops, candidate.cluster_id, seed, self.cross_cluster_penalty)
        return hop, cluster

    def recency(self, candidate: Candidate, now: datetime) -> float:
        # Recency is the memory's own age; use (access) reaches the score through decay_factor,
        # which recall reinforces and consolidation decays since the last access. Counting the
        # last access here too made every recall boost its results for the next query
        # (2-3 points of LoCoMo recall@10 lost to that feedback alone).
        return recency(candidate.created_at, now, self.recency_half_life_days)

    @property
    def ceiling(self) -> float:
        """The cross-reference boost can lift relevance to the boost factor; dividing every
        score by that ceiling keeps scores in [0, 1] without changing the order."""
        return max(1.0, self.boost_factor)


@dataclass(frozen=True, slots=True)
class CompositeProfile:
    """score = composite_score(relevance, recency, importance, decay) * hop * cluster / ceiling.

    Bounds: the score as it stands (dedupe changes no field the score reads: it keeps the
    better candidate as it is) and that times the boost factor (cross_reference may still
    raise relevance). A memory's recency, importance and decay are known at the shortlist, so
    the bounds are a factor ``boost`` apart, not ~3 (the range of the non-relevance terms),
    and the shortlist keeps few candidates for dedupe and cross_reference.
    """

    weights: CompositeWeights
    shaping: Shaping
    name: str = field(default="composite", init=False)

    def score(self, candidate: Candidate, now: datetime, seed: int) -> tuple[float, dict[str, float]]:
        hop, cluster = self.shaping.factors(candidate, seed)
        value, parts = composite_score(
            candidate.relevance,
            self.shaping.recency(candidate, now),
            candidate.importance,
            candidate.decay_factor,
            self.weights,
            hop,
            cluster,
        )
        return value / self.shaping.ceiling, parts

    def bounds(self, candidate: Candidate, seed: int, now: datetime) -> tuple[float, float]:
        value, _ = self.score(candidate, now, seed)
        return value, value * max(1.0, self.shaping.boost_factor)


@dataclass(frozen=True, slots=True)
class FabricProfile:
    """score = fabric_score(relevance, recency, authority) * hop * cluster / ceiling.

    Bounds: recency as it is (known at the shortlist), authority at 0.5 and 1 (it depends on
    dedupe and boost), relevance as it is and times the boost factor; divided by the ceiling.
    """

    weights: FabricWeights
    shaping: Shaping
    name: str = field(default="fabric", init=False)

    def score(self, candidate: Candidate, now: datetime, seed: int) -> tuple[float, dict[str, float]]:
        hop, cluster = self.shaping.factors(candidate, seed)
        authority = source_authority(candidate.cross_validated, candidate.boosted)
        value, parts = fabric_score(
            candidate.relevance, self.shaping.recency(candidate, now), authority, self.weights, hop, cluster
        )
        return value / self.shaping.ceiling, parts

    def bounds(self, candidate: Candidate, seed: int, now: datetime) -> tuple[float, float]:
        hop, cluster = self.shaping.factors(candidate, seed)
        relevance = candidate.relevance * hop * cluster
        w = self.weights
        boost, ceiling = max(1.0, self.shaping.boost_factor), self.shaping.ceiling
        recent = w.recency * self.shaping.recency(candidate, now) * hop * cluster
        low = recent + w.relevance * relevance + w.authority * 0.5 * hop * cluster
        high = recent + w.authority * hop * cluster + w.relevance * relevance * boost
        return low / ceiling, high / ceiling


@dataclass(frozen=True, slots=True)
class SimilarityProfile:
    """Search mode: score = relevance (the cosine similarity alone), no components.

    That mode promises a fast, shallow vector ranking; nothing later changes the score,
    so both bounds are the relevance.
    """

    name: str = field(default="similarity", init=False)

    def score(self, candidate: Candidate, now: datetime, seed: int) -> tuple[float, dict[str, float]]:
        return candidate.relevance, {}

    def bounds(self, candidate: Candidate, seed: int, now: datetime) -> tuple[float, float]:
        return candidate.relevance, candidate.relevance


SIMILARITY = SimilarityProfile()


def build_fusion(settings: Settings, model: FusionModel | None = None, lexical: bool = False) -> Fusion:
    """The branch weights and rank constant of FUSION_WEIGHT_* and FUSION_K; with a fitted
    ``model`` (FUSION=learned, ``nodes/learned.py``), the model instead. With a ``lexical``
    embedder (hashing), the weights the user did not set are LEXICAL_FUSION_WEIGHTS'."""
    if model is not None:
        return Fusion({}, model.k, 0.0, model)
    weights = {
        "similarity": settings.fusion_weight_similarity,
        "text": settings.fusion_weight_text,
        "cue": settings.fusion_weight_cue,
    }
    if lexical:
        chosen = settings.model_fields_set
        weights = {
            b: w if f"fusion_weight_{b}" in chosen else LEXICAL_FUSION_WEIGHTS[b] for b, w in weights.items()
        }
    weights["graph"] = settings.fusion_weight_graph if settings.graph_activation else 0.0
    return Fusion(
        weights,
        settings.fusion_k,
        settings.fusion_score_share,
        support=settings.fusion_support,
    )


def build_profile(settings: Settings) -> CompositeProfile | FabricProfile:
    """The profile SCORING_PROFILE names, with its weights and penalties from settings."""
    shaping = Shaping(
        hop_penalty=settings.hop_penalty,
        cross_cluster_penalty=settings.cross_cluster_penalty,
        recency_half_life_days=settings.recency_half_life_days,
        boost_factor=settings.memory_fabric_boost_factor,
    )
    if settings.scoring_profile == "fabric":
        fabric = FabricWeights(
            settings.fabric_weight_recency, settings.fabric_weight_relevance, settings.fabric_weight_authority
        )
        return FabricProfile(fabric, shaping)
    composite = CompositeWeights(
        settings.score_weight_similarity,
        settings.score_weight_recency,
        settings.score_weight_importance,
        settings.score_weight_decay,
    )
    return CompositeProfile(composite, shaping)


# ----------------------------------------------------------------------------- episodes
Episode = tuple[str, str]


def episode_of(candidate: Candidate) -> Episode:
    """The episode a memory belongs to: its source and the day it happened (a session)."""
    return candidate.source, candidate.created_at.date().isoformat()


def episode_evidence(candidates: Iterable[Candidate], top: int) -> dict[Episode, float]:
    """Episode -> the summed relevance of its ``top`` most relevant candidates.

    Summing a few, not all, keeps a long episode from winning by length: evidence is how
    much of the question the episode answers, not how much it talks.
    """
    members: dict[Episode, list[float]] = defaultdict(list)
    for candidate in candidates:
        members[episode_of(candidate)].append(candidate.relevance)
    return {key: sum(sorted(values, reverse=True)[:top]) for key, values in members.items()}


def episode_relevance(relevance: float, evidence: float, best_evidence: float, weight: float) -> float:
    """relevance * (1 + weight * evidence / best_evidence): the best episode's memories gain most."""
    if best_evidence <= 0:
        return relevance
    return relevance * (1.0 + weight * evidence / best_evidence)


def spread_over_episodes(ranked: Sequence[Candidate], limit: int, cap: int) -> list[Candidate]:
    """The first ``limit`` of ``ranked``, at most ``cap`` of one episode until others run out.

    A question whose answer is spread over sessions ("what does she do to relax?") otherwise
    gets ten paraphrases from one session; the deferred ones fill any places left, in order.
    """
    if cap <= 0:
        return list(ranked[:limit])
    kept: list[Candidate] = []
    deferred: list[Candidate] = []
    taken: dict[Episode, int] = defaultdict(int)
    for candidate in ranked:
        if len(kept) == limit:
            break
        key = episode_of(candidate)
        if taken[key] < cap:
            kept.append(candidate)
            taken[key] += 1
        else:
            deferred.append(candidate)
    return kept + deferred[: limit - len(kept)]
