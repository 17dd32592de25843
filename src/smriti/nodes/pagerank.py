"""Spreading activation: Personalized PageRank over the local memory graph (HippoRAG 2 style).

Recall's direct branches find memories that share words, cues or meaning with the query.
Associative recall goes one step further: a memory that shares a rare cue with the best
direct hits, or sits next to one in the same conversation, is activated through them even
when it shares nothing with the query itself. The ``activate`` step (``nodes/associate.py``)
uses :func:`spread` as a fourth recall branch ("graph"), fused by rank with the other three.

The graph is built around the query, never over the whole memory, so the work is bounded:

1. **Seeds**: the best ``ACTIVATION_SEEDS`` direct hits (weighted by their fused relevance)
   and the query's own cues that exist in the graph (weighted by idf, as HippoRAG weights
   phrase nodes by specificity), half the restart mass each.
2. **Cue nodes**: the seeds' cues and the query's cues, except those encoding more than
   ``ACTIVATION_MAX_CUE_SHARE`` of all memories (a speaker's name in a conversation, "work"
   in a work log: a hub passes activation to everything and so informs about nothing) and
   those encoding one memory only (they lead nowhere).
3. **Engram nodes**: the seeds, their associates, and the memories those cues encode, the
   ones matching most cues first, at most ``ACTIVATION_MAX_ENGRAMS`` (one store read); the
   best ``ACTIVATION_NEW`` of those not yet candidates join the candidates.
4. **Edges**: Engram-EncodedBy-Cue weighted by the cue's idf, and AssociatedWith between
   the engrams (similar memories, neighbouring turns of the same source) weighted by strength.

Then :func:`personalized_pagerank` runs on that graph (a dense matrix of at most a few hundred
nodes: microseconds per iteration), and each engram's stationary probability is its graph score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from smriti.nodes.scoring import idf

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.nodes.state import Candidate
    from smriti.stores.base import GraphStore

# Iterations stop when the L1 change of the distribution falls below this, or after MAX_ITERATIONS.
TOLERANCE = 1e-4
MAX_ITERATIONS = 30
ROUNDING = 10  # decimals kept of a graph score


def personalized_pagerank(
    adjacency: np.ndarray,
    seeds: np.ndarray,
    damping: float,
    max_iterations: int = MAX_ITERATIONS,
    tolerance: float = TOLERANCE,
) -> np.ndarray:
    """Stationary distribution of a random walk that restarts at the seeds.

    p = (1 - d) * s + d * W^T p, where s is ``seeds`` normalised to sum 1 and W is
    ``adjacency`` (symmetric, non-negative weights) normalised by row; a node without edges
    returns its mass to the seeds (so the result always sums to 1). Power iteration from s,
    until the L1 change is below ``tolerance`` or ``max_iterations``. ``damping`` d is the
    probability of following an edge: 0 gives the seeds back, HippoRAG uses 0.5.
    """
    total = float(seeds.sum())
    if total <= 0 or adjacency.size == 0:
        return np.zeros(len(seeds))
    restart = seeds / total
    degree = adjacency.sum(axis=1)
    transition = np.divide(
        adjacency, degree[:, None], out=np.zeros_like(adjacency), where=degree[:, None] > 0
    )
    dangling = degree <= 0
    p = restart.copy()
    for _ in range(max_iterations):
        walked = p @ transition + p[dangling].sum() * restart
        new = (1 - damping) * restart + damping * walked
        change = float(np.abs(new - p).sum())
        p = new
        if change < tolerance:
            break
    return p


def activation_graph(
    engram_cues: Mapping[str, Sequence[str]],
    cue_weight: Mapping[str, float],
    associations: Sequence[tuple[str, str, float]],
    association_weight: float,
) -> tuple[list[str], list[str], np.ndarray]:
    """The bipartite Engram-Cue graph plus Engram-Engram associations as one symmetric matrix.

    Args:
        engram_cues: engram id -> its cue names (cues not in ``cue_weight`` are left out).
        cue_weight: cue name -> edge weight (its idf).
        associations: (engram, engram, strength); pairs with an unknown engram are left out.
        association_weight: multiplies every association strength.

    Returns: the engram ids, the cue names (engrams first, then cues, in the matrix) and the matrix.
    """
    engrams = sorted(engram_cues)
    cues = sorted({c for names in engram_cues.values() for c in names if c in cue_weight})
    index = {name: i for i, name in enumerate(engrams)}
    cue_index = {name: len(engrams) + i for i, name in enumerate(cues)}
    size = len(engrams) + len(cues)
    matrix = np.zeros((size, size))
    for engram, names in engram_cues.items():
        for name in names:
            if name in cue_index:
                row, col = index[engram], cue_index[name]
                matrix[row, col] = matrix[col, row] = cue_weight[name]
    for a, b, strength in associations:
        if a in index and b in index and a != b:
            weight = association_weight * max(0.0, strength)
            i, j = index[a], index[b]
            matrix[i, j] = matrix[j, i] = max(matrix[i, j], weight)
    return engrams, cues, matrix


def seed_vector(
    engrams: Sequence[str],
    cues: Sequence[str],
    engram_seeds: Mapping[str, float],
    cue_seeds: Mapping[str, float],
) -> np.ndarray:
    """Restart weights in matrix order (engrams, then cues); absent names weigh 0."""
    return np.array([engram_seeds.get(e, 0.0) for e in engrams] + [cue_seeds.get(c, 0.0) for c in cues])


def spread(
    store: GraphStore,
    settings: Settings,
    seeds: Sequence[Candidate],
    query_cues: Sequence[str],
) -> tuple[dict[str, float], str]:
    """Graph score of every engram the activation reaches from ``seeds`` and ``query_cues``.

    Builds the local graph (module docstring; four store reads whatever the memory's size), runs
    :func:`personalized_pagerank` and returns engram id -> its probability less its own restart
    share (so a seed is not ranked first by its restart weight alone), with a one-line summary.
    """
    total = max(store.count_engrams(), 1)
    ceiling = max(2, int(settings.activation_max_cue_share * total))
    names = sorted({n for c in seeds for n in c.entities} | set(query_cues))
    counts = store.cue_engram_counts(names) if names else {}
    # A cue in one memory leads nowhere else; a hub leads everywhere: both are left out.
    weights = {n: idf(df, total) for n, df in counts.items() if 2 <= df <= ceiling}
    engram_cues: dict[str, list[str]] = {c.id: [n for n in c.entities if n in weights] for c in seeds}
    if weights:
        for hit in store.engrams_by_cues(sorted(weights), settings.activation_max_engrams):
            have = engram_cues.setdefault(hit.engram_id, [])
            have.extend(n for n in hit.cues if n not in have)
    edges = [(e.source_id, e.target_id, e.strength) for e in store.neighbours([c.id for c in seeds])]
    for a, b, _ in edges:  # the seeds' associates are nodes too (similar memories, neighbouring turns)
        engram_cues.setdefault(a, [])
        engram_cues.setdefault(b, [])
    ids, cue_names, matrix = activation_graph(
        engram_cues, weights, edges, settings.activation_association_weight
    )
    engram_seeds = {c.id: c.relevance for c in seeds}
    known_query_cues = [n for n in query_cues if n in weights]
    cue_seeds: dict[str, float] = {}
    if known_query_cues:
        # The query's cues share the restart mass with the seed engrams, half each, by idf.
        mass = sum(engram_seeds.values()) or 1.0
        cue_total = sum(weights[n] for n in known_query_cues)
        cue_seeds = {n: mass * weights[n] / cue_total for n in known_query_cues}
    damping = settings.activation_damping
    ppr = personalized_pagerank(matrix, seed_vector(ids, cue_names, engram_seeds, cue_seeds), damping)
    restart_total = sum(engram_seeds.values()) + sum(cue_seeds.values()) or 1.0
    graph: dict[str, float] = {}
    for i, engram in enumerate(ids):
        own_restart = (1 - damping) * engram_seeds.get(engram, 0.0) / restart_total
        # Rounded so that engrams in symmetric places of the graph tie exactly, whatever the
        # summation order (the matrix is ordered by id): the score then breaks the tie.
        value = round(float(ppr[i]) - own_restart, ROUNDING)
        if value > 0:
            graph[engram] = value
    summary = (
        f"{len(ids)} engrams, {len(cue_names)} cues ({len(counts) - len(weights)} too rare or too common), "
        f"{len(edges)} associations"
    )
    return graph, summary
