"""VectorCache: ties by id, the HNSW tier (real usearch) and its saved file (real files)."""

from __future__ import annotations

import numpy as np
import pytest

from smriti.stores.ann import AnnParams, sidecar
from smriti.stores.search import VectorCache

DIMS = 64
PARAMS = AnnParams(connectivity=16, expansion_add=128, expansion_search=128)


def _vectors(count: int, seed: int = 0) -> np.ndarray:
    """Clustered vectors (nearest neighbours are meaningful, as with real embeddings)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIMS))
    return (centres[rng.integers(0, 40, count)] + 0.6 * rng.standard_normal((count, DIMS))).astype(np.float32)


def _rows(vectors: np.ndarray, offset: int = 0) -> list[tuple[str, str, list[float]]]:
    types = ("episodic", "semantic", "procedural")
    return [(f"m{offset + i:06d}", types[i % 3], v.tolist()) for i, v in enumerate(vectors)]


def _cache(tmp_path=None, threshold: int | None = 500) -> VectorCache:
    path = tmp_path / "memory.vectors" if tmp_path is not None else None
    return VectorCache(DIMS, ann_threshold=threshold, index_path=path, params=PARAMS)


def _built(rows, tmp_path=None) -> VectorCache:
    cache = _cache(tmp_path)
    cache.load(rows)
    assert cache.wait_idle(30) and cache.ann_ready
    return cache


def test_ties_are_broken_by_id_whatever_the_insertion_order() -> None:
    base = _vectors(5)
    rows = [(f"t{i:03d}", "semantic", base[i % 5].tolist()) for i in range(200)]  # 40 copies each
    query = base[2]
    shuffled = list(reversed(rows))
    forward, backward = _cache(threshold=None), _cache(threshold=None)
    forward.load(rows)
    backward.load([])
    for row in shuffled:
        backward.add(*row)
    top = forward.search(query, 7)
    assert top == backward.search(query, 7)
    assert [id_ for id_, _ in top] == sorted(f"t{i:03d}" for i in range(2, 200, 5))[:7]


def test_hnsw_and_exact_agree_on_top_k() -> None:
    vectors = _vectors(3000)
    rows = _rows(vectors)
    exact = _cache(threshold=None)
    exact.load(rows)
    approximate = _built(rows)
    queries = _vectors(40, seed=1)
    hits = total = 0
    for query in queries:
        want, got = exact.search(query, 10), approximate.search(query, 10)
        scores = dict(want)
        # What both return carries the same score: the graph's candidates are re-scored exactly.
        assert all(scores[id_] == score for id_, score in got if id_ in scores)
        hits += len({i for i, _ in want} & {i for i, _ in got})
        total += 10
        filtered = approximate.search(query, 5, "procedural")
        assert filtered == exact.search(query, 5, "procedural") or len(filtered) == 5
    assert hits / total >= 0.98


def test_adds_and_removes_after_the_build_are_seen_at_once() -> None:
    vectors = _vectors(1200)
    cache = _built(_rows(vectors[:1000]))
    fresh = vectors[1000:]
    for i, vector in enumerate(fresh):
        cache.add(f"n{i:04d}", "episodic", vector.tolist())
    # Before or after the thread indexes them, the new vectors answer (exact tail or graph).
    assert cache.search(fresh[7], 1)[0][0] == "n0007"
    cache.remove("n0007")
    cache.remove("m000003")
    assert cache.search(fresh[7], 1)[0][0] != "n0007"
    assert cache.wait_idle(30)
    assert all(cache.search(fresh[i], 1)[0][0] == f"n{i:04d}" for i in (0, 50, 199))
    assert "m000003" not in {id_ for id_, _ in cache.search(vectors[3], 20)}
    assert cache.vector("n0050") == fresh[50].tolist()
    assert cache.vector("m000010") == vectors[10].tolist()  # from the graph's float32 copy
    assert len(cache) == 1200 - 2


def test_the_saved_index_reopens_memory_mapped_without_a_rebuild(tmp_path) -> None:
    vectors = _vectors(1500)
    rows = _rows(vectors)
    first = _built(rows, tmp_path)
    queries = _vectors(10, seed=2)
    answers = [first.search(q, 10) for q in queries]
    first.close()
    assert (tmp_path / "memory.vectors").exists()

    reopened = _cache(tmp_path)
    assert reopened.open((id_, memory_type) for id_, memory_type, _ in rows)  # no embeddings read
    assert reopened.ann_ready and reopened._view  # memory-mapped, no build queued
    assert reopened.wait_idle(0)
    assert [reopened.search(q, 10) for q in queries] == answers

    loaded = _cache(tmp_path)
    loaded.load(reversed(rows))  # another order: same keys, same answers
    assert loaded.ann_ready and loaded._view
    assert [loaded.search(q, 10) for q in queries] == answers

    # A store that changed meanwhile: open() refuses, load() reuses what still matches.
    assert not _cache(tmp_path).open((id_, mt) for id_, mt, _ in rows[1:])
    changed = _cache(tmp_path)
    moved = (vectors[0] + 1.0).tolist()
    changed.load([(rows[0][0], rows[0][1], moved), *rows[1:], *_rows(_vectors(5, seed=3), offset=5000)])
    assert changed.ann_ready
    assert changed.search(np.asarray(moved), 1)[0][0] == rows[0][0]
    assert changed.vector(rows[0][0]) == moved
    assert changed.search(_vectors(5, seed=3)[4], 1)[0][0] == "m005004"
    assert changed.wait_idle(30) and not changed._view  # copied into RAM to take the inserts
    changed.close()


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "stale"])
def test_a_damaged_or_stale_index_file_is_rebuilt(tmp_path, damage: str, caplog) -> None:
    rows = _rows(_vectors(800))
    _built(rows, tmp_path).close()
    path = tmp_path / "memory.vectors"
    data = path.read_bytes()
    if damage == "corrupt":
        path.write_bytes(data[:100] + b"\0" * 4096 + data[4196:])
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 2])
    else:
        sidecar(path).write_text(sidecar(path).read_text().replace('"generation":null', '"generation":"x"'))
    cache = _cache(tmp_path)
    assert not cache.open((id_, mt) for id_, mt, _ in rows)
    cache.load(rows)
    assert cache.wait_idle(30) and cache.ann_ready and not cache._view
    assert cache.search(np.asarray(rows[5][2]), 1)[0][0] == rows[5][0]
    cache.close()
    reopened = _cache(tmp_path)
    assert reopened.open((id_, mt) for id_, mt, _ in rows)  # rewritten whole


def test_below_the_threshold_no_graph_is_built() -> None:
    cache = _cache(threshold=2000)
    cache.load(_rows(_vectors(300)))
    assert cache.wait_idle(5) and not cache.ann_ready
    assert cache.search(_vectors(1, seed=4)[0], 3)


def test_queries_run_while_the_thread_indexes_a_stream_of_adds() -> None:
    vectors = _vectors(1800)
    cache = _built(_rows(vectors[:600]))
    graph_hits = []
    for i, vector in enumerate(vectors[600:]):
        cache.add(f"s{i:05d}", "semantic", vector.tolist())
        if i % 100 == 0:  # the thread is inserting batches meanwhile: every vector still answers
            assert cache.search(vector, 1)[0][0] == f"s{i:05d}"  # just added: the exact tail
            found = [id_ for id_, _ in cache.search(vectors[i % 600], 3)]
            graph_hits.append(f"m{i % 600:06d}" in found)
    # Through the graph, an HNSW search is approximate, and more so while the graph is being grown
    # by the thread: an exact vector came second or third, not first, twice in twelve on a loaded
    # machine. Among the top three, at most one of twelve may be missed.
    assert sum(graph_hits) >= len(graph_hits) - 1, graph_hits
    assert cache.wait_idle(30) and cache._indexed == 1800


def test_a_rare_memory_type_is_scored_exactly_among_the_indexed() -> None:
    vectors = _vectors(1000)
    rows = [(id_, "episodic" if i % 100 else "procedural", v) for i, (id_, _, v) in enumerate(_rows(vectors))]
    exact, approximate = _cache(threshold=None), _built(rows)
    exact.load(rows)
    for query in _vectors(5, seed=5):
        assert approximate.search(query, 5, "procedural") == exact.search(query, 5, "procedural")


@pytest.mark.parametrize("background", [True, False])
def test_the_build_uses_every_core_and_a_waiting_caller_builds_at_normal_priority(
    monkeypatch, background
) -> None:
    """The graph is built by usearch on all the process's cores (threads passed explicitly), at
    nice 19 for a serving process and at the caller's priority for ``smriti import``, and its
    answers agree with exact search either way."""
    import os

    from usearch.index import Index

    from smriti.stores import vectors as vectors_module

    seen: list[tuple[int, int]] = []
    add = Index.add

    def spied(self, keys, vectors, **options):
        seen.append((options.get("threads", 0), os.getpriority(os.PRIO_PROCESS, 0)))
        return add(self, keys, vectors, **options)

    monkeypatch.setattr(Index, "add", spied)
    cores = len(os.sched_getaffinity(0))
    vectors = _vectors(5000)
    rows = _rows(vectors)
    cache = _cache()
    cache.background = background
    cache.load(rows)
    assert cache.wait_idle(60) and cache.ann_ready
    threaded = [threads for threads, _ in seen if threads]
    assert threaded and set(threaded) == {vectors_module.build_threads()} == {cores}
    assert {nice for _, nice in seen} == ({19} if background else {os.getpriority(os.PRIO_PROCESS, 0)})
    exact = _cache(threshold=None)
    exact.load(rows)
    hits = 0
    for query in _vectors(40, seed=7):
        hits += len({i for i, _ in exact.search(query, 10)} & {i for i, _ in cache.search(query, 10)})
    assert hits / 400 >= 0.95  # parallel inserts make another graph than serial ones: as good


def test_the_query_beam_widens_with_the_graph_size(monkeypatch) -> None:
    """search_beam: the configured beam up to BEAM_BASE_SIZE vectors, in proportion past it,
    at most 4x; a query sets it on the graph (usearch's expansion_search) before searching."""
    import smriti.stores.vectors as vectors

    sizes = (5_000, 100_000, 250_000, 1_000_000)
    assert [vectors.search_beam(256, n) for n in sizes] == [256, 256, 640, 1024]
    monkeypatch.setattr(vectors, "BEAM_BASE_SIZE", 1_000)
    rows = _rows(_vectors(2_500))
    cache = _built(rows)
    assert cache._index is not None
    cache.search(_vectors(1, seed=2)[0], 10)
    assert cache._index.expansion_search == 320  # 128 x 2,500 / 1,000
