"""What the conformance modules share: the dimension the ``backend`` fixture opens stores with,
a fixed time, deterministic vectors and engrams."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from smriti.stores.base import Engram

DIMS = 16  # conftest.DIMS: the backend fixture opens stores with EMBEDDING_DIMS=16
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


def vec(seed: int) -> list[float]:
    """A deterministic random DIMS-dimensional vector."""
    return np.random.default_rng(seed).normal(size=DIMS).round(6).tolist()


def engram(eid: str, content: str = "", **fields) -> Engram:
    fields.setdefault("created_at", T0)
    fields.setdefault("last_accessed_at", T0)
    return Engram(id=eid, content=content or f"memory {eid}", **fields)


def embedded(eid: str, content: str, **fields) -> Engram:
    """An engram at T0 with a vector seeded by its id."""
    vector = np.random.default_rng(sum(map(ord, eid))).normal(size=DIMS).tolist()
    return Engram(id=eid, content=content, created_at=T0, last_accessed_at=T0, embedding=vector, **fields)


def numpy_ranking(query: list[float], vectors: dict[str, list[float]], k: int) -> list[str]:
    """Expected vector_search order: cosine descending, ties by id."""
    q = np.asarray(query)
    scores = {
        i: round(float(np.dot(v, q) / (np.linalg.norm(v) * np.linalg.norm(q))), 6) for i, v in vectors.items()
    }
    return sorted(scores, key=lambda i: (-scores[i], i))[:k]
