"""Leiden clustering of the AssociatedWith graph, with a per-user resolution cache (the engine;
the consolidation node is ``nodes/cluster.py``). No LangGraph here: a subprocess imports this.

The graph is undirected and weighted: an association stored in both directions counts
once, with the larger strength. Engrams without associations are not in the graph and
get cluster ``-1``.

Resolution tuning. The objective is generalised modularity (Reichardt-Bornholdt with the
configuration null model, ``RBConfigurationVertexPartition`` in leidenalg terms)::

    Q_gamma = 1/(2m) * sum_ij (A_ij - gamma * k_i k_j / (2m)) * delta(c_i, c_j)

On the first run (and whenever the graph has grown by more than LEIDEN_RETUNE_GROWTH since)
the engine partitions the graph at a few resolutions ``gamma`` and keeps the one whose
partition scores the highest plain modularity ``Q_1`` (ties: the gamma closest to 1). Later
runs partition once at the cached gamma. The cache lives in the engine (kept in
``MemoryContext.cache``, so per user) and in the store's metadata (``leiden_resolution``,
``leiden_nodes``), so a restarted server does not retune.

Implementation (``LEIDEN_ENGINE``). igraph's built-in ``Graph.community_leiden`` (the default)
and leidenalg's optimiser (the design card's package) are the same algorithm, by the same author,
optimising the same quality function; on the scale corpus's graphs leidenalg took 11-16x the CPU
for partitions of the same modularity (bench/leiden_engines.py; bench/RESULTS.md, "Leiden
engines"): 55 s against 4 s to tune at 100k memories. Both run with a fixed seed, so the same
graph always gives the same partition, and the result names the engine that ran.

Unchanged graphs. The engine remembers a digest of what its last run left: every engram id,
its cluster id after the run, and every edge with its strength. A run whose input has the same
digest (no engram, association, strength or cluster id changed since) is skipped and reported
as skipped, as the original server skips an unchanged graph; anything else runs again.

Stable labels. Raw community numbers are arbitrary, so communities are ordered by size
(largest first) then by their smallest engram id, and each takes the previous cluster id
most of its members had (greedy by overlap), new ones the smallest free ids. Re-running
on an unchanged graph therefore writes nothing, and a little growth renames nothing.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from smriti.stores.base import NO_CLUSTER, Association

if TYPE_CHECKING:
    from smriti.stores.base import GraphStore

logger = logging.getLogger(__name__)

MIN_NODES = 3
DEFAULT_RESOLUTIONS: tuple[float, ...] = (0.5, 0.75, 1.0, 1.5, 2.0)
DEFAULT_SEED = 42
META_RESOLUTION = "leiden_resolution"
META_NODES = "leiden_nodes"
# Two partitions whose modularity differs by less than this are equally good.
_Q_TIE = 1e-9
# igraph draws from a process-wide generator; swapping in a seeded one must not race.
_IGRAPH_RNG_LOCK = threading.Lock()


# ----------------------------------------------------------------------------- pure helpers
@dataclass(frozen=True, slots=True)
class WeightedGraph:
    """An undirected weighted graph on engram ids (sorted, so vertex order is deterministic)."""

    ids: tuple[str, ...]
    edges: tuple[tuple[int, int], ...]
    weights: tuple[float, ...]


def build_graph(associations: Iterable[Association], known_ids: set[str] | None = None) -> WeightedGraph:
    """Fold AssociatedWith edges into an undirected graph: ``w(a, b) = max(strength(a->b), strength(b->a))``.

    Self-loops, non-positive strengths and edges to ids outside ``known_ids`` (when given)
    are dropped: modularity needs positive weights, and a dangling edge is no evidence.
    """
    return graph_of(((edge.source_id, edge.target_id, edge.strength) for edge in associations), known_ids)


def graph_of(edges: Iterable[tuple[str, str, float]], known_ids: set[str] | None = None) -> WeightedGraph:
    """:func:`build_graph` of (source id, target id, strength) triples."""
    strongest: dict[tuple[str, str], float] = {}
    for a, b, strength in edges:
        if a == b or strength <= 0:
            continue
        if known_ids is not None and (a not in known_ids or b not in known_ids):
            continue
        key = (a, b) if a < b else (b, a)
        if strength > strongest.get(key, 0.0):
            strongest[key] = float(strength)
    ids = tuple(sorted({node for pair in strongest for node in pair}))
    index = {node: i for i, node in enumerate(ids)}
    pairs = sorted(strongest)
    return WeightedGraph(
        ids=ids,
        edges=tuple((index[a], index[b]) for a, b in pairs),
        weights=tuple(strongest[pair] for pair in pairs),
    )


def stable_labels(
    communities: Sequence[Sequence[str]], previous: Mapping[str, int] | None = None
) -> dict[str, int]:
    """Deterministic cluster ids for ``communities`` (lists of engram ids).

    Communities are ordered by (size descending, smallest member id). Each then takes the
    previous cluster id shared by most of its members, greedily by overlap (ties: earlier
    community, then smaller id); the rest take the smallest ids not taken, in order.
    """
    ordered = sorted((sorted(c) for c in communities if c), key=lambda c: (-len(c), c[0]))
    chosen: dict[int, int] = {}
    if previous:
        pairs: list[tuple[int, int, int]] = []
        for index, members in enumerate(ordered):
            overlap = Counter(previous.get(m, NO_CLUSTER) for m in members)
            pairs.extend((-count, index, label) for label, count in overlap.items() if label >= 0)
        taken: set[int] = set()
        for _, index, label in sorted(pairs):
            if index not in chosen and label not in taken:
                chosen[index] = label
                taken.add(label)
    used = set(chosen.values())
    fresh = (n for n in range(len(ordered) + len(used) + 1) if n not in used)
    labels: dict[str, int] = {}
    for index, members in enumerate(ordered):
        label = chosen[index] if index in chosen else next(fresh)
        for member in members:
            labels[member] = label
    return labels


# ----------------------------------------------------------------------------- engine
@dataclass
class ClusterResult:
    """One clustering: labels by engram id and what the engine did to get them."""

    membership: dict[str, int]
    resolution: float | None
    tuned: bool
    modularity: float
    clusters: int
    nodes: int
    edges: int
    ms: float
    skipped: str | None = None
    scanned: dict[float, float] = field(default_factory=dict)  # resolution -> modularity, when tuned
    engine: str = ""  # what partitioned the graph: "leidenalg" or "igraph"

    def report(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "engine": self.engine,
            "tuned": self.tuned,
            "resolution": self.resolution,
            "modularity": round(self.modularity, 6),
            "clusters": self.clusters,
            "nodes": self.nodes,
            "edges": self.edges,
            "ms": round(self.ms, 3),
        }


class LeidenEngine:
    """Leiden with an auto-tuned, cached resolution; one engine per user.

    Args:
        retune_growth: retune when the graph has more than ``tuned_nodes * (1 + retune_growth)`` nodes.
        resolutions: the candidate resolutions scanned when tuning.
        n_iterations: Leiden iterations per run (negative: until stable).
        seed: random seed; fixed so that reruns are reproducible.
        implementation: ``"igraph"`` (Graph.community_leiden, fast) or ``"leidenalg"``.
    """

    def __init__(
        self,
        *,
        retune_growth: float = 0.10,
        resolutions: Sequence[float] = DEFAULT_RESOLUTIONS,
        n_iterations: int = 2,
        seed: int = DEFAULT_SEED,
        implementation: Literal["igraph", "leidenalg"] = "igraph",
    ) -> None:
        if implementation not in ("igraph", "leidenalg"):
            raise ValueError(f"unknown Leiden implementation {implementation!r}: use 'igraph' or 'leidenalg'")
        self.retune_growth = retune_growth
        self.resolutions = tuple(resolutions)
        self.n_iterations = n_iterations
        self.seed = seed
        self.implementation = implementation
        self.resolution: float | None = None
        self.tuned_nodes = 0
        self.tunings = 0  # how many times this engine tuned (tests and benchmarks read it)
        self.last_digest: bytes | None = None  # IndexedEdges.digest of what the last run left
        self.last_result: ClusterResult | None = None  # that run's result (its membership emptied)

    # -- cache -------------------------------------------------------------------------------
    def needs_retune(self, nodes: int) -> bool:
        """True before the first tune and once ``nodes > tuned_nodes * (1 + retune_growth)``."""
        if self.resolution is None or self.tuned_nodes <= 0:
            return True
        return nodes > self.tuned_nodes * (1.0 + self.retune_growth)

    def load(self, store: GraphStore) -> None:
        """Adopt the resolution cached in the store's metadata, if any (unreadable: retune)."""
        raw_resolution, raw_nodes = store.get_meta(META_RESOLUTION), store.get_meta(META_NODES)
        if not raw_resolution or not raw_nodes:
            return
        try:
            resolution, nodes = float(raw_resolution), int(raw_nodes)
        except ValueError:
            logger.warning("ignoring unreadable Leiden cache %r/%r; will retune", raw_resolution, raw_nodes)
            return
        if math.isfinite(resolution) and resolution > 0 and nodes > 0:
            self.resolution, self.tuned_nodes = resolution, nodes

    def save(self, store: GraphStore) -> None:
        if self.resolution is not None:
            store.set_meta(META_RESOLUTION, repr(self.resolution))
            store.set_meta(META_NODES, str(self.tuned_nodes))

    # -- clustering --------------------------------------------------------------------------
    def run(self, graph: WeightedGraph, previous: Mapping[str, int] | None = None) -> ClusterResult:
        """Cluster ``graph``; tunes first when needed. Graphs below MIN_NODES or without edges skip.

        The reported time is the clustering's own: importing igraph (~0.1-0.3 s, once per
        process) happens before the clock starts.
        """
        nodes, edges = len(graph.ids), len(graph.edges)
        if nodes < MIN_NODES or edges == 0:
            reason = f"{nodes} connected engram(s), {edges} association(s): need >= {MIN_NODES} and >= 1"
            return ClusterResult({}, self.resolution, tuned=False, modularity=0.0, clusters=0, nodes=nodes,
                                 edges=edges, ms=0.0, skipped=reason, engine=self.implementation)  # fmt: skip
        import igraph

        started = time.perf_counter()
        g = igraph.Graph(n=nodes, edges=list(graph.edges))
        weights = list(graph.weights)
        tuned = self.needs_retune(nodes)
        scanned: dict[float, float] = {}
        if tuned:
            best: tuple[float, float, list[int]] | None = None  # (resolution, Q, membership)
            for resolution in self.resolutions:
                membership = self._partition(g, weights, resolution)
                quality = g.modularity(membership, weights=weights)
                scanned[resolution] = quality
                if best is None or _better(quality, resolution, best[1], best[0]):
                    best = (resolution, quality, membership)
            assert best is not None
            self.resolution, modularity, membership = best
            self.tuned_nodes = nodes
            self.tunings += 1
            logger.debug(
                "Leiden tuned: resolution %s over %d nodes (scan %s)", self.resolution, nodes, scanned
            )
        else:
            assert self.resolution is not None
            membership = self._partition(g, weights, self.resolution)
            modularity = g.modularity(membership, weights=weights)
        groups: dict[int, list[str]] = {}
        for vertex, community in enumerate(membership):
            groups.setdefault(community, []).append(graph.ids[vertex])
        labels = stable_labels(list(groups.values()), previous)
        ms = (time.perf_counter() - started) * 1000
        return ClusterResult(labels, self.resolution, tuned=tuned, modularity=float(modularity),
                             clusters=len(groups), nodes=nodes, edges=edges, ms=ms,
                             scanned=scanned, engine=self.implementation)  # fmt: skip

    def _partition(self, g: Any, weights: list[float], resolution: float) -> list[int]:
        if self.implementation == "leidenalg":
            import leidenalg

            partition = leidenalg.find_partition(
                g,
                leidenalg.RBConfigurationVertexPartition,
                weights=weights,
                resolution_parameter=resolution,
                n_iterations=self.n_iterations,
                seed=self.seed,
            )
            return list(partition.membership)
        import igraph

        # igraph takes randomness from a process-wide generator (Python's `random` module by
        # default): lend it a seeded one for this call only, then give the default back.
        with _IGRAPH_RNG_LOCK:
            igraph.set_random_number_generator(random.Random(self.seed))
            try:
                result = g.community_leiden(
                    objective_function="modularity",
                    weights=weights,
                    resolution=resolution,
                    n_iterations=self.n_iterations,
                )
            finally:
                igraph.set_random_number_generator(random)
        return list(result.membership)


