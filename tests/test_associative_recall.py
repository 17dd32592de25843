"""Associative recall stages: spreading activation (PPR), conversation context, fusion weights."""

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from smriti.nodes.associate import context_relevance
from smriti.nodes.link import SAME_SOURCE_NEIGHBOURS, same_source_strength
from smriti.nodes.pagerank import activation_graph, personalized_pagerank, seed_vector
from smriti.nodes.scoring import build_fusion, rank_fusion
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph
from smriti.stores.base import Association


def _store(context, content, **extra):
    return store_graph.invoke({"content": content, **extra}, context=context)["id"]


def _recall(context, query, **extra):
    out = recall_graph.invoke({"query": query, **extra}, context=context)
    return out["result"], {t["node"]: t for t in out["trace"]}


# -- pure functions -----------------------------------------------------------------------------


def test_ppr_with_no_edges_returns_the_seeds_and_sums_to_one():
    seeds = np.array([3.0, 1.0, 0.0])
    p = personalized_pagerank(np.zeros((3, 3)), seeds, damping=0.5)
    assert p.sum() == pytest.approx(1.0)
    assert p == pytest.approx([0.75, 0.25, 0.0])


def test_ppr_spreads_along_edges_and_decays_with_distance():
    # a chain 0 - 1 - 2 - 3, restarting at 0: mass falls with the distance from the seed
    chain = np.zeros((4, 4))
    for i in range(3):
        chain[i, i + 1] = chain[i + 1, i] = 1.0
    p = personalized_pagerank(chain, np.array([1.0, 0, 0, 0]), damping=0.5)
    assert p.sum() == pytest.approx(1.0)
    assert p[0] > p[1] > p[2] > p[3] > 0
    # damping near 0 keeps almost everything at the seed
    assert personalized_pagerank(chain, np.array([1.0, 0, 0, 0]), damping=0.01)[0] > 0.98
    assert personalized_pagerank(chain, np.zeros(4), damping=0.5).sum() == 0


def test_ppr_is_the_fixed_point_of_its_formula():
    rng = np.random.default_rng(7)
    adjacency = rng.random((6, 6))
    adjacency = adjacency + adjacency.T
    seeds = np.array([1.0, 0, 2.0, 0, 0, 0])
    p = personalized_pagerank(adjacency, seeds, damping=0.5, max_iterations=200, tolerance=1e-12)
    transition = adjacency / adjacency.sum(axis=1, keepdims=True)
    assert p == pytest.approx(0.5 * seeds / seeds.sum() + 0.5 * p @ transition, abs=1e-9)


def test_activation_graph_links_engrams_through_shared_cues_and_associations():
    ids, cues, matrix = activation_graph(
        {"e1": ["pgvector", "hub"], "e2": ["pgvector"], "e3": []},
        {"pgvector": 2.0},  # "hub" has no weight: left out
        [("e2", "e3", 0.5), ("e3", "unknown", 1.0)],
        association_weight=2.0,
    )
    assert ids == ["e1", "e2", "e3"] and cues == ["pgvector"]
    assert matrix.shape == (4, 4) and np.allclose(matrix, matrix.T)
    assert matrix[0, 3] == matrix[1, 3] == 2.0  # EncodedBy weighted by the cue's idf
    assert matrix[1, 2] == 1.0  # strength 0.5 x association weight 2
    assert seed_vector(ids, cues, {"e2": 1.0}, {"pgvector": 3.0}).tolist() == [0, 1.0, 0, 3.0]


def test_context_relevance_passes_the_best_seed_over_same_source_edges_only():
    edges = [
        Association("a", "n", 0.5, "same_source"),
        Association("n", "b", 0.3, "same_source"),
        Association("a", "s", 0.9, "similar"),  # similarity is not conversation context
    ]
    passed = context_relevance({"a": 1.0, "b": 0.8}, edges, weight=2.0)
    assert passed["n"] == (pytest.approx(1.0), "a")  # 1.0 x 0.5 x 2 beats 0.8 x 0.3 x 2 from b
    assert set(passed) == {"n"}  # not the seeds themselves, not over the similarity edge
    # equal values: the smaller seed id wins, whatever the order of the edges
    tied = [Association("b", "m", 0.5, "same_source"), Association("a", "m", 0.5, "same_source")]
    assert context_relevance({"a": 1.0, "b": 1.0}, tied, 1.0)["m"] == (0.5, "a")
    assert context_relevance({"a": 1.0, "b": 1.0}, tied[::-1], 1.0)["m"] == (0.5, "a")


def test_same_source_strength_falls_with_distance():
    strengths = [same_source_strength(d) for d in range(1, SAME_SOURCE_NEIGHBOURS + 1)]
    assert strengths == sorted(strengths, reverse=True) and strengths[0] == 0.5


