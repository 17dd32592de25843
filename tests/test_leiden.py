"""Leiden clustering: the pure helpers, the engine's resolution cache, and the recluster step on Kuzu."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import combinations

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from smriti.nodes.cluster import (
    META_NODES,
    META_RESOLUTION,
    LeidenEngine,
    build_graph,
    stable_labels,
)
from smriti.nodes.link import strongest_neighbour_cluster
from smriti.nodes.refine import seed_cluster
from smriti.stores.base import Association, Engram

NOW = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
EMBEDDER = DeterministicFakeEmbedding(size=64)


def two_groups(size: int = 5, prefix: str = "") -> list[Association]:
    """Two cliques of strong associations (0.9) joined by one weak edge (0.1)."""
    edges = []
    for group in ("a", "b"):
        members = [f"{prefix}{group}{i}" for i in range(size)]
        edges += [Association(x, y, 0.9) for x, y in combinations(members, 2)]
    edges.append(Association(f"{prefix}a0", f"{prefix}b0", 0.1))
    return edges


# ----------------------------------------------------------------------------- pure helpers
def test_seed_cluster_is_the_most_common_cluster_ignoring_unclustered() -> None:
    assert seed_cluster([3, 1, 3, -1, -1, -1]) == 3
    assert seed_cluster([2, 5, 5, 2]) == 2  # tie: smallest id
    assert seed_cluster([-1, -1]) == -1
    assert seed_cluster([]) == -1


def test_inherit_cluster_takes_the_strongest_clustered_neighbour() -> None:
    strengths = {"x": 0.9, "y": 0.6, "z": 0.95}
    assert strongest_neighbour_cluster(strengths, {"x": 4, "y": 1, "z": -1}) == 4  # z is unclustered
    assert strongest_neighbour_cluster(strengths, {"y": 1}) == 1  # x and z unknown
    assert (
        strongest_neighbour_cluster({"x": 0.5, "y": 0.5}, {"x": 7, "y": 2}) == 2
    )  # tie: smallest cluster id
    assert strongest_neighbour_cluster(strengths, {}) == -1
    assert strongest_neighbour_cluster({}, {"x": 1}) == -1


def test_build_graph_folds_directions_with_the_max_strength() -> None:
    graph = build_graph(
        [
            Association("b", "a", 0.3),
            Association("a", "b", 0.7),
            Association("a", "a", 1.0),  # self-loop: dropped
            Association("a", "c", 0.0),  # no weight: dropped
            Association("c", "ghost", 0.5),  # unknown engram: dropped
            Association("c", "b", 0.4),
        ],
        known_ids={"a", "b", "c"},
    )
    assert graph.ids == ("a", "b", "c")
    assert dict(zip(graph.edges, graph.weights, strict=True)) == {(0, 1): 0.7, (1, 2): 0.4}


def test_stable_labels_order_by_size_then_smallest_member() -> None:
    labels = stable_labels([["q", "r"], ["m", "n", "o"], ["a", "z"]])
    assert labels == {"m": 0, "n": 0, "o": 0, "a": 1, "z": 1, "q": 2, "r": 2}


def test_stable_labels_keep_previous_ids_and_give_new_communities_free_ids() -> None:
    previous = {"m": 5, "n": 5, "o": 5, "a": 0, "z": 0, "q": -1}
    labels = stable_labels([["m", "n", "o", "p"], ["a", "z"], ["q", "r"]], previous)
    assert labels["m"] == labels["p"] == 5
    assert labels["a"] == labels["z"] == 0
    assert labels["q"] == labels["r"] == 1  # smallest id not taken


def test_stable_labels_give_a_contested_id_to_the_larger_overlap() -> None:
    # Cluster 3 split in two: the part holding most of its members keeps the id.
    previous = {"a": 3, "b": 3, "c": 3, "d": 3, "e": 3}
    labels = stable_labels([["a", "b"], ["c", "d", "e"]], previous)
    assert labels["c"] == 3 and labels["a"] == 0


# ----------------------------------------------------------------------------- engine
def test_engine_splits_two_dense_groups_joined_by_a_weak_edge() -> None:
    result = LeidenEngine().run(build_graph(two_groups()))
    assert result.skipped is None and result.tuned
    assert result.clusters == 2
    a = {result.membership[f"a{i}"] for i in range(5)}
    b = {result.membership[f"b{i}"] for i in range(5)}
    assert len(a) == 1 and len(b) == 1 and a != b
    assert result.modularity > 0.3
    assert result.resolution in LeidenEngine().resolutions


@pytest.mark.parametrize("implementation", ["igraph", "leidenalg"])
def test_engine_is_deterministic(implementation: str) -> None:
    graph = build_graph(two_groups(size=8))
    first = LeidenEngine(implementation=implementation).run(graph)
    second = LeidenEngine(implementation=implementation).run(graph)
    assert first.membership == second.membership
    assert first.resolution == second.resolution
    assert first.clusters == 2


def test_engine_reuses_the_tuned_resolution() -> None:
    engine = LeidenEngine()
    graph = build_graph(two_groups())
    first = engine.run(graph)
    second = engine.run(graph, previous=first.membership)
    assert first.tuned and not second.tuned
    assert engine.tunings == 1
    assert second.membership == first.membership
    assert second.scanned == {} and len(first.scanned) == len(engine.resolutions)


def test_engine_retunes_only_after_more_than_the_growth_allowance() -> None:
    engine = LeidenEngine(retune_growth=0.10)
    engine.run(build_graph(two_groups(size=5)))  # 10 nodes
    assert (engine.tuned_nodes, engine.tunings) == (10, 1)
    eleven = [*two_groups(size=5), Association("a1", "new1", 0.8)]
    assert not engine.run(build_graph(eleven)).tuned  # 11 nodes: exactly +10%, not more
    twelve = [*eleven, Association("b1", "new2", 0.8)]
    assert engine.run(build_graph(twelve)).tuned  # 12 nodes: +20%
    assert (engine.tuned_nodes, engine.tunings) == (12, 2)


def test_engine_skips_small_graphs_and_graphs_without_edges() -> None:
    engine = LeidenEngine()
    small = engine.run(build_graph([Association("a", "b", 0.9)]))
    assert small.skipped and small.membership == {} and not small.tuned
    assert engine.run(build_graph([])).skipped
    assert engine.tunings == 0 and engine.resolution is None


def test_engine_rejects_an_unknown_implementation() -> None:
    with pytest.raises(ValueError, match="unknown Leiden implementation"):
        LeidenEngine(implementation="louvain")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- recluster on Kuzu
@pytest.fixture
def context(settings):
    from smriti.pipelines.context import MemoryContext
    from smriti.stores import make_store

    store = make_store(settings)
    yield MemoryContext(store=store, embedder=EMBEDDER, settings=settings, clock=lambda: NOW)
    store.close()


def add_engrams(store, ids, cluster_id: int = -1) -> None:
    for engram_id in ids:
        text = f"memory {engram_id}"
        store.create_engram(
            Engram(content=text, id=engram_id, embedding=EMBEDDER.embed_query(text), cluster_id=cluster_id,
                   created_at=NOW, last_accessed_at=NOW)
        )  # fmt: skip


def populate(store, edges: list[Association]) -> None:
    """Create the engrams the edges name (unless they exist), then the edges."""
    ends = {e.source_id for e in edges} | {e.target_id for e in edges}
    add_engrams(store, sorted(ends - {e.id for e in store.engram_states()}))
    for edge in edges:
        store.associate(edge)


def consolidate(context) -> dict:
    from smriti.pipelines.consolidate import consolidate_graph

    return consolidate_graph.invoke({}, context=context)["report"]


def clusters_of(store) -> dict[str, int]:
    return {e.id: e.cluster_id for e in store.engram_states()}


def test_recluster_writes_two_clusters_and_unclusters_isolated_engrams(context) -> None:
    store = context.store
    populate(store, two_groups(prefix="m-"))
    add_engrams(store, ["m-lonely"], cluster_id=7)  # a stale id from an older clustering
    report = consolidate(context)
    assert report["clusters"] == 2
    assert report["leiden"]["tuned"] and report["leiden"]["skipped"] is None
    clusters = clusters_of(store)
    assert clusters["m-lonely"] == -1
    a = {clusters[f"m-a{i}"] for i in range(5)}
    b = {clusters[f"m-b{i}"] for i in range(5)}
    assert len(a) == 1 and len(b) == 1 and a != b and -1 not in a | b
    assert report["leiden"]["changed"] == 11
    assert store.get_meta(META_NODES) == "10"
    assert float(store.get_meta(META_RESOLUTION)) == report["leiden"]["resolution"]


def test_an_unchanged_graph_is_skipped_and_a_changed_one_reuses_the_cached_resolution(context) -> None:
    store = context.store
    populate(store, two_groups(prefix="m-"))
    first = consolidate(context)
    before = clusters_of(store)
    second = consolidate(context)  # nothing changed: no partition at all, as the original
    assert first["leiden"]["tuned"] and first["leiden"]["skipped"] is None
    assert second["leiden"]["skipped"] == "the graph is unchanged since the last clustering"
    assert not second["leiden"]["tuned"] and second["leiden"]["changed"] == 0
    assert (second["clusters"], second["leiden"]["nodes"]) == (2, 10)
    store.associate(Association("m-a3", "m-b3", 0.2))  # a new weak association across
    third = consolidate(context)
    assert third["leiden"]["skipped"] is None and not third["leiden"]["tuned"]
    assert third["leiden"]["resolution"] == first["leiden"]["resolution"]
    assert third["leiden"]["changed"] == 0
    assert clusters_of(store) == before


def test_a_cluster_id_changed_behind_the_engine_is_not_skipped(context) -> None:
    store = context.store
    populate(store, two_groups(prefix="m-"))
    consolidate(context)
    before = clusters_of(store)
    store.update_engrams({"m-a1": {"cluster_id": 42}})  # another process, an import, a repair
    again = consolidate(context)
    assert again["leiden"]["skipped"] is None and again["leiden"]["changed"] == 1
    assert clusters_of(store) == before


def test_the_reported_time_leaves_out_importing_igraph(monkeypatch) -> None:
    """The first run in a process imports igraph; that import is not the clustering's time."""
    import builtins
    import sys
    import time

    import igraph  # noqa: F401  (imported here: the run's own statement finds it loaded)

    real_import = builtins.__import__
    cold = [True]

    def slow_igraph_import(name, *args, **kwargs):
        if name == "igraph" and cold.pop() if cold else False:
            time.sleep(0.5)  # the first import of igraph in a process, on a loaded machine
        return real_import(name, *args, **kwargs)

    assert "igraph" in sys.modules  # imported above: only the statement's time is added
    monkeypatch.setattr(builtins, "__import__", slow_igraph_import)
    result = LeidenEngine().run(build_graph(two_groups()))
    assert result.clusters == 2 and result.ms < 400, result.ms