def _better(quality: float, resolution: float, best_quality: float, best_resolution: float) -> bool:
    """Higher modularity wins; within _Q_TIE the resolution closer to 1 (log scale), then the smaller."""
    if quality > best_quality + _Q_TIE:
        return True
    if quality < best_quality - _Q_TIE:
        return False
    return (abs(math.log(resolution)), resolution) < (abs(math.log(best_resolution)), best_resolution)


# ----------------------------------------------------------------------------- the clustering job
@dataclass
class IndexedEdges:
    """The clustering's input in a compact form (what goes to a subprocess): engram ids, each
    engram's current cluster id, and the edges as positions into ``ids``."""

    ids: list[str]
    clusters: np.ndarray  # int64, aligned with ids
    sources: np.ndarray  # int64 positions
    targets: np.ndarray  # int64 positions
    strengths: np.ndarray  # float64

    @classmethod
    def of(cls, current: Mapping[str, int], edges: Iterable[tuple[str, str, float]]) -> IndexedEdges:
        """From id -> cluster id and (source, target, strength) triples; edges to ids outside
        ``current`` are dropped (as build_graph's ``known_ids`` does)."""
        ids = list(current)
        position = {engram_id: i for i, engram_id in enumerate(ids)}
        sources, targets, strengths = [], [], []
        for a, b, strength in edges:
            i, j = position.get(a), position.get(b)
            if i is not None and j is not None:
                sources.append(i)
                targets.append(j)
                strengths.append(strength)
        return cls(
            ids=ids,
            clusters=np.fromiter(current.values(), dtype=np.int64, count=len(ids)),
            sources=np.asarray(sources, dtype=np.int64),
            targets=np.asarray(targets, dtype=np.int64),
            strengths=np.asarray(strengths, dtype=np.float64),
        )

    def digest(self, clusters: np.ndarray | None = None) -> bytes:
        """A digest of the ids, the edges with their strengths and ``clusters`` (default: the
        current cluster ids): equal digests mean a clustering has nothing new to look at."""
        hasher = hashlib.blake2b(digest_size=20)
        hasher.update("\0".join(self.ids).encode("utf-8", "surrogatepass"))
        labels = self.clusters if clusters is None else clusters
        for array in (labels, self.sources, self.targets, self.strengths):
            hasher.update(b"|")
            hasher.update(np.ascontiguousarray(array).tobytes())
        return hasher.digest()


