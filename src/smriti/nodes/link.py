"""Store's linking steps: cues and their edges, associations, cluster inheritance, lazy indexes."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from smriti.nodes.index import remember_index_state
from smriti.nodes.state import MemoryContext, StoreState, traced
from smriti.stores.base import (
    NO_CLUSTER,
    Association,
    Cue,
    GraphStore,
    Relation,
    cooccurring_pairs,
    normalise_cue_name,
)

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

# How many of the latest memories of the same source (conversation, session) a new one links
# to, and how strongly: SAME_SOURCE_STRENGTH to the one just before, times SAME_SOURCE_FALLOFF
# per step further back (0.5, 0.3, 0.18), so recall's conversation context
# (nodes/associate.py) raises the next turn more than one three turns away.
SAME_SOURCE_NEIGHBOURS = 3
SAME_SOURCE_STRENGTH = 0.5
SAME_SOURCE_FALLOFF = 0.6


def same_source_strength(distance: int) -> float:
    """Strength of the link to the memory ``distance`` steps back in the same source (1 = previous)."""
    return SAME_SOURCE_STRENGTH * SAME_SOURCE_FALLOFF ** (distance - 1)


def memory_cues(analysis: Mapping[str, Any], tags: str) -> list[dict[str, str]]:
    """The analysis cues plus the tags (as cues of type ``tag``), unique by normalised name."""
    cues: dict[str, dict[str, str]] = {}
    for cue in analysis.get("cues", []):
        name = normalise_cue_name(cue["name"])
        if name:
            cues.setdefault(name, {"name": name, "type": cue.get("type", "keyword")})
    for tag in (t for t in tags.split(",") if t.strip()):
        name = normalise_cue_name(tag)
        cues.setdefault(name, {"name": name, "type": "tag"})
    return list(cues.values())


def strongest_neighbour_cluster(neighbour_strengths: Mapping[str, float], clusters: Mapping[str, int]) -> int:
    """The cluster a new engram joins: that of its strongest clustered neighbour, or -1.

    Args:
        neighbour_strengths: associated engram id -> association strength.
        clusters: engram id -> cluster id (missing or negative: unclustered, skipped).

    Ties in strength go to the smallest cluster id, so the choice never depends on order.
    """
    best: tuple[float, int] | None = None
    for engram_id, strength in neighbour_strengths.items():
        cluster = clusters.get(engram_id, NO_CLUSTER)
        if cluster is None or cluster < 0:
            continue
        key = (-strength, cluster)
        if best is None or key < best:
            best = key
    return NO_CLUSTER if best is None else best[1]


def write_links(
    store: GraphStore, engram_id: str, analysis: Mapping[str, Any], tags: str
) -> tuple[list[dict[str, str]], int]:
    """EncodedBy to every cue of ``analysis`` and the tags, CoOccurs between the leading cues,
    RelatesTo for its relations; returns the cues and how many relations. The caller holds the
    write lock. Shared by the store pipeline and consolidation's repair step.
    """
    cues = memory_cues(analysis, tags)
    relations = []
    for rel in analysis.get("relations", []):
        source, target = normalise_cue_name(rel["source"]), normalise_cue_name(rel["target"])
        if source and target and source != target and rel["relation"].strip():
            relations.append(
                Relation(source=source, relation=rel["relation"], target=target, engram_id=engram_id)
            )
    # One batch call per edge kind: a handful of queries instead of one per cue, pair and relation.
    if cues:
        stored = store.link_cues(engram_id, [Cue(name=c["name"], cue_type=c["type"]) for c in cues])
        # From the stored cues (an existing cue keeps its type), by the rule forget undoes.
        pairs = cooccurring_pairs(stored)
        if pairs:
            store.add_cooccurrences(pairs)
    if relations:
        store.add_relations(relations, cue_type="concept")
    return cues, len(relations)


@traced
def link_cues(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """EncodedBy to every cue, CoOccurs between the leading cues, RelatesTo for extracted relations."""
    with runtime.context.write_lock:
        cues, relations = write_links(
            runtime.context.store, state["id"], state["analysis"], state.get("tags", "")
        )
    return {"cues": cues, "_notes": f"{len(cues)} cues, {relations} relations"}


@traced
def associate(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """AssociatedWith to the most similar memories and to the latest ones of the same source."""
    context = runtime.context
    settings = context.settings
    links: dict[str, tuple[float, str]] = {}
    for hit in state.get("similar", [])[: settings.associate_top_k]:
        if hit["id"] != state["id"] and hit["score"] >= settings.associate_min_similarity:
            links[hit["id"]] = (hit["score"], "similar")
    source = state.get("source", "")
    if source:
        # Per-process memory of the latest engrams of each source: a conversation or session
        # stored turn by turn links each turn to the ones just before it.
        recent = _recent_of_source(context, source, state["id"])
        for distance, engram_id in enumerate(recent, start=1):
            # The turn order wins over similarity: a neighbour that is also similar keeps
            # one edge (a pair has one), typed same_source with its distance's strength.
            links[engram_id] = (same_source_strength(distance), "same_source")
    now = context.clock()
    if links:
        with context.write_lock:
            context.store.associate_many(
                [
                    Association(
                        source_id=state["id"],
                        target_id=target,
                        strength=strength,
                        relation_type=kind,
                        created_at=now,
                    )
                    for target, (strength, kind) in links.items()
                ]
            )
    return {
        "links": {target: strength for target, (strength, _) in links.items()},
        "_candidates": [{"id": t, "score": s} for t, (s, _) in links.items()],
        "_notes": f"{len(links)} association(s)",
    }


def _recent_of_source(context: MemoryContext, source: str, new_id: str) -> list[str]:
    """The latest memories of ``source`` before ``new_id`` (newest first), and note ``new_id``.

    An embedded store has one writer, this process, which remembers its latest writes per
    source. A shared store (another server process may have stored the previous turn) is asked.
    """
    if context.store.capabilities.shared:
        ids = context.store.latest_of_source(source, SAME_SOURCE_NEIGHBOURS + 1)
        return [engram_id for engram_id in ids if engram_id != new_id][:SAME_SOURCE_NEIGHBOURS]
    recent = context.cache.recent_by_source.setdefault(source, deque(maxlen=SAME_SOURCE_NEIGHBOURS))
    before = list(recent)
    recent.appendleft(new_id)
    return before


@traced
def inherit_cluster(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """A new engram joins the Leiden cluster of its strongest associated neighbour.

    A new engram's only edges are the ones ``associate`` just made, so its ``links`` are the
    neighbours: no edge query, and only the neighbours' cluster ids are read.
    """
    store = runtime.context.store
    strengths = state.get("links", {})
    clusters = store.cluster_ids(sorted(strengths)) if strengths else {}
    cluster = strongest_neighbour_cluster(strengths, clusters)
    if cluster >= 0:
        with runtime.context.write_lock:
            store.update_engram(state["id"], cluster_id=cluster)
    return {
        "cluster_id": cluster,
        "_notes": f"cluster {cluster}" if cluster >= 0 else "no clustered neighbour",
    }


@traced
def index_check(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Build the vector and full-text indexes lazily, once the store passes INDEX_THRESHOLD."""
    context = runtime.context
    # A shared store's indexes may be dropped by another process (a re-embedding): ask it each time.
    if context.cache.indexes_ready and not context.store.capabilities.shared:
        return {"_notes": "indexes already built"}
    with context.write_lock:
        state_of = dict(context.store.ensure_indexes(context.settings.index_threshold))
    remember_index_state(context, state_of)
    return {"_notes": ", ".join(f"{k}={v}" for k, v in state_of.items())}
