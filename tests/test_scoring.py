"""The scoring formulas, each on its own."""

from datetime import UTC, datetime, timedelta

import pytest

from smriti.nodes.scoring import (
    CompositeWeights,
    FabricWeights,
    cluster_factor,
    composite_score,
    cosine,
    cue_score,
    fabric_score,
    fuse_relevance,
    hop_factor,
    hop_relevance,
    idf,
    rank,
    recency,
    source_authority,
)

NOW = datetime(2026, 1, 15, tzinfo=UTC)


def test_cosine_of_parallel_orthogonal_and_zero_vectors():
    assert cosine([1, 0], [2, 0]) == pytest.approx(1.0)
    assert cosine([1, 0], [0, 3]) == pytest.approx(0.0)
    assert cosine([0, 0], [1, 1]) == 0.0


def test_recency_halves_every_half_life_and_caps_at_one():
    assert recency(NOW, NOW, 7) == 1.0
    assert recency(NOW - timedelta(days=7), NOW, 7) == pytest.approx(0.5)
    assert recency(NOW - timedelta(days=14), NOW, 7) == pytest.approx(0.25)
    assert recency(NOW + timedelta(days=1), NOW, 7) == 1.0


def test_rare_cues_weigh_more_than_common_ones():
    weights = {"pgvector": idf(1, 100), "work": idf(60, 100)}
    assert weights["pgvector"] > weights["work"]
    assert cue_score(["pgvector"], ["pgvector", "work"], weights) > cue_score(
        ["work"], ["pgvector", "work"], weights
    )
    assert cue_score(["pgvector", "work"], ["pgvector", "work"], weights) == pytest.approx(1.0)
    assert cue_score([], [], weights) == 0.0


def test_fusion_is_the_documented_weighted_sum():
    assert fuse_relevance(1.0, 0.0, 0.0) == pytest.approx(0.45)
    assert fuse_relevance(0.0, 1.0, 0.0) == pytest.approx(0.30)
    assert fuse_relevance(0.0, 0.0, 1.0) == pytest.approx(0.25)
    assert fuse_relevance(1.0, 1.0, 1.0) == pytest.approx(1.0)


def test_composite_default_weights_and_penalties():
    weights = CompositeWeights()
    score, parts = composite_score(1.0, 1.0, 1.0, 1.0, weights)
    assert score == pytest.approx(1.0)
    score, parts = composite_score(0.5, 0.0, 0.5, 1.0, weights)
    assert score == pytest.approx(0.4 * 0.5 + 0.2 * 0.5 + 0.2 * 1.0)
    assert parts["similarity"] == pytest.approx(0.2)
    penalised, _ = composite_score(0.5, 0.0, 0.5, 1.0, weights, hop=hop_factor(2, 0.7), cluster=0.5)
    assert penalised == pytest.approx(score * 0.49 * 0.5)


def test_cross_cluster_penalty_only_for_hops_outside_the_seed_cluster():
    assert cluster_factor(hops=0, cluster_id=2, seed=1, penalty=0.5) == 1.0
    assert cluster_factor(hops=1, cluster_id=1, seed=1, penalty=0.5) == 1.0
    assert cluster_factor(hops=1, cluster_id=2, seed=1, penalty=0.5) == 0.5
    assert cluster_factor(hops=1, cluster_id=-1, seed=1, penalty=0.5) == 1.0
    assert cluster_factor(hops=1, cluster_id=2, seed=-1, penalty=0.5) == 1.0


def test_hop_relevance_takes_the_better_of_own_and_inherited():
    assert hop_relevance(0.1, 0.8, 0.5) == pytest.approx(0.4)
    assert hop_relevance(0.6, 0.8, 0.5) == pytest.approx(0.6)


def test_fabric_profile_weights():
    assert source_authority(False, False) == 0.5
    assert source_authority(True, True) == 1.0
    score, parts = fabric_score(1.0, 0.5, 1.0, FabricWeights())
    assert score == pytest.approx(0.5 + 0.15 + 0.2)
    assert parts["relevance"] == pytest.approx(0.5)


def test_rank_breaks_ties_by_id():
    items = [{"id": "b", "score": 1.0}, {"id": "a", "score": 1.0}, {"id": "c", "score": 2.0}]
    assert [i["id"] for i in rank(items)] == ["c", "a", "b"]