def cluster_job(engine: LeidenEngine, edges: IndexedEdges) -> tuple[LeidenEngine, ClusterResult, np.ndarray]:
    """Build the graph, run the engine and return it (its cache updated), the result (its
    membership emptied) and the new cluster id of every engram, aligned with ``edges.ids``.

    The same function runs in-process or in a subprocess (nodes/offload.py): the same graph,
    seed and code give the same partition either way. When nothing changed since the engine's
    last run (:meth:`IndexedEdges.digest`), nothing is clustered: the result says skipped and
    every engram keeps its cluster id.
    """
    if engine.last_result is not None and edges.digest() == engine.last_digest:
        unchanged = "the graph is unchanged since the last clustering"
        result = replace(engine.last_result, tuned=False, ms=0.0, skipped=unchanged, scanned={})
        return engine, result, edges.clusters.copy()
    ids = edges.ids
    triples = zip(
        (ids[i] for i in edges.sources.tolist()),
        (ids[j] for j in edges.targets.tolist()),
        edges.strengths.tolist(),
        strict=True,
    )
    graph = graph_of(triples)
    result = engine.run(graph, previous=dict(zip(ids, edges.clusters.tolist(), strict=True)))
    labels = np.fromiter((result.membership.get(i, NO_CLUSTER) for i in ids), dtype=np.int64, count=len(ids))
    result.membership = {}
    engine.last_digest = edges.digest(labels)
    engine.last_result = result
    return engine, result, labels
