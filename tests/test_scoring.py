"""The scoring formulas, each on its own."""

from datetime import UTC, datetime, timedelta

import pytest

from smriti.nodes.scoring import (
    FUSION_K,
    FUSION_WEIGHTS,
    CompositeWeights,
    FabricWeights,
    branch_rank,
    cluster_factor,
    composite_score,
    cosine,
    cue_score,
    fabric_score,
    hop_factor,
    hop_relevance,
    idf,
    rank,
    rank_fusion,
    recency,
    shortlist,
    source_authority,
)
from smriti.nodes.state import Candidate

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


def test_rank_fusion_is_the_documented_weighted_reciprocal_rank():
    ranked = {"similarity": [0.9, 0.5, 0.2], "text": [1.0, 0.4], "cue": [0.7]}
    top, ranks = rank_fusion({"similarity": 0.9, "text": 1.0, "cue": 0.7}, ranked)
    assert top == pytest.approx(1.0) and ranks == {"similarity": 1, "text": 1, "cue": 1}
    k = FUSION_K
    best = sum(FUSION_WEIGHTS.values()) / (k + 1)  # first in every branch scores 1
    only_text_second, ranks = rank_fusion({"similarity": 0.0, "text": 0.4, "cue": 0.0}, ranked)
    assert ranks == {"text": 2}
    assert only_text_second == pytest.approx(FUSION_WEIGHTS["text"] / (k + 2) / best)
    # A value between ranked scores takes the rank after the higher ones (hop candidates).
    between, ranks = rank_fusion({"similarity": 0.6}, ranked)
    assert ranks == {"similarity": 2}
    assert between == pytest.approx(FUSION_WEIGHTS["similarity"] / (k + 2) / best)
    assert rank_fusion({}, ranked) == (0.0, {})


def test_branch_rank_counts_strictly_better_hits():
    assert branch_rank(0.5, [0.9, 0.5, 0.5, 0.1]) == 2
    assert branch_rank(1.0, [0.9]) == 1
    assert branch_rank(0.0, [0.9, 0.1]) == 3
    assert branch_rank(0.3, []) == 1


def test_composite_default_weights_and_penalties():
    weights = CompositeWeights(0.4, 0.2, 0.2, 0.2)  # the defaults of ScoringSettings
    score, parts = composite_score(1.0, 1.0, 1.0, 1.0, weights)
    assert score == pytest.approx(1.0)
    score, parts = composite_score(0.5, 0.0, 0.5, 1.0, weights)
    assert score == pytest.approx(0.5 * (0.4 + 0.2 * 0.5 + 0.2 * 1.0))
    assert parts["similarity"] == pytest.approx(0.2)
    assert sum(v for k, v in parts.items() if not k.endswith("_factor")) == pytest.approx(score)
    # Gated by relevance: new, important, undecayed but irrelevant scores nothing.
    assert composite_score(0.0, 1.0, 1.0, 1.0, weights)[0] == 0.0
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
    score, parts = fabric_score(1.0, 0.5, 1.0, FabricWeights(0.3, 0.5, 0.2))
    assert score == pytest.approx(0.5 + 0.15 + 0.2)
    assert parts["relevance"] == pytest.approx(0.5)


def test_rank_breaks_ties_by_creation_time_then_content_then_id():
    from datetime import UTC, datetime

    early, late = datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)
    items = [
        Candidate("a", text="zebra", created_at=late, score=1.0),
        Candidate("b", text="apple", created_at=late, score=1.0),
        Candidate("c", text="zebra", created_at=early, score=1.0),
        Candidate("e", text="apple", created_at=late, score=1.0),
        Candidate("d", score=2.0),
    ]
    # The ids are random: they decide only between memories of the same time and content.
    assert [i.id for i in rank(items)] == ["d", "c", "b", "e", "a"]


def test_shortlist_keeps_whatever_can_still_reach_the_top():
    bounds = [(0.5, 1.0), (0.4, 0.9), (0.1, 0.45), (0.05, 0.29), (0.3, 0.6)]
    # third-best lower bound is 0.3: items whose upper bound is below it cannot make the top 3
    assert shortlist(bounds, 3) == [0, 1, 2, 4]
    assert shortlist(bounds, 10) == [0, 1, 2, 3, 4]
    assert shortlist([], 3) == []