def test_fusion_weights_come_from_settings_and_a_zero_weight_branch_is_ignored(settings):
    fusion = build_fusion(settings.model_copy(update={"fusion_weight_cue": 0.0, "fusion_k": 3}))
    assert fusion.k == 3 and fusion.weights["cue"] == 0.0
    ranked = {"similarity": [0.9], "text": [1.0], "cue": [0.7], "graph": [0.2]}
    value, ranks = rank_fusion({"cue": 0.7}, ranked, fusion.k, fusion.weights)
    assert value == 0.0 and ranks == {}
    top, _ = rank_fusion({"similarity": 0.9, "text": 1.0, "graph": 0.2}, ranked, fusion.k, fusion.weights)
    assert top == pytest.approx(1.0)
    off = build_fusion(settings.model_copy(update={"graph_activation": False}))
    assert off.weights["graph"] == 0.0
    assert not settings.graph_activation  # off by default (README: it lost R@5 on LoCoMo)


# -- through the recall graph -------------------------------------------------------------------


def test_activation_brings_back_a_memory_linked_through_a_shared_entity(make_context):
    """The Memory Fabric example: the second memory shares no word with the question but the
    cue cursor-pagination with the first, which answers it directly."""
    context = make_context(graph_activation=True)
    first = _store(context, "database-engineer recommends cursor-pagination for the orders API")
    second = _store(context, "cursor-pagination relies on opaque tokens")
    for i in range(30):  # unrelated memories, so that cue idf means something
        _store(context, f"Weekend hike number {i} in the Alps with Priya")
    result, trace = _recall(context, "What did database-engineer recommend about pagination?", explain=True)
    ids = [r["id"] for r in result["results"]]
    assert ids[0] == first
    assert second in ids
    item = next(r for r in result["results"] if r["id"] == second)
    assert "graph" in item["metadata"]["retrieved_by"]
    assert item["components"]["rank_graph"] >= 1
    assert "cursor-pagination" in trace["activate"]["notes"] or trace["activate"]["candidates"]

    off = context.settings.model_copy(update={"graph_activation": False})
    context.settings = off
    _, trace_off = _recall(context, "What did database-engineer recommend about pagination?")
    assert trace_off["activate"]["notes"] == "graph activation off"


def test_activation_ignores_hub_cues(make_context):
    context = make_context(graph_activation=True, activation_max_cue_share=0.05)
    for i in range(25):  # every memory within each branch's pool (search.candidate_pool: 30)
        _store(context, f"Priya wrote report {i} about topic{i}")
    target = _store(context, "Priya likes pgvector")
    _, trace = _recall(context, "What does Priya like about pgvector?")
    # "priya", "wrote" and "report" encode (nearly) every memory, each topic and "pgvector" only
    # one: no cue is left for the walk to spread through, so it reaches nothing new.
    notes = trace["activate"]["notes"]
    assert " 0 cues (" in notes and "0 new engram(s) activated" in notes
    assert target


def test_conversation_context_raises_the_turn_after_the_one_found(make_context):
    """The answer to a question is often the next turn, which shares no word with the query."""
    context = make_context(context_weight=1.6)
    day = datetime(2026, 1, 10, tzinfo=UTC)
    turns = [
        "Alice: Where did you go on holiday in March?",
        "Bob: Mostly we stayed at the lake cabin with the kids.",
        "Alice: That sounds lovely.",
    ]
    ids = [
        _store(context, t, source="session_1", created_at=(day + timedelta(minutes=i)).isoformat())
        for i, t in enumerate(turns)
    ]
    for i in range(20):
        _store(context, f"Carol: unrelated chatter {i} about football", source="session_2")
    result, trace = _recall(context, "holiday in March", limit=3)
    found = [r["id"] for r in result["results"]]
    assert found[0] == ids[0]
    assert ids[1] in found  # raised as the next turn of the same session
    raised = next(r for r in result["results"] if r["id"] == ids[1])
    assert "context" in raised["metadata"]["retrieved_by"]
    assert "raised" in trace["conversation_context"]["notes"]

    context.settings = context.settings.model_copy(update={"context_weight": 0.0})
    _, trace_off = _recall(context, "holiday in March", limit=3)
    assert trace_off["conversation_context"]["notes"] == "conversation context off"


def test_same_source_links_fall_with_distance(make_context):
    context = make_context()
    ids = [_store(context, f"turn {i} of a chat about topic{i}", source="chat") for i in range(5)]
    edges = {
        frozenset((e.source_id, e.target_id)): e
        for e in context.store.neighbours([ids[4]])
        if e.relation_type == "same_source"
    }
    assert set(edges) == {frozenset((ids[4], ids[4 - d])) for d in (1, 2, 3)}
    strengths = [edges[frozenset((ids[4], ids[4 - d]))].strength for d in (1, 2, 3)]
    assert strengths == pytest.approx([same_source_strength(d) for d in (1, 2, 3)])
