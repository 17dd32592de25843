"""The recall graph, node by node, on a small real Kuzu graph with a fake embedder."""

from datetime import UTC, datetime

import pytest

from smriti.errors import InvalidInput
from smriti.pipelines.checkpoint import checkpointer
from smriti.pipelines.recall import build_recall_graph, recall_graph
from smriti.pipelines.store import store_graph
from smriti.stores.base import Association, Relation

VOCABULARY = ["alpha", "beta", "gamma", "delta", "notes"]


def _store(context, content, **extra):
    return store_graph.invoke({"content": content, **extra}, context=context)["id"]


def _recall(context, query, **extra):
    out = recall_graph.invoke({"query": query, **extra}, context=context)
    return out["result"], out["trace"]


def _by_id(result):
    return {r["id"]: r for r in result["results"]}


@pytest.fixture
def topic_context(make_context, keyword_embedder):
    return make_context(embedder=keyword_embedder(VOCABULARY))


@pytest.fixture
def hop_context(make_context, keyword_embedder):
    """Multi-hop expansion turned on (off by default: it measured 0.0 on recall)."""
    return make_context(embedder=keyword_embedder(VOCABULARY), max_hops=2)


def test_cue_traversal_finds_memory_sharing_no_words_with_the_query(make_context):
    context = make_context()
    ledger = _store(context, "The ledger service runs on Postgres", tags="finance")
    _store(context, "Weekend hike in the alps", tags="outdoors")
    result, trace = _recall(context, "finance")
    assert ledger in _by_id(result)
    assert "cue" in _by_id(result)[ledger]["metadata"]["retrieved_by"]
    cue_step = next(t for t in trace if t["node"] == "cue_traverse")
    assert [c["id"] for c in cue_step["candidates"]] == [ledger]


def test_multi_hop_reaches_an_associate_vector_search_misses(hop_context):
    context = hop_context
    a = _store(context, "alpha alpha")
    b = _store(context, "beta beta")
    _store(context, "gamma gamma")
    context.store.associate(Association(a, b, 0.9, "similar"))

    search, _ = _recall(context, "alpha", mode="search")
    assert b not in _by_id(search)

    # Spreading activation reaches b over the same edge, as a graph-branch candidate (no hop) ...
    context.settings = context.settings.model_copy(update={"graph_activation": True})
    activated, _ = _recall(context, "alpha")
    assert "graph" in _by_id(activated)[b]["metadata"]["retrieved_by"]
    assert _by_id(activated)[b]["metadata"]["hops"] == 0
    # ... and without it, multi-hop expansion does.
    context.settings = context.settings.model_copy(update={"graph_activation": False})
    result, _ = _recall(context, "alpha", explain=True)
    hop = _by_id(result)[b]
    assert hop["metadata"]["hops"] == 1 and hop["metadata"]["via"] == a
    assert hop["components"]["hop_factor"] == pytest.approx(context.settings.hop_penalty)
    assert _by_id(result)[a]["components"]["hop_factor"] == 1.0
    assert result["results"][0]["id"] == a


def test_cross_cluster_penalty_halves_only_out_of_cluster_hops(hop_context):
    context = hop_context
    a = _store(context, "alpha alpha")
    b = _store(context, "beta beta")
    d = _store(context, "delta delta")
    for target in (b, d):
        context.store.associate(Association(a, target, 0.9, "similar"))
    context.store.update_engrams({a: {"cluster_id": 1}, b: {"cluster_id": 1}, d: {"cluster_id": 2}})
    # Hops only: spreading activation would reach b and d first (as direct graph candidates).
    context.settings = context.settings.model_copy(update={"graph_activation": False})
    result, _ = _recall(context, "alpha", explain=True)
    items = _by_id(result)
    assert items[a]["components"]["cluster_factor"] == 1.0
    assert items[b]["components"]["cluster_factor"] == 1.0
    assert items[d]["components"]["cluster_factor"] == pytest.approx(0.5)
    assert items[d]["score"] == pytest.approx(items[b]["score"] * 0.5, rel=1e-3)