def test_a_new_context_reads_the_resolution_cache_from_the_store(context, settings) -> None:
    from smriti.pipelines.context import MemoryContext

    populate(context.store, two_groups(prefix="m-"))
    assert consolidate(context)["leiden"]["tuned"]
    # Another process (or a restarted server) on the same store: no in-process cache, no retune.
    fresh = MemoryContext(store=context.store, embedder=EMBEDDER, settings=settings, clock=lambda: NOW)
    assert not consolidate(fresh)["leiden"]["tuned"]


def test_growth_over_ten_percent_retunes(context) -> None:
    store = context.store
    populate(store, two_groups(prefix="m-"))  # 10 connected engrams
    assert consolidate(context)["leiden"]["tuned"]
    populate(store, [Association("m-a1", "m-new1", 0.8)])  # 11: +10%
    assert not consolidate(context)["leiden"]["tuned"]
    populate(store, [Association("m-b1", "m-new2", 0.8)])  # 12: +20%
    report = consolidate(context)
    assert report["leiden"]["tuned"] and report["leiden"]["nodes"] == 12
    assert store.get_meta(META_NODES) == "12"


def test_fewer_than_three_connected_engrams_skip_cleanly(context) -> None:
    store = context.store
    populate(store, [Association("m-x", "m-y", 0.9)])
    add_engrams(store, ["m-z"], cluster_id=3)
    report = consolidate(context)
    assert report["leiden"]["skipped"] and report["clusters"] == 0
    assert not report["leiden"]["tuned"] and store.get_meta(META_RESOLUTION) is None
    assert set(clusters_of(store).values()) == {-1}  # the stale id 3 was reset


