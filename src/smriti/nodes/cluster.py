"""The consolidation step that reclusters: Leiden over the AssociatedWith graph (the engine,
its resolution cache and stable labels are in :mod:`smriti.nodes.leiden`).

What the server's threads wait for. Reading the graph and writing the labels take the store's
time; the clustering itself holds no lock, and on a large graph (SUBPROCESS_MIN_EDGES edges or
more) runs in a child process (:mod:`smriti.nodes.offload`), because Leiden keeps the GIL for
seconds at 100k engrams and every recall would wait behind it. The changed cluster ids are
written a chunk at a time under the write lock, with a pause between chunks.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from smriti.nodes.leiden import (
    DEFAULT_RESOLUTIONS,
    DEFAULT_SEED,
    META_NODES,
    META_RESOLUTION,
    MIN_NODES,
    ClusterResult,
    IndexedEdges,
    LeidenEngine,
    WeightedGraph,
    build_graph,
    cluster_job,
    graph_of,
    stable_labels,
)
from smriti.nodes.offload import run_in_subprocess
from smriti.nodes.state import ConsolidateState, MemoryContext, pause, traced

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

__all__ = [
    "DEFAULT_RESOLUTIONS",
    "DEFAULT_SEED",
    "META_NODES",
    "META_RESOLUTION",
    "MIN_NODES",
    "ClusterResult",
    "LeidenEngine",
    "WeightedGraph",
    "build_graph",
    "engine_for",
    "graph_of",
    "recluster",
    "stable_labels",
]

logger = logging.getLogger(__name__)

# Graphs with this many edges are clustered in a subprocess: Leiden holds the GIL ~30 ms at
# 1k engrams (~4k edges) but seconds at 100k; below, starting a process (~0.3 s) is not worth it.
SUBPROCESS_MIN_EDGES = 5_000
# Cluster ids written per hold of the write lock: a first clustering at 100k changes every
# engram, and one statement for all of them held the lock (and a recall's reinforcement) ~1 s.
WRITE_CHUNK = 250


def engine_for(context: MemoryContext) -> LeidenEngine:
    """The user's engine (``LEIDEN_ENGINE`` runs it), kept in the context cache, its resolution read
    from the store's metadata at every run: another server process on the same database may have
    retuned it since (two reads per consolidation; the engine in memory never outranks what the
    database says)."""
    settings = context.settings
    engine = context.cache.leiden
    if engine is None or engine.implementation != settings.leiden_engine:
        engine = context.cache.leiden = LeidenEngine(
            retune_growth=settings.leiden_retune_growth, implementation=settings.leiden_engine
        )
    engine.load(context.store)
    engine.retune_growth = settings.leiden_retune_growth
    return engine


def cluster(engine: LeidenEngine, edges: IndexedEdges) -> tuple[ClusterResult, list[int]]:
    """:func:`~smriti.nodes.leiden.cluster_job` in a subprocess for a large graph (in-process if
    that fails, logged), here for a small one; ``engine`` takes the cache the run left."""
    if len(edges.strengths) >= SUBPROCESS_MIN_EDGES:
        try:
            ran, result, labels = run_in_subprocess(cluster_job, engine, edges)
        except (OSError, RuntimeError) as error:  # why: the clustering is still owed, if slower
            logger.warning("clustering in a subprocess failed (%s); clustering in-process", error)
        else:
            engine.resolution, engine.tuned_nodes, engine.tunings = (
                ran.resolution,
                ran.tuned_nodes,
                ran.tunings,
            )
            engine.last_digest, engine.last_result = ran.last_digest, ran.last_result
            return result, labels.tolist()
    _, result, labels = cluster_job(engine, edges)
    return result, labels.tolist()


# ----------------------------------------------------------------------------- node
@traced
def recluster(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Leiden over the AssociatedWith graph; changed cluster ids are written in chunks.

    Engrams outside the graph (no associations, or a graph too small to cluster) get -1. A
    recall between two chunks may see some engrams relabelled and not yet others: cluster ids
    only steer a soft penalty.
    """
    context = runtime.context
    store = context.store
    current = {engram.id: engram.cluster_id for engram in store.engram_states()}
    edges = IndexedEdges.of(current, store.association_weights())
    engine = engine_for(context)
    result, labels = cluster(engine, edges)
    updates = [
        (engram_id, label)
        for engram_id, label, cluster_id in zip(edges.ids, labels, edges.clusters.tolist(), strict=True)
        if label != cluster_id
    ]
    changed = 0
    for start in range(0, len(updates), WRITE_CHUNK):
        with context.write_lock:
            chunk = updates[start : start + WRITE_CHUNK]
            changed += store.update_engrams({engram_id: {"cluster_id": label} for engram_id, label in chunk})
        pause()
    if result.tuned:
        with context.write_lock:
            engine.save(store)
    leiden = {**result.report(), "changed": changed}
    if result.skipped:
        notes = f"skipped: {result.skipped}" + (f"; {changed} reset to -1" if changed else "")
    else:
        how = "tuned" if result.tuned else "cached"
        notes = (
            f"{result.clusters} clusters over {result.nodes} engrams, "
            f"resolution {result.resolution} ({how}), Q={result.modularity:.3f}, {changed} changed"
        )
    return {"report": {"clusters": result.clusters, "leiden": leiden}, "_notes": notes}
