"""The learned fusion's features and model (nodes/learned.py): scale-free, monotone, explained."""

from __future__ import annotations

import pytest

from smriti.nodes.learned import FusionModel, fusion_features, learned_relevance, shipped_model

RANKED = {"similarity": [0.62, 0.55, 0.41, 0.40, 0.39, 0.38], "text": [1.0, 0.7, 0.2], "cue": [0.5]}


def test_features_of_the_first_hit_of_every_branch():
    features, ranks = fusion_features({"similarity": 0.62, "text": 1.0, "cue": 0.5}, RANKED, k=5)
    assert ranks == {"similarity": 1, "text": 1, "cue": 1}
    for branch in ("similarity", "text", "cue"):
        assert features[f"{branch}_rank"] == pytest.approx(1.0)
        assert features[f"{branch}_ratio"] == pytest.approx(1.0)
    assert features["agreement"] == 1.0
    assert features["similarity_gap"] > 0


def test_a_branch_that_missed_the_memory_gives_zeros():
    features, ranks = fusion_features({"similarity": 0.40, "text": 0.0}, RANKED, k=5)
    assert "text" not in ranks and features["text_rank"] == features["text_ratio"] == 0.0
    assert features["similarity_rank"] == pytest.approx(6 / 9)  # fourth of the dense hits
    assert features["agreement"] == 0.0


def test_features_do_not_depend_on_the_embedder_s_scale():
    """A hashing embedder's cosines are a fraction of MiniLM's; the features are the same."""
    scaled = {**RANKED, "similarity": [v / 3 for v in RANKED["similarity"]]}
    plain, _ = fusion_features({"similarity": 0.41, "text": 0.7}, RANKED, k=5)
    small, _ = fusion_features({"similarity": 0.41 / 3, "text": 0.7}, scaled, k=5)
    assert small == pytest.approx(plain)


def test_the_model_is_a_logistic_function_of_its_weighted_features():
    model = FusionModel({"text_rank": 2.0, "similarity_rank": 1.0}, bias=-1.5, k=5)
    high, _, parts = learned_relevance({"similarity": 0.62, "text": 1.0}, RANKED, model)
    low = learned_relevance({"similarity": 0.39, "text": 0.2}, RANKED, model)[0]
    assert 0 < low < high < 1
    assert high == pytest.approx(1 / (1 + 2.718281828 ** -(2.0 + 1.0 - 1.5)), rel=1e-6)
    assert parts == pytest.approx({"text_rank": 2.0, "similarity_rank": 1.0})  # what explain shows


def test_the_shipped_model_reads_every_feature_it_was_fitted_on(make_context):
    model = shipped_model()
    features, _ = fusion_features({"similarity": 0.62, "text": 1.0, "cue": 0.5}, RANKED, model.k)
    assert set(model.weights) == set(features)
    assert make_context(fusion="learned").fusion.model is model
    assert make_context(user="bob").fusion.model is None  # the hand-set weights by default


def test_explain_shows_the_learned_fusion_s_contributions(make_context):
    from smriti.pipelines.recall import recall_pipeline
    from smriti.pipelines.stages import run as invoke
    from smriti.pipelines.store import store_pipeline

    context = make_context(fusion="learned")
    for note in ["Dana leads the payments team", "Omar manages the search team", "Payments ship on Fridays"]:
        invoke(store_pipeline.graph, {"content": note}, context)
    result = invoke(recall_pipeline.graph, {"query": "who leads payments", "explain": True}, context)[
        "result"
    ]
    top = result["results"][0]
    assert top["text"] == "Dana leads the payments team"
    parts = {k: v for k, v in top["components"].items() if k.startswith("fusion_")}
    assert parts and all(isinstance(v, float) for v in parts.values())
    assert 0 < top["components"]["relevance"] < 1
