"""Pure scoring functions of recall: fusion, recency, composite and Memory Fabric profiles.

Everything here is a plain function of numbers (no store, no state), so each formula is
unit-tested on its own and the nodes in ``nodes/score.py`` only gather inputs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

# How the three direct signals are fused into one relevance. Lexical evidence (full-text
# and cue overlap) carries as much as dense similarity: on conversational memory such as
# LoCoMo, keyword overlap beats small sentence embedders (see bench/RESULTS.md).
FUSION_WEIGHTS = {"similarity": 0.45, "text": 0.30, "cue": 0.25}


@dataclass(frozen=True, slots=True)
class CompositeWeights:
    similarity: float = 0.4
    recency: float = 0.2
    importance: float = 0.2
    decay: float = 0.2


@dataclass(frozen=True, slots=True)
class FabricWeights:
    recency: float = 0.3
    relevance: float = 0.5
    authority: float = 0.2


def cosine(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """cos(a, b) = a.b / (|a| |b|); 0 when either vector is zero."""
    va = np.asarray(a, dtype=np.float32)
    vb = np.asarray(b, dtype=np.float32)
    denominator = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb) / denominator if denominator else 0.0


def clamp01(value: float) -> float:
    return 0.0 if value < 0 else 1.0 if value > 1 else value


def recency(last_accessed: datetime, now: datetime, half_life_days: float) -> float:
    """recency = 0.5 ** (days since last access / half_life); 1.0 for "just now" or the future."""
    days = max(0.0, (now - last_accessed).total_seconds() / 86_400)
    return 0.5 ** (days / half_life_days)


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


def fuse_relevance(similarity: float, text_score: float, cue: float) -> float:
    """relevance = 0.45 similarity + 0.30 text + 0.25 cue (each in [0,1]; see FUSION_WEIGHTS)."""
    w = FUSION_WEIGHTS
    return clamp01(w["similarity"] * clamp01(similarity) + w["text"] * clamp01(text_score) + w["cue"] * cue)


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
    """score = (ws*relevance + wr*recency + wi*importance + wd*decay) * hop * cluster.

    Returns the score and its components (for ``explain``).
    """
    parts = {
        "similarity": weights.similarity * relevance,
        "recency": weights.recency * recency_value,
        "importance": weights.importance * clamp01(importance),
        "decay": weights.decay * clamp01(decay_factor),
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


def rank(items: Iterable[dict], key: str = "score") -> list[dict]:
    """Best first; ties broken by id so every backend returns the same order."""
    return sorted(items, key=lambda item: (-item[key], item["id"]))
