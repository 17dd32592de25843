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


def _filled_store(settings, count: int):
    store = open_sqlite(settings, "alice")
    with store.db.transaction():  # rows as an import writes them (no cache listener)
        store.db.write_many(
            "INSERT INTO engram (id, content, created_at, last_accessed_at, memory_type, embedding) "
            "VALUES (?, ?, 0, 0, ?, ?)",
            [
                (f"m{k:06d}", f"memory {k}", ("episodic", "semantic")[k % 2], v.astype("<f4").tobytes())
                for k, v in enumerate(_vectors(count))
            ],
        )
    return store


def _assert_same_answers(got, before, exact) -> None:
    """``got`` answers as ``before`` did: exact scores, recall against ``exact`` within 0.02,
    and at least 80 % of the lists identical (93-98 % in runs: both builds are HNSW on two
    threads; a build that mixed up keys and ids would share next to none)."""
    for answers in (got, before):
        for answer, want in zip(answers, exact, strict=True):
            scores = dict(want)
            assert all(abs(scores[hit.id] - hit.score) < 1e-6 for hit in answer if hit.id in scores)

    def recall(answers) -> float:
        found = sum(len({h.id for h in a} & {i for i, _ in w}) for a, w in zip(answers, exact, strict=True))
        return found / sum(len(w) for w in exact)

    assert recall(got) >= recall(before) - 0.02 and recall(got) >= 0.9, (recall(got), recall(before))
    assert sum(a == b for a, b in zip(got, before, strict=True)) >= 0.8 * len(got)


def test_import_builds_a_quantised_graph_from_blob_batches_with_today_s_results(
    tmp_path, monkeypatch, caplog
) -> None:
    """``finish`` (what ``smriti import`` calls) builds an i8 graph from the BLOBs a batch at a
    time, never loading the float32 matrix; it answers as a graph built from the loaded matrix
    does (the path before it), and its saved file reopens memory-mapped. Two HNSW builds on
    several threads differ in a few links, so "as" is: the same exact scores, the same recall
    against exact search, and the same top 10 for most questions."""
    import logging

    import smriti.stores.sqlite.search as search
    import smriti.stores.vectors as vectors_module
    from smriti.stores.sqlite.engrams import EngramTable

    monkeypatch.setattr(search, "ANN_THRESHOLD", 300)
    monkeypatch.setattr(vectors_module, "PROGRESS_SECONDS", 0.0)
    settings = Settings(
        storage_location=tmp_path, accessing_user="alice", embedding_dims=DIMS, vector_index_dtype="i8"
    )
    queries = _vectors(30, seed=7)
    exact = VectorCache(DIMS)
    exact.load((f"m{k:06d}", ("episodic", "semantic")[k % 2], v) for k, v in enumerate(_vectors(4500)))

    def exact_answers(asked):
        plain = [exact.search(q, 10) for q in asked]
        return plain + [exact.search(q, 10, "semantic") for q in asked]

    store = _filled_store(settings, 4500)  # three read batches (2,000 rows each)
    try:
        # Today's path: the matrix loaded, the graph built from it by the cache's thread.
        store.index.warm()
        assert store.index.vectors.wait_idle(120) and store.index.vectors.ann_ready
        before = [store.vector_search(q.tolist(), 10) for q in queries]
        before_typed = [store.vector_search(q.tolist(), 10, "semantic") for q in queries]
    finally:
        store.close()
    for path in tmp_path.rglob("*.vectors*"):
        path.unlink()

    def no_matrix(self):
        raise AssertionError("the streamed build loaded every embedding")

    monkeypatch.setattr(EngramTable, "embeddings", no_matrix)
    seen: list[tuple[int, int]] = []
    store = open_sqlite(settings, "alice")
    try:
        with caplog.at_level(logging.INFO, logger="smriti.stores.vectors"):
            store.finish_indexes(lambda done, total: seen.append((done, total)))
        assert store.index.vectors.ann_ready and not store.index.vectors._view
        assert [done for done, _ in seen[:3]] == [2000, 4000, 4500] and seen[-1] == (4500, 4500)
        assert "indexing vectors: 2000 of 4500" in caplog.text
        after = [store.vector_search(q.tolist(), 10) for q in queries]
        after_typed = [store.vector_search(q.tolist(), 10, "semantic") for q in queries]
        _assert_same_answers(after + after_typed, before + before_typed, exact_answers(queries))
    finally:
        store.close()
    # Saved: the next process opens it memory-mapped (still no matrix) and answers the same.
    store = open_sqlite(settings, "alice")
    try:
        store.warm()
        assert store.index.vectors.ann_ready and store.index.vectors._view
        assert [store.vector_search(q.tolist(), 10) for q in queries] == after
        store.finish_indexes()  # covered by the saved graph: nothing rebuilt
        assert store.index.vectors._view
    finally:
        store.close()


def test_an_f32_graph_and_a_partly_covering_saved_graph_load_the_matrix_as_before(tmp_path) -> None:
    rows = _rows(_vectors(800))
    read, _ = _exact_reader(rows)

    def batches():
        yield [r[0] for r in rows], [r[1] for r in rows], np.asarray([r[2] for r in rows], dtype=np.float32)

    exact = VectorCache(DIMS, ann_threshold=500, index_path=tmp_path / "f", params=AnnParams())
    assert not exact.build_streamed(batches(), len(rows)) and not exact.loaded
    small = VectorCache(DIMS, ann_threshold=5000, params=AnnParams(dtype="i8"), exact=read)
    assert not small.build_streamed(batches(), len(rows)) and not small.loaded  # exact search
    params = AnnParams(dtype="i8")
    cache = VectorCache(DIMS, ann_threshold=500, index_path=tmp_path / "v", params=params, exact=read)
    assert cache.build_streamed(batches(), len(rows)) and cache.loaded and cache.ann_ready
    cache.close()
    # A saved graph of these parameters: load() keeps what it covers (not a rebuild from scratch).
    again = VectorCache(DIMS, ann_threshold=500, index_path=tmp_path / "v", params=params, exact=read)
    assert not again.build_streamed(batches(), len(rows)) and not again.loaded
