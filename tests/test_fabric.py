"""Memory Fabric stages as pure functions: dedupe and cross-reference boost."""

import pytest

from smriti.nodes.refine import cross_reference_boost, dedupe_results
from smriti.nodes.state import Candidate


def _result(id_, relevance, embedding, entities=(), tags=""):
    return Candidate(
        id=id_,
        relevance=relevance,
        embedding=embedding,
        entities=list(entities),
        tags=tags,
        origins=["vector"],
    )


def test_dedupe_merges_near_identical_keeping_the_higher_score():
    results = [
        _result("low", 0.4, [1.0, 0.0, 0.05], ["postgres"], "db"),
        _result("high", 0.9, [1.0, 0.0, 0.0], ["billing"], "finance"),
        _result("other", 0.5, [0.0, 1.0, 0.0]),
    ]
    kept = dedupe_results(results, threshold=0.85)
    assert [r.id for r in kept] == ["high", "other"]
    merged = kept[0]
    assert merged.relevance == 0.9
    assert merged.cross_validated is True
    assert merged.merged_ids == ["low"]
    assert merged.entities == ["billing", "postgres"]
    assert merged.tags == "db,finance"
    assert kept[1].cross_validated is False


def test_dedupe_keeps_results_below_the_threshold():
    results = [_result("a", 0.9, [1.0, 0.0]), _result("b", 0.8, [0.8, 0.6])]  # cosine 0.8
    assert len(dedupe_results(results, threshold=0.85)) == 2
    assert len(dedupe_results(results, threshold=0.75)) == 1


def test_boost_multiplies_exactly_by_the_factor_for_shared_entities_only():
    results = [
        _result("shared", 0.5, None, ["pgvector"]),
        _result("alone", 0.5, None, ["rare-thing"]),
        _result("keyword", 0.5, None, ["common-word"]),
    ]
    counts = {"pgvector": 3, "rare-thing": 1, "common-word": 9}
    types = {"pgvector": "technology", "rare-thing": "concept", "common-word": "keyword"}
    boosted = {r.id: r for r in cross_reference_boost(results, counts, types, factor=1.2)}
    assert boosted["shared"].relevance == pytest.approx(0.5 * 1.2)
    assert boosted["shared"].cross_references == ["pgvector"]
    assert boosted["alone"].relevance == 0.5 and not boosted["alone"].boosted
    assert boosted["keyword"].relevance == 0.5


def test_entities_in_most_memories_do_not_boost():
    """The speakers of a conversation appear in every turn: they corroborate nothing."""
    results = [_result("a", 0.5, None, ["caroline"]), _result("b", 0.5, None, ["lgbtq"])]
    counts = {"caroline": 400, "lgbtq": 6}
    types = {"caroline": "person", "lgbtq": "organization"}
    boosted = {r.id: r for r in cross_reference_boost(results, counts, types, factor=1.2, total=419)}
    assert not boosted["a"].boosted and boosted["a"].relevance == 0.5
    assert boosted["b"].relevance == pytest.approx(0.6)
    # In a small store the ceiling never drops below two memories.
    one = [_result("c", 0.5, None, ["bob"])]
    small = cross_reference_boost(one, {"bob": 2}, {"bob": "person"}, 1.2, total=5)
    assert small[0].boosted


def test_candidate_copy_is_a_shallow_copy_of_every_field():
    import copy

    original = _result("a", 0.7, [1.0, 0.0], ["postgres"], "db")
    original.ranks = {"text": 2}
    twin = original.copy()
    assert twin == copy.copy(original) and twin is not original
    assert twin.entities is original.entities  # shallow, as copy.copy
    twin.relevance = 0.1
    assert original.relevance == 0.7