def test_score_share_tells_a_near_tie_from_a_distant_second():
    from smriti.nodes.scoring import Fusion, fused_relevance, score_fusion

    weights = {"similarity": 0.5, "text": 0.5}
    ranked = {"similarity": [0.9, 0.88, 0.3], "text": [1.0, 0.2]}
    # ranks alone: the second by similarity scores the same whether it is 0.88 or 0.3 away
    near, ranks = fused_relevance({"similarity": 0.88}, ranked, Fusion(weights, 5, 0.0))
    far, _ = fused_relevance({"similarity": 0.3}, {"similarity": [0.9, 0.3]}, Fusion(weights, 5, 0.0))
    assert near == far and ranks == {"similarity": 2}
    # with a score share the near tie keeps more relevance
    near_s, _ = fused_relevance({"similarity": 0.88}, ranked, Fusion(weights, 5, 0.3))
    far_s, _ = fused_relevance({"similarity": 0.3}, {"similarity": [0.9, 0.3]}, Fusion(weights, 5, 0.3))
    assert near_s > far_s
    # first in every branch is 1 either way; the score part is the weighted share of each best
    assert fused_relevance({"similarity": 0.9, "text": 1.0}, ranked, Fusion(weights, 5, 0.3))[
        0
    ] == pytest.approx(1.0)
    assert score_fusion({"text": 0.2}, ranked, weights) == pytest.approx(0.5 * 0.2)
    assert score_fusion({}, ranked, {}) == 0.0


def test_cosine_equals_the_linalg_norm_formula_to_the_last_bit():
    """scoring.cosine takes norms as np.linalg.norm computes them (vector_norm), with the first
    vector's norm given once for many: the same float, bit for bit, as the formula it replaced."""
    import numpy as np

    from smriti.nodes.scoring import cosine, vector_norm

    def linalg_cosine(a, b):
        va, vb = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
        denominator = float(np.linalg.norm(va) * np.linalg.norm(vb))
        return float(va @ vb) / denominator if denominator else 0.0

    rng = np.random.default_rng(3)
    for dims in (3, 64, 384, 1536):
        query = rng.standard_normal(dims).astype(np.float32)
        norm = vector_norm(query)
        assert norm == np.linalg.norm(query)
        for _ in range(200):
            other = rng.standard_normal(dims).astype(np.float32) * rng.uniform(1e-3, 1e3)
            want = linalg_cosine(query, other)
            assert cosine(query, other) == want
            assert cosine(query, other, norm) == want
            assert cosine(list(map(float, query)), other.astype(np.float64)) == want
        strided = rng.standard_normal(2 * dims).astype(np.float32)[::2]  # not contiguous
        assert cosine(query, strided) == linalg_cosine(query, strided)
        assert cosine(query, np.zeros(dims, dtype=np.float32), norm) == 0.0


def test_a_candidate_copy_is_shallow_and_carries_every_field():
    """Candidate.copy (compiled from the fields): a new object whose every field is the same
    object as the original's, equal to copy.copy's; setting a field of the copy leaves the
    original as it was."""
    import copy
    import dataclasses

    from smriti.nodes.state import Candidate

    original = Candidate(id="m1", text="text", entities=["a"], ranks={"text": 1}, score=0.5, hops=2)
    copied = original.copy()
    assert copied is not original and copied == original == copy.copy(original)
    for spec in dataclasses.fields(Candidate):
        assert getattr(copied, spec.name) is getattr(original, spec.name), spec.name
    copied.score = 0.9
    assert original.score == 0.5


def test_a_lexical_embedder_fuses_text_first_unless_the_user_set_the_weights(settings):
    from smriti.nodes.scoring import LEXICAL_FUSION_WEIGHTS, build_fusion

    semantic = build_fusion(settings)
    assert {b: semantic.weights[b] for b in FUSION_WEIGHTS} == FUSION_WEIGHTS
    lexical = build_fusion(settings, lexical=True)
    assert {b: lexical.weights[b] for b in LEXICAL_FUSION_WEIGHTS} == LEXICAL_FUSION_WEIGHTS
    assert lexical.weights["text"] > lexical.weights["similarity"]
    chosen = build_fusion(settings.model_copy(update={"fusion_weight_text": 0.9}), lexical=True)
    assert chosen.weights["text"] == 0.9  # what the user set wins
    assert chosen.weights["similarity"] == LEXICAL_FUSION_WEIGHTS["similarity"]


def test_the_hashing_embedder_is_lexical_and_the_context_fuses_accordingly(make_context):
    from smriti.nodes.scoring import LEXICAL_FUSION_WEIGHTS

    context = make_context()  # the tests' default embedder: hashing
    assert context.fusion.weights["text"] == LEXICAL_FUSION_WEIGHTS["text"]


def test_the_reported_score_is_clamped_to_0_1_in_ranking_order_with_the_raw_in_explain():
    """A boost (the bridge's relevance) can lift a ranking score past 1; the result format
    promises [0, 1], so the reported score is clamped, the order kept, the raw value explained."""
    from smriti.nodes.rank import unified_result
    from smriti.nodes.state import Candidate

    ranked = [Candidate(id="a", score=1.099), Candidate(id="b", score=1.045), Candidate(id="c", score=0.4)]
    plain = unified_result("q", "recall", ranked, explain=False)["results"]
    assert [(item["id"], item["score"]) for item in plain] == [("a", 1.0), ("b", 1.0), ("c", 0.4)]
    explained = unified_result("q", "recall", ranked, explain=True)["results"]
    assert [item["components"]["raw_score"] for item in explained] == [1.099, 1.045, 0.4]
    assert all(0.0 <= item["score"] <= 1.0 for item in explained)
