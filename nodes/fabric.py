"""Memory Fabric stages of recall: shortlist, dedupe near-identical results, boost cross-referenced ones.

Pure functions (``dedupe_results``, ``cross_reference_boost``) carry the rules; the three
nodes only fetch what they need from the store and the scoring profile.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from smriti.nodes.relations import MAX_PATHS, by_entity, entity_relations, relation_entry
from smriti.nodes.scoring import shortlist
from smriti.nodes.state import Candidate, MemoryContext, RecallState, trace_scores, traced
from smriti.nodes.textsim import candidate_similarity

ENTITY_FREE_TYPES = frozenset({"keyword", "tag"})
# Entities encoding more than this share of all memories are too common to cross-reference.
MAX_SHARED_SHARE = 0.1
# Relations of a result's cross-referenced entities attached to it, at most (Memory Fabric step 5).
MAX_ENTITY_RELATIONS = 5


def unit_rows(results: Sequence[Candidate]) -> np.ndarray:
    """The results' embeddings as float32 rows of norm 1 (a zero row without an embedding)."""
    dims = next((len(r.embedding) for r in results if r.embedding is not None), 0)
    matrix = np.zeros((len(results), max(dims, 1)), dtype=np.float32)
    for row, result in enumerate(results):
        if result.embedding is not None:
            matrix[row] = result.embedding
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def dedupe_results(
    results: Sequence[Candidate],
    threshold: float,
    similarity: Callable[[Sequence[Candidate]], np.ndarray] | None = None,
) -> list[Candidate]:
    """Merge results whose texts are more than ``threshold`` similar (Memory Fabric step 4).

    Walks results by relevance (best first); a result whose similarity (cosine of the
    embeddings unless ``similarity`` is given: it returns the n x n similarities of the
    results in the order it is passed them) to one already kept is > ``threshold`` is
    merged into it: the kept one has the higher relevance, gains the other's id (and the ids
    it had merged) in ``merged_ids``, the union of entities, tags and origins, and is marked
    ``cross_validated``. Returns copies; the inputs are not changed.
    """
    ordered = sorted(results, key=lambda r: (-r.relevance, r.id))
    unit = unit_rows(ordered) if similarity is None else None
    pairs = similarity(ordered) if similarity is not None else None
    kept_unit = np.empty_like(unit) if unit is not None else None  # kept rows, contiguous
    kept: list[Candidate] = []
    kept_rows: list[int] = []
    for row, candidate in enumerate(ordered):
        # The first kept result (best first) this one is a near-duplicate of, if any.
        if unit is not None and kept_unit is not None:
            # Cosines with the kept rows only (half the products of the full matrix), in
            # numpy's own loop, not BLAS (whose threads compete with the database's);
            # compared as float64, as before.
            cosines = np.einsum("ij,j->i", kept_unit[: len(kept)], unit[row]).astype(np.float64)
            twins = np.flatnonzero(cosines > threshold)
            index = int(twins[0]) if len(twins) else None
        else:
            assert pairs is not None
            twins = np.flatnonzero(pairs[row, kept_rows] > threshold)
            index = int(twins[0]) if len(twins) else None
        if index is None:
            if kept_unit is not None and unit is not None:
                kept_unit[len(kept)] = unit[row]
            kept.append(candidate.copy())
            kept_rows.append(row)
            continue
        twin = kept[index]
        twin.cross_validated = True
        twin.merged_ids = [*twin.merged_ids, candidate.id, *candidate.merged_ids]
        twin.entities = sorted(set(twin.entities) | set(candidate.entities))
        tags = {t for t in (twin.tags + "," + candidate.tags).split(",") if t.strip()}
        twin.tags = ",".join(sorted(t.strip() for t in tags))
        twin.origins = sorted(set(twin.origins) | set(candidate.origins))
        twin.relation_paths = [*twin.relation_paths, *candidate.relation_paths][:MAX_PATHS]
    return kept


