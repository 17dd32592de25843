"""Clustering a large graph in a subprocess (nodes/offload.py) gives exactly the partition,
labels, modularity and resolution cache of clustering in-process."""

from __future__ import annotations

import random

import pytest

from smriti.nodes import cluster as cluster_node
from smriti.nodes.leiden import IndexedEdges, LeidenEngine, cluster_job
from smriti.nodes.offload import run_in_subprocess


def planted(
    groups: int = 12, size: int = 40, seed: int = 3
) -> tuple[dict[str, int], list[tuple[str, str, float]]]:
    """Engrams in planted groups, ~4 strong links inside a group and a weak one across."""
    rng = random.Random(seed)
    ids = [f"e{g:02d}-{i:03d}" for g in range(groups) for i in range(size)]
    edges = []
    for g in range(groups):
        members = ids[g * size : (g + 1) * size]
        for member in members:
            edges += [(member, rng.choice(members), rng.uniform(0.5, 1.0)) for _ in range(4)]
            if rng.random() < 0.5:
                edges.append((member, rng.choice(ids), rng.uniform(0.1, 0.4)))
    current = {engram_id: (i // size if i % 7 else -1) for i, engram_id in enumerate(ids)}
    return current, edges


def test_a_subprocess_clusters_exactly_as_in_process():
    current, edges = planted()
    indexed = IndexedEdges.of(current, edges)
    here_engine, here, here_labels = cluster_job(LeidenEngine(), indexed)
    there_engine, there, there_labels = run_in_subprocess(cluster_job, LeidenEngine(), indexed)
    assert there_labels.tolist() == here_labels.tolist()
    assert (there.modularity, there.clusters, there.resolution, there.scanned) == (
        here.modularity,
        here.clusters,
        here.resolution,
        here.scanned,
    )
    assert (there_engine.resolution, there_engine.tuned_nodes, there_engine.tunings) == (
        here_engine.resolution,
        here_engine.tuned_nodes,
        1,
    )
    assert here.clusters >= 8  # the planted groups, not one blob


def test_the_node_keeps_the_subprocess_engines_cache(monkeypatch):
    monkeypatch.setattr(cluster_node, "SUBPROCESS_MIN_EDGES", 0)  # this small graph goes out too
    current, edges = planted(groups=4, size=10)
    engine = LeidenEngine()
    result, labels = cluster_node.cluster(engine, IndexedEdges.of(current, edges))
    assert result.tuned and engine.tunings == 1 and engine.resolution == result.resolution
    again, labels_again = cluster_node.cluster(engine, IndexedEdges.of(current, edges))
    assert not again.tuned and labels_again == labels


def test_a_failing_subprocess_clusters_in_process(monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("no subprocess here")

    monkeypatch.setattr(cluster_node, "SUBPROCESS_MIN_EDGES", 0)
    monkeypatch.setattr(cluster_node, "run_in_subprocess", broken)
    current, edges = planted(groups=3, size=10)
    result, _ = cluster_node.cluster(LeidenEngine(), IndexedEdges.of(current, edges))
    assert result.clusters >= 2 and "clustering in-process" in caplog.text


def test_an_error_in_the_subprocess_is_reported():
    with pytest.raises(RuntimeError, match="failed in a subprocess"):
        run_in_subprocess(int, "not a number")
