"""Learned fusion: the direct branches' signals weighed by a small logistic model (issue 36, item 2).

The hand-set fusion (``scoring.rank_fusion``: text 0.5, similarity 0.3, cue 0.2) was chosen on
two conversations, where full text beats a small embedder; on short notes the embedder is the
better signal and those weights let shared words outrank meaning. This model reads the same
signals, turned into features that mean the same whatever the embedder's scale:

* per branch (similarity, text, cue): ``<branch>_rank`` = (k + 1) / (k + rank) among that
  branch's direct hits (1 for the first, 0 when the branch missed the memory) and
  ``<branch>_ratio`` = the signal over the branch's best (1 for the best, 0 when missed);
* ``similarity_gap``: how far the memory's cosine stands above the dense hits' median, in
  units of their spread (a cosine of 0.3 means little when every hit has 0.3);
* ``agreement``: 1 when the dense and full-text branches both rank the memory in their top
  five, the per-query signal that the branches agree;
* products of the dense and text features with ``dense_confident`` (the best cosine's gap
  over the fifth), so the weight of each branch moves with how sure the dense branch is on
  this query.

relevance = sigmoid(bias + sum_f w_f x_f), in (0, 1) as the hand-set fusion's relevance is.
The weights are fitted by ``bench/train_fusion.py`` on the tuning parts of turns, notes and
passages at once (never the held-out parts) and shipped beside this module as
``fusion_model.json``; ``explain`` shows each feature's contribution w_f x_f.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from smriti.nodes.scoring import branch_rank

MODEL_FILE = Path(__file__).with_name("fusion_model.json")
BRANCHES = ("similarity", "text", "cue")
TOP = 5  # the "top five" of agreement and of the dense branch's confidence


@dataclass(frozen=True, slots=True)
class FusionModel:
    """A fitted logistic model: feature weights, a bias, and the rank constant it was fitted with."""

    weights: Mapping[str, float]
    bias: float
    k: int

    def relevance(self, features: Mapping[str, float]) -> float:
        """sigmoid(bias + sum_f w_f x_f)."""
        z = self.bias + sum(w * features.get(name, 0.0) for name, w in self.weights.items())
        return 1.0 / (1.0 + math.exp(-z)) if z > -60 else 0.0

    def contributions(self, features: Mapping[str, float]) -> dict[str, float]:
        """w_f x_f per feature with a non-zero product, for ``explain``."""
        return {name: w * features[name] for name, w in self.weights.items() if features.get(name)}

    def to_json(self) -> str:
        return json.dumps({"k": self.k, "bias": self.bias, "weights": dict(self.weights)}, indent=1) + "\n"


@functools.cache
def shipped_model() -> FusionModel:
    """The model shipped with the package (read once)."""
    raw = json.loads(MODEL_FILE.read_text(encoding="utf-8"))
    return FusionModel(weights=raw["weights"], bias=float(raw["bias"]), k=int(raw["k"]))


@functools.lru_cache(maxsize=256)
def _dense_shape(ranked: tuple[float, ...]) -> tuple[float, float, float]:
    """(median, spread, confidence) of the dense hits' cosines: the spread is the interquartile
    range (at least 0.01), the confidence the best cosine's gap over the fifth, in spreads."""
    if len(ranked) < 2:
        return (ranked[0] if ranked else 0.0), 0.01, 0.0
    quartiles = statistics.quantiles(ranked, n=4)
    spread = max(0.01, quartiles[2] - quartiles[0])
    fifth = ranked[min(TOP, len(ranked)) - 1]
    return statistics.median(ranked), spread, min(3.0, (ranked[0] - fifth) / spread)


def fusion_features(
    signals: Mapping[str, float], ranked: Mapping[str, Sequence[float]], k: int
) -> tuple[dict[str, float], dict[str, int]]:
    """The model's features of one candidate (see the module doc) and its rank in each branch
    that found it; ``ranked``: each branch's direct hits' scores, best first."""
    features: dict[str, float] = {}
    ranks: dict[str, int] = {}
    for branch in BRANCHES:
        value = signals.get(branch, 0.0)
        hits = ranked.get(branch, ())
        if value <= 0 or not hits or hits[0] <= 0:
            features[f"{branch}_rank"] = features[f"{branch}_ratio"] = 0.0
            continue
        ranks[branch] = branch_rank(value, hits)
        features[f"{branch}_rank"] = (k + 1) / (k + ranks[branch])
        features[f"{branch}_ratio"] = min(1.0, value / hits[0])
    dense = tuple(ranked.get("similarity", ()))
    median, spread, confident = _dense_shape(dense)
    similarity = signals.get("similarity", 0.0)
    features["similarity_gap"] = (
        max(-3.0, min(3.0, (similarity - median) / spread)) if similarity > 0 else 0.0
    )
    features["agreement"] = float(
        ranks.get("similarity", TOP + 1) <= TOP and ranks.get("text", TOP + 1) <= TOP
    )
    features["dense_confident"] = confident
    features["similarity_rank_x_confident"] = features["similarity_rank"] * confident
    features["text_rank_x_confident"] = features["text_rank"] * confident
    return features, ranks


def learned_relevance(
    signals: Mapping[str, float], ranked: Mapping[str, Sequence[float]], model: FusionModel
) -> tuple[float, dict[str, int], dict[str, float]]:
    """The model's relevance of one candidate, its branch ranks and each feature's contribution."""
    features, ranks = fusion_features(signals, ranked, model.k)
    return model.relevance(features), ranks, model.contributions(features)