def test_recall_dedupe_merges_near_identical_results(topic_context):
    context = topic_context
    # Embedding cosine 0.949: stored apart (below STORE_DEDUP_THRESHOLD); text similarity 0.95:
    # merged at recall (Memory Fabric: text similarity > 85 %).
    first = _store(context, "alpha notes kept in the shared drive for the whole team")
    second = _store(context, "alpha notes notes kept in the shared drive for the whole team")
    assert first != second
    # Cosine 0.894 but different words (text similarity 0.67): not duplicates.
    third = _store(context, "alpha alpha beta")
    fourth = _store(context, "alpha alpha alpha")
    both, _ = _recall(context, "alpha alpha", limit=10)
    assert {third, fourth} <= set(_by_id(both))
    result, _ = _recall(context, "alpha notes")
    ids = [r["id"] for r in result["results"]]
    assert len({first, second} & set(ids)) == 1
    kept = result["results"][0]
    assert kept["metadata"]["cross_validated"] is True
    assert set(kept["metadata"]["merged_ids"]) == {first, second} - {kept["id"]}


def test_graph_relations_are_attached(topic_context):
    context = topic_context
    a = _store(context, "alpha notes")
    context.store.add_relation(Relation("database-engineer", "recommends", "cursor-pagination", engram_id=a))
    result, _ = _recall(context, "alpha")
    own = {"from": "database-engineer", "relation": "recommends", "to": "cursor-pagination", "kind": "own"}
    assert own in _by_id(result)[a]["graph_relations"]


def test_reinforcement_updates_access_time_count_and_decay(topic_context):
    context = topic_context
    a = _store(context, "alpha notes")
    context.store.update_engram(a, decay_factor=0.5, last_accessed_at=datetime(2025, 1, 1, tzinfo=UTC))
    _recall(context, "alpha")
    engram = context.store.get_engram(a)
    assert engram.access_count == 1
    assert engram.last_accessed_at == context.clock()
    assert engram.decay_factor == pytest.approx(0.5 + context.settings.reinforce_boost)


def test_list_mode_and_empty_query_return_recent_without_reinforcing(topic_context):
    context = topic_context
    old = _store(context, "alpha notes", created_at=datetime(2025, 1, 1, tzinfo=UTC).isoformat())
    new = _store(context, "beta notes", created_at=datetime(2025, 6, 1, tzinfo=UTC).isoformat())
    for query, mode in (("", "recall"), ("ignored", "list")):
        result, _trace = _recall(context, query, mode=mode)
        assert result["mode"] == "list"
        assert [r["id"] for r in result["results"]] == [new, old]
    assert context.store.get_engram(new).access_count == 0


def test_memory_type_filter(make_context):
    context = make_context()
    _store(context, "To deploy, first run the tests, then run make release")
    _store(context, "Yesterday I met Sam at the station")
    for mode in ("recall", "search", "list"):
        result, _ = _recall(context, "deploy release station", mode=mode, memory_type="procedural")
        assert result["results"], mode
        assert {r["memory_type"] for r in result["results"]} == {"procedural"}


def test_trace_lists_every_node_that_ran(topic_context):
    _store(topic_context, "alpha notes")
    _, trace = _recall(topic_context, "alpha")
    ran = [t["node"] for t in trace]
    assert ran[:3] == ["validate_recall", "extract_query_cues", "recognise"]
    assert set(ran[3:6]) == {"cue_traverse", "vector_search", "fulltext_search"}
    assert ran[6:] == [
        "gather",
        "activate",
        "conversation_context",
        "multi_hop",
        "episode_context",
        "relation_traverse",
        "bridge",
        "focus",
        "rerank",
        "current_only",
        "find_seed_cluster",
        "shortlist_candidates",
        "merge_duplicates",
        "cross_reference",
        "score",
        "demote_superseded",
        "reinforce",
        "format_result",
    ]
    assert all(t["ms"] >= 0 for t in trace)


def test_step_through_with_checkpointer(topic_context):
    a = _store(topic_context, "alpha notes")
    graph = build_recall_graph(checkpointer=checkpointer(), interrupt_before=["multi_hop"])
    config = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"query": "alpha"}, config, context=topic_context)
    paused = graph.get_state(config)
    assert paused.next == ("multi_hop",)
    assert [c.id for c in paused.values["candidates"]] == [a]
    final = graph.invoke(None, config, context=topic_context)
    assert final["result"]["results"][0]["id"] == a