# ----------------------------------------------------------------------------- the engine setting
def _count_calls(monkeypatch, owner, name: str) -> list[int]:
    """Count calls of ``owner.name``, which still runs: the clustering is the real one."""
    real, calls = getattr(owner, name), []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


TOPICS = {
    "db": "postgres database index query planner vacuum replication",
    "garden": "garden tomato soil compost seedlings watering mulch",
}


def test_stored_memories_on_two_topics_cluster_apart_through_leidenalg(settings, monkeypatch) -> None:
    """The design's package, end to end on a real store: the store pipeline links the memories, a
    consolidation clusters them with leidenalg, and each topic gets a cluster of its own."""
    import leidenalg

    from smriti.memory import Memory

    settings = settings.model_copy(update={"leiden_engine": "leidenalg"})
    runs = _count_calls(monkeypatch, leidenalg.Optimiser, "optimise_partition")
    ids: dict[str, list[str]] = {}
    with Memory.open(settings) as memory:
        for topic, words in TOPICS.items():
            vocabulary = words.split()
            for i in range(6):
                text = " ".join(vocabulary[i:] + vocabulary[:i]) + f" note {topic} {i}"
                ids.setdefault(topic, []).append(memory.store(text)["id"])
        report = memory.consolidate()
        clusters = {e.id: e.cluster_id for e in memory.context.store.engram_states()}
    assert report["leiden"]["engine"] == "leidenalg" and runs
    db, garden = ({clusters[i] for i in ids[topic]} for topic in TOPICS)
    assert len(db) == 1 and len(garden) == 1 and db != garden and -1 not in db | garden, clusters


