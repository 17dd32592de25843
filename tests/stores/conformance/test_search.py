"""The search part on every backend (see conftest.BACKENDS): vector and keyword search, brute
force and indexed, and the caches and indexes behind them."""

from __future__ import annotations

import numpy as np
import pytest

from tests.stores.conformance.data import engram, numpy_ranking, vec

pytestmark = pytest.mark.search


@pytest.mark.parametrize("indexed", [False, True], ids=["brute-force", "indexed"])
def test_vector_search_matches_numpy_cosine_ranking(store, indexed):
    vectors = {f"v{i:02d}": vec(100 + i) for i in range(30)}
    types = {eid: ("semantic" if i % 3 == 0 else "episodic") for i, eid in enumerate(vectors)}
    for eid, vector in vectors.items():
        store.create_engram(engram(eid, embedding=vector, memory_type=types[eid]))
    store.create_engram(engram("no-vector"))
    state = store.ensure_indexes(10_000)
    assert not any(state.values()), "no index below the threshold"
    if indexed:
        store.ensure_indexes(0)
        if store.capabilities.vector_index:
            assert store.stats().vector_index
    query = vec(7)
    found = store.vector_search(query, 10)
    assert [h.id for h in found] == numpy_ranking(query, vectors, 10)
    for hit in found:
        v = np.asarray(vectors[hit.id])
        cosine = float(v @ query / (np.linalg.norm(v) * np.linalg.norm(query)))
        assert hit.score == pytest.approx(cosine, abs=1e-4)  # raw cosine similarity, -1..1
    semantic = {i: v for i, v in vectors.items() if types[i] == "semantic"}
    filtered = store.vector_search(query, 4, memory_type="semantic")
    assert [h.id for h in filtered] == numpy_ranking(query, semantic, 4)


@pytest.mark.parametrize("indexed", [False, True], ids=["brute-force", "indexed"])
def test_vector_search_breaks_ties_by_id(store, indexed):
    target = vec(3)
    for eid in ("tie-c", "tie-a", "tie-b"):
        store.create_engram(engram(eid, embedding=target))
    store.create_engram(engram("other", embedding=vec(4)))
    if indexed:
        store.ensure_indexes(0)
    found = store.vector_search(target, 3)
    assert [h.id for h in found] == ["tie-a", "tie-b", "tie-c"]
    assert all(h.score == pytest.approx(1.0, abs=1e-5) for h in found)


@pytest.mark.parametrize("indexed", [False, True], ids=["scan", "indexed"])
def test_fulltext_finds_words_and_filters_by_type(store, indexed):
    store.create_engram(engram("f1", "The quick brown fox jumps"))
    store.create_engram(engram("f2", "A lazy dog sleeps all day", memory_type="semantic"))
    store.create_engram(engram("f3", "Quick thinking saves the day", memory_type="semantic"))
    store.create_engram(engram("f4", "Nothing to see here"))
    store.create_engram(engram("f5", "Untitled", summary="a zebra crossing"))
    if indexed:
        store.ensure_indexes(0)
    assert {h.id for h in store.fulltext_search("quick", 10)} == {"f1", "f3"}
    day = store.fulltext_search("day", 10, memory_type="semantic")
    assert {h.id for h in day} == {"f2", "f3"}
    assert [h.id for h in store.fulltext_search("quick", 10, memory_type="episodic")] == ["f1"]
    hits = store.fulltext_search("lazy dog", 10)
    assert hits and hits[0].id == "f2"
    assert all(0.0 < h.score <= 1.0 for h in hits)
    assert [h.id for h in store.fulltext_search("zebra", 10)] == ["f5"]  # summaries are searched too
    assert store.fulltext_search("giraffe", 10) == []


def test_warm_and_finish_indexes_leave_the_results_as_they_were(store):
    vectors = {f"w{i:02d}": vec(400 + i) for i in range(12)}
    for eid, vector in vectors.items():
        store.create_engram(engram(eid, f"warm memory number {eid}", embedding=vector))
    query = vec(9)
    before = [h.id for h in store.vector_search(query, 5)]
    store.warm()
    progress: list[tuple[int, int]] = []
    store.finish_indexes(lambda done, total: progress.append((done, total)))
    assert all(0 <= done <= total for done, total in progress)
    assert [h.id for h in store.vector_search(query, 5)] == before == numpy_ranking(query, vectors, 5)
    store.create_engram(engram("late", "a zeppelin added after warming", embedding=query))
    assert store.vector_search(query, 1)[0].id == "late"  # the warmed cache follows new writes
    assert {h.id for h in store.fulltext_search("zeppelin", 10)} == {"late"}
