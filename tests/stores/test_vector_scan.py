"""The exact vector scan finds its candidates with a rough BLAS product (stores/vectors.py
``best_rows``): its top k must be the exact cosine's, ties and all, whatever the rounding."""

from __future__ import annotations

import numpy as np
import pytest

from smriti.stores.vectors import VectorCache, best_rows, cosine, rounding_margin, row_norms


def exact_top(query: np.ndarray, matrix: np.ndarray, rows: np.ndarray, k: int) -> list[tuple[int, float]]:
    scores = cosine(query, matrix, row_norms(matrix))[rows]
    ranked = sorted(zip(rows.tolist(), scores.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
    return ranked[:k]


def scanned_top(query: np.ndarray, matrix: np.ndarray, rows: np.ndarray, k: int) -> list[tuple[int, float]]:
    found, scores = best_rows(query, matrix, row_norms(matrix), rows, k)
    ranked = sorted(zip(found.tolist(), scores.tolist(), strict=True), key=lambda p: (-p[1], p[0]))
    return ranked[:k]


@pytest.mark.parametrize("k", [1, 10, 50])
def test_the_scan_returns_the_exact_top_k_with_exact_scores(k: int) -> None:
    rng = np.random.default_rng(7)
    matrix = rng.standard_normal((3000, 384)).astype(np.float32)
    # Near-ties the rough product could reorder: copies of one row, nudged by one float step.
    base = matrix[5].copy()
    for row in range(100, 140):
        matrix[row] = np.nextafter(base, np.float32(np.inf) if row % 2 else np.float32(-np.inf))
    matrix[200:230] = base  # exact ties: all of them must come back, broken by row
    rows = np.arange(len(matrix))
    for trial in range(20):
        query = base if trial == 0 else rng.standard_normal(384).astype(np.float32)
        assert scanned_top(query, matrix, rows, k) == exact_top(query, matrix, rows, k)


def test_the_scan_keeps_to_the_rows_it_is_given() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((2000, 256)).astype(np.float32)
    rows = np.flatnonzero(rng.random(2000) < 0.1)
    query = matrix[rows[0]] + 0.01
    top = scanned_top(query, matrix, rows, 10)
    assert {row for row, _ in top} <= set(rows.tolist())
    assert top == exact_top(query, matrix, rows, 10)
    assert top[0][0] == rows[0]


def test_the_margin_bounds_the_rough_products_error() -> None:
    rng = np.random.default_rng(11)
    matrix = rng.standard_normal((5000, 1536)).astype(np.float32)
    norms = row_norms(matrix)
    query = rng.standard_normal(1536).astype(np.float32)
    gap = np.abs(cosine(query, matrix, norms, rough=True) - cosine(query, matrix, norms))
    assert gap.max() <= rounding_margin(matrix)


def test_the_cache_ranks_as_the_exact_cosine_over_every_row() -> None:
    rng = np.random.default_rng(5)
    cache = VectorCache(128)
    vectors = rng.standard_normal((1500, 128)).astype(np.float32)
    types = ["semantic" if i % 3 == 0 else "episodic" for i in range(1500)]
    cache.load_matrix([f"m{i:05d}" for i in range(1500)], types, vectors)
    for _ in range(10):
        query = rng.standard_normal(128).astype(np.float32)
        scores = cosine(query, vectors, row_norms(vectors))
        for memory_type, keep in ((None, np.arange(1500)), ("semantic", np.arange(0, 1500, 3))):
            expected = sorted(((f"m{i:05d}", float(scores[i])) for i in keep), key=lambda p: (-p[1], p[0]))[
                :10
            ]
            assert cache.search(query, 10, memory_type) == expected