def test_the_engine_setting_chooses_what_runs(make_context, monkeypatch) -> None:
    import igraph
    import leidenalg

    from smriti.config import Settings

    assert Settings.model_fields["leiden_engine"].default == LeidenEngine().implementation == "igraph"

    leidenalg_runs = _count_calls(monkeypatch, leidenalg.Optimiser, "optimise_partition")
    igraph_runs = _count_calls(monkeypatch, igraph.Graph, "community_leiden")
    by_engine = {}
    for engine in ("igraph", "leidenalg"):
        context = make_context(user=f"u-{engine}", leiden_engine=engine)
        populate(context.store, two_groups(prefix="m-"))
        by_engine[engine] = consolidate(context)["leiden"]
        assert by_engine[engine]["engine"] == engine
        assert context.cache.leiden is not None and context.cache.leiden.implementation == engine
        if engine == "igraph":
            assert igraph_runs and not leidenalg_runs
    assert leidenalg_runs
    # The same algorithm and quality function: the same two clusters either way.
    assert by_engine["igraph"]["clusters"] == by_engine["leidenalg"]["clusters"] == 2


def test_an_unknown_engine_is_a_one_line_settings_error(monkeypatch) -> None:
    from smriti.config import SettingsError, load_settings

    monkeypatch.setenv("LEIDEN_ENGINE", "louvain")
    with pytest.raises(SettingsError) as error:
        load_settings()
    problems = str(error.value).splitlines()[1:]  # after "invalid configuration:"
    assert [line.strip() for line in problems] == ["LEIDEN_ENGINE: Input should be 'igraph' or 'leidenalg'"]
