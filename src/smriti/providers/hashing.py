"""An offline embedder: signed feature hashing of words and word pairs.

It needs no model file and no network, so the server always starts. It is lexical, not
semantic: "car" and "automobile" are unrelated to it. On conversational benchmarks such as
LoCoMo lexical overlap is a strong signal (see bench/RESULTS.md), and cue traversal carries
the rest. Set an embedding endpoint for semantic similarity.
"""

from __future__ import annotations

import hashlib
import math
from itertools import pairwise

from langchain_core.embeddings import Embeddings

from smriti.text import STOPWORDS, light_stem, words


def _bucket(feature: str, dims: int) -> tuple[int, float]:
    """Stable across processes (unlike ``hash``): blake2b picks the axis and the sign."""
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dims, 1.0 if (value >> 63) & 1 else -1.0


class HashingEmbeddings(Embeddings):
    """Deterministic bag-of-words vectors of fixed dimension, L2-normalised.

    Features are stemmed content words (weight 1) and adjacent word pairs (weight 0.5);
    stop words are dropped so that "what did Alice say" matches memories about Alice.
    """

    model = "smriti-hashing-v1"
    # Its vectors are words, not meaning: recall fuses its branches as for a second keyword
    # search (nodes/scoring.py, LEXICAL_FUSION_WEIGHTS).
    lexical = True

    def __init__(self, dims: int = 1536) -> None:
        if dims < 8:
            raise ValueError("HashingEmbeddings needs at least 8 dimensions")
        self.dims = dims

    def _features(self, text: str) -> list[tuple[str, float]]:
        terms = [light_stem(w.lower()) for w in words(text)]
        terms = [t for t in terms if t not in STOPWORDS]
        features = [(t, 1.0) for t in terms]
        features += [(f"{a} {b}", 0.5) for a, b in pairwise(terms)]
        return features

    def embed_query(self, text: str) -> list[float]:
        # Only the axes some feature hashes to are summed and divided (a query has ~20 of 1,536;
        # 170 -> 25 us): the other entries are zeros, which change neither the sum (nor its
        # compensation) nor their own value, so every float is what a pass over all would give.
        sums: dict[int, float] = {}
        for feature, weight in self._features(text):
            axis, sign = _bucket(feature, self.dims)
            sums[axis] = sums.get(axis, 0.0) + sign * weight
        axes = sorted(sums)  # the sum in axis order, as over the whole vector
        norm = math.sqrt(sum(sums[axis] * sums[axis] for axis in axes))
        vector = [0.0] * self.dims
        if norm:
            for axis in axes:
                vector[axis] = sums[axis] / norm
        return vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]