def cross_reference_boost(
    results: Sequence[Candidate],
    cue_counts: Mapping[str, int],
    cue_types: Mapping[str, str],
    factor: float,
    total: int | None = None,
) -> list[Candidate]:
    """Multiply relevance by ``factor`` when an entity of the result appears elsewhere in the graph.

    relevance' = relevance * factor if shared else relevance, where shared = the result's
    entity cues (any cue type but keyword or tag) that also encode at least one other memory
    (``cue_counts[name] >= 2``) and at most max(2, ``MAX_SHARED_SHARE`` * ``total``) memories:
    an entity in most memories (the user's own name, the two speakers of a conversation)
    corroborates nothing and would boost every result alike. Boosted results are marked
    ``boosted`` and list the shared entities in ``cross_references`` (Memory Fabric step 5).
    Returns copies; the inputs are not changed.
    """
    ceiling = max(2, int(MAX_SHARED_SHARE * total)) if total else None
    boosted = []
    for result in results:
        shared = sorted(
            name
            for name in result.entities
            if cue_types.get(name, "keyword") not in ENTITY_FREE_TYPES
            and cue_counts.get(name, 0) >= 2
            and (ceiling is None or cue_counts[name] <= ceiling)
        )
        item = result.copy()
        if shared:
            item.relevance = result.relevance * factor
            item.boosted = True
            item.cross_references = shared
        boosted.append(item)
    return boosted


@traced("shortlist")
def shortlist_candidates(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Drop candidates that cannot reach the top ``limit`` whatever dedupe and boost do.

    Uses the scoring profile's bounds; keeps twice the limit as a margin, since dedupe may
    merge some of the best ones.
    """
    candidates = state.get("candidates", [])
    seed = state.get("seed_cluster", -1)
    profile = runtime.context.scoring
    now = runtime.context.clock()
    keep = shortlist([profile.bounds(c, seed, now) for c in candidates], 2 * state["limit"])
    kept = [candidates[i] for i in keep]
    return {
        "candidates": kept,
        "_candidates": trace_scores(kept),
        "_notes": f"{len(kept)} of {len(candidates)} candidates can still reach the top {state['limit']}",
    }


@traced("dedupe")
def merge_duplicates(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Merge results whose texts are near-identical (text similarity above
    MEMORY_FABRIC_DEDUP_THRESHOLD, :mod:`smriti.nodes.textsim`), see :func:`dedupe_results`."""
    threshold = runtime.context.settings.memory_fabric_dedup_threshold
    before = state.get("candidates", [])
    after = dedupe_results(before, threshold, candidate_similarity(threshold))
    merged = len(before) - len(after)
    return {
        "candidates": after,
        "_candidates": trace_scores(after),
        "_notes": f"merged {merged} near-duplicate(s) above {threshold:.2f} text similarity",
    }


@traced("cross_reference")
def cross_reference(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Boost results whose entities appear elsewhere, and attach their graph relations.

    ``graph_relations`` of a result: its own relations (kind ``own``), the traversal paths that
    reached it (kind ``path``, nodes/relations.py) and at most MAX_ENTITY_RELATIONS relations of
    its cross-referenced entities recorded by other memories (kind ``entity``).
    """
    store = runtime.context.store
    candidates = state.get("candidates", [])
    types = {name: t for c in candidates for name, t in c.entity_types.items()}
    # Only entity cues can cross-reference: counting keywords too would only cost time.
    names = sorted({n for c in candidates for n in c.entities if types.get(n) not in ENTITY_FREE_TYPES})
    counts = store.cue_engram_counts(names) if names else {}
    factor = runtime.context.settings.memory_fabric_boost_factor
    boosted = cross_reference_boost(candidates, counts, types, factor, total=store.count_engrams())
    relations = store.relations_of([c.id for c in boosted]) if boosted else []
    by_engram: dict[str, list[dict[str, Any]]] = {}
    for relation in relations:
        by_engram.setdefault(relation.engram_id, []).append(relation_entry(relation, "own"))
    shared = sorted({name for item in boosted for name in item.cross_references})
    # One read for every result: enough newest edges that each result can fill its share.
    around = (
        by_entity(store.related_entities(shared, MAX_ENTITY_RELATIONS * (len(boosted) + 1))) if shared else {}
    )
    for item in boosted:
        ids = [item.id, *item.merged_ids]
        item.graph_relations = [
            *(rel for i in ids for rel in by_engram.get(i, [])),
            *item.relation_paths,
            *entity_relations(item.cross_references, ids, around, MAX_ENTITY_RELATIONS),
        ]
    count = sum(1 for item in boosted if item.boosted)
    return {
        "candidates": boosted,
        "_candidates": trace_scores(boosted),
        "_notes": f"boosted {count} result(s) x{factor} for entities shared elsewhere in the graph",
    }