@pytest.mark.parametrize("bad", [{"mode": "fuzzy"}, {"limit": 0}, {"limit": 21}, {"memory_type": "dream"}])
def test_bad_recall_input(topic_context, bad):
    with pytest.raises(InvalidInput):
        recall_graph.invoke({"query": "alpha", **bad}, context=topic_context)


def test_shortlist_never_changes_the_top_results(make_context):
    """One memory recalled with limit 3 (shortlisted hard) and with limit 20: the same top 3.

    One store, not two filled alike: ties between equally similar memories are broken by their
    (random) ids when associations are made, so two stores of the same texts are not the same graph.
    """
    import itertools
    from datetime import timedelta

    from smriti.providers.hashing import HashingEmbeddings

    words = "postgres index garden tomato coffee espresso billing invoice deploy friday".split()
    corpus = [" ".join(triple) for triple in itertools.combinations(words, 3)][:40]  # no near-duplicates
    # Relevance-heavy weights narrow the score bounds, so the shortlist has something to drop;
    # no reinforcement, so the first recall does not change the second.
    weights = {"score_weight_similarity": 0.85, "score_weight_recency": 0.05, "score_weight_decay": 0.05}
    context = make_context(
        embedder=HashingEmbeddings(64), score_weight_importance=0.05, reinforce_boost=0.0, **weights
    )
    start = datetime(2025, 11, 1, tzinfo=UTC)  # distinct ages before the fixed clock
    for i, content in enumerate(corpus):
        _store(context, content, importance=(i % 5) / 5, created_at=(start + timedelta(days=i)).isoformat())
    rankings = []
    for limit in (3, 20):
        result, trace = _recall(context, "postgres garden espresso", limit=limit)
        shortlisted = next(t for t in trace if t["node"] == "shortlist_candidates")
        rankings.append(([r["text"] for r in result["results"]][:3], shortlisted["notes"]))
    (small, small_notes), (large, _) = rankings
    assert small == large
    kept, total = (int(x) for x in small_notes.split(" candidates")[0].split(" of "))
    assert kept < total  # it did drop something


def test_recency_is_the_memorys_age_not_its_last_recall(topic_context):
    """Reinforcement must not feed back into recency, or each recall would boost its own results."""
    from datetime import timedelta

    now = topic_context.clock()
    memory_id = _store(topic_context, "alpha notes", created_at=(now - timedelta(days=14)).isoformat())
    first, _ = _recall(topic_context, "alpha", explain=True)
    second, _ = _recall(topic_context, "alpha", explain=True)  # the first recall set last access = now
    parts = [_by_id(r)[memory_id]["components"] for r in (first, second)]
    expected_recency = 0.5 ** (14 / topic_context.settings.recency_half_life_days)  # two half-lives
    assert parts[0]["recency"] == pytest.approx(0.2 * expected_recency * parts[0]["relevance"], rel=1e-3)
    assert parts[1]["recency"] == pytest.approx(parts[0]["recency"], rel=1e-6)
    assert parts[1]["decay"] >= parts[0]["decay"]  # use still counts, through decay_factor


def test_superseded_memories_never_take_the_places_of_current_ones(make_context):
    """current_only runs before the shortlist: when the best matches are all superseded, the
    recall still fills ``limit`` with current memories instead of returning fewer."""
    context = make_context()
    topics = ["harbour", "orchard", "glacier", "lantern", "meadow", "quarry"]
    old = [_store(context, f"Budget review for the {topic} budget project budget") for topic in topics]
    for topic, old_id in zip(topics, old, strict=True):
        _store(context, f"The {topic} figures were corrected", supersedes=old_id)
    current = [_store(context, f"A note on the {topic} budget") for topic in ("falcon", "willow", "copper")]
    assert len(set(current)) == 3
    result, _ = _recall(context, "budget review budget", limit=2)
    ids = [r["id"] for r in result["results"]]
    assert len(ids) == 2
    assert set(ids) <= set(current)
