"""A quantised HNSW graph (VECTOR_INDEX_DTYPE f16/i8): real usearch, real SQLite files.

The graph only finds candidates; they are re-scored from the exact embeddings (the SQLite
BLOBs), so what comes back carries exact cosine scores and is exact-ranked.
"""

from __future__ import annotations

import numpy as np
import pytest

from smriti.config import Settings
from smriti.stores.ann import AnnParams
from smriti.stores.search import VectorCache
from smriti.stores.sqlite.store import open_sqlite
from tests.stores.test_vector_cache_ann import DIMS, _rows, _vectors


def _exact_reader(rows):
    vectors = {id_: np.asarray(vector, dtype=np.float32) for id_, _, vector in rows}
    asked: list[list[str]] = []

    def read(ids: list[str]) -> dict[str, np.ndarray]:
        asked.append(list(ids))
        return {id_: vectors[id_] for id_ in ids if id_ in vectors}

    return read, asked


@pytest.mark.parametrize("dtype", ["f16", "i8"])
def test_a_quantised_graph_returns_exact_scores_re_read_from_the_owner(dtype, tmp_path) -> None:
    rows = _rows(_vectors(3000))
    exact = VectorCache(DIMS)
    exact.load(rows)
    read, asked = _exact_reader(rows)
    params = AnnParams(expansion_add=128, expansion_search=128, dtype=dtype)
    cache = VectorCache(DIMS, ann_threshold=500, index_path=tmp_path / "v", params=params, exact=read)
    cache.load(rows)
    assert cache.wait_idle(60) and cache.ann_ready
    hits = total = 0
    for query in _vectors(40, seed=1):
        asked.clear()
        want, got = exact.search(query, 10), cache.search(query, 10)
        assert asked and len(asked[0]) >= 10  # the candidates were read back from the owner
        scores = dict(want)
        assert all(scores[id_] == score for id_, score in got if id_ in scores)  # exact, not quantised
        assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
        hits += len(scores.keys() & {id_ for id_, _ in got})
        total += 10
    assert hits / total >= 0.95, hits / total
    assert cache.vector("m000007") == rows[7][2]  # exact, from the owner, not the graph's copy
    cache.close()
    # The saved graph reopens for the same dtype, and is rebuilt for another.
    again = VectorCache(DIMS, ann_threshold=500, index_path=tmp_path / "v", params=params, exact=read)
    assert again.open((id_, kind) for id_, kind, _ in rows)
    other = AnnParams(expansion_add=128, expansion_search=128, dtype="f32")
    assert not VectorCache(DIMS, ann_threshold=500, index_path=tmp_path / "v", params=other).open(
        (id_, kind) for id_, kind, _ in rows
    )


def test_a_candidate_the_owner_no_longer_has_is_dropped() -> None:
    rows = _rows(_vectors(800))
    read, _ = _exact_reader(rows[:400])  # the owner lost half of them (a removal not yet seen)
    cache = VectorCache(DIMS, ann_threshold=500, params=AnnParams(dtype="i8"), exact=read)
    cache.load(rows)
    assert cache.wait_idle(60) and cache.ann_ready
    got = cache.search(_vectors(1, seed=3)[0], 10)
    known = {id_ for id_, _, _ in rows[:400]}
    assert got and all(id_ in known for id_, _ in got)


def test_a_quantised_graph_needs_the_exact_vectors() -> None:
    with pytest.raises(ValueError, match="needs the exact vectors"):
        VectorCache(DIMS, ann_threshold=500, params=AnnParams(dtype="f16"))


def test_the_sqlite_store_re_scores_from_its_blobs(tmp_path, monkeypatch) -> None:
    """VECTOR_INDEX_DTYPE=i8 on a real SQLite store past its (lowered) threshold: the graph is
    quantised, and vector search gives the scores of the exact path."""
    import smriti.stores.sqlite.search as search

    monkeypatch.setattr(search, "ANN_THRESHOLD", 300)
    settings = Settings(storage_location=tmp_path, accessing_user="alice", embedding_dims=DIMS)
    quantised = Settings(**{**settings.model_dump(), "vector_index_dtype": "i8"})
    vectors = _vectors(900)
    store = open_sqlite(quantised, "alice")
    try:
        assert store.index.vectors.params.dtype == "i8"
        with store.db.transaction():  # rows as an import writes them (no cache listener)
            store.db.write_many(
                "INSERT INTO engram (id, content, created_at, last_accessed_at, embedding) "
                "VALUES (?, ?, 0, 0, ?)",
                [(f"m{k:06d}", f"memory {k}", v.astype("<f4").tobytes()) for k, v in enumerate(vectors)],
            )
        store.index.finish()
        assert store.index.vectors.ann_ready
        exact = VectorCache(DIMS)
        exact.load(_rows(vectors))
        query = _vectors(1, seed=5)[0]
        got = store.vector_search(query.tolist(), 10)
        want = dict(exact.search(query, 10))
        assert len(got) == 10
        assert all(abs(want[hit.id] - hit.score) < 1e-6 for hit in got if hit.id in want)
        assert len(want.keys() & {hit.id for hit in got}) >= 8
    finally:
        store.close()
