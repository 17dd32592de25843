"""Memory Fabric stages of recall: dedupe near-identical results and boost cross-referenced ones.

Pure functions (``dedupe_results``, ``cross_reference_boost``) carry the rules; the two
nodes only fetch what they need from the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from langgraph.runtime import Runtime

from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState

ENTITY_FREE_TYPES = frozenset({"keyword", "tag"})
# Entities encoding more than this share of all memories are too common to cross-reference.
MAX_SHARED_SHARE = 0.1


def embedding_similarities(results: Sequence[dict[str, Any]]) -> Callable[[int, int], float]:
    """All pairwise cosines in one matrix product (a pair without embeddings scores 0)."""
    dims = next((len(r["embedding"]) for r in results if r.get("embedding") is not None), 0)
    matrix = np.zeros((len(results), max(dims, 1)), dtype=np.float32)
    for row, result in enumerate(results):
        if result.get("embedding") is not None:
            matrix[row] = result["embedding"]
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
    pairs = np.einsum("ik,jk->ij", matrix, matrix)  # not @: avoids OpenBLAS threads on small inputs
    return lambda i, j: float(pairs[i, j])


def dedupe_results(
    results: Sequence[dict[str, Any]],
    threshold: float,
    similarity: Callable[[dict[str, Any], dict[str, Any]], float] | None = None,
) -> list[dict[str, Any]]:
    """Merge results whose texts are more than ``threshold`` similar (Memory Fabric step 4).

    Walks results by relevance (best first); a result too similar to one already kept is
    merged into it: the kept one has the higher relevance, gains the other's id in
    ``merged_ids``, the union of entities and tags, and is marked ``cross_validated``.
    """
    ordered = sorted(results, key=lambda r: (-r["relevance"], r["id"]))
    if similarity is None:
        pairwise = embedding_similarities(ordered)
    else:
        pairwise = lambda i, j: similarity(ordered[i], ordered[j])  # noqa: E731
    kept: list[dict[str, Any]] = []
    kept_rows: list[int] = []
    for row, candidate in enumerate(ordered):
        twin_row = next((k for k in kept_rows if pairwise(k, row) > threshold), None)
        if twin_row is None:
            kept.append(dict(candidate))
            kept_rows.append(row)
            continue
        twin = kept[kept_rows.index(twin_row)]
        twin["cross_validated"] = True
        twin["merged_ids"] = [*twin.get("merged_ids", []), candidate["id"], *candidate.get("merged_ids", [])]
        twin["entities"] = sorted(set(twin.get("entities", [])) | set(candidate.get("entities", [])))
        tags = {t for t in (twin.get("tags", "") + "," + candidate.get("tags", "")).split(",") if t.strip()}
        twin["tags"] = ",".join(sorted(t.strip() for t in tags))
        twin["origins"] = sorted(set(twin.get("origins", [])) | set(candidate.get("origins", [])))
    return kept


def cross_reference_boost(
    results: Sequence[dict[str, Any]],
    cue_counts: Mapping[str, int],
    cue_types: Mapping[str, str],
    factor: float,
    total: int | None = None,
) -> list[dict[str, Any]]:
    """Multiply relevance by ``factor`` when an entity of the result appears elsewhere in the graph.

    "Elsewhere" means the entity cue (any cue type but keyword or tag) also encodes at least
    one other memory: ``cue_counts[name] >= 2``. An entity in more than ``MAX_SHARED_SHARE``
    of all ``total`` memories (the user's own name, the two speakers of a conversation)
    corroborates nothing and would boost every result alike, so it does not count. Boosted
    results are marked ``boosted`` and list the shared entities in ``cross_references``
    (Memory Fabric step 5).
    """
    ceiling = max(2, int(MAX_SHARED_SHARE * total)) if total else None
    boosted = []
    for result in results:
        shared = sorted(
            name
            for name in result.get("entities", [])
            if cue_types.get(name, "keyword") not in ENTITY_FREE_TYPES
            and cue_counts.get(name, 0) >= 2
            and (ceiling is None or cue_counts[name] <= ceiling)
        )
        item = dict(result)
        if shared:
            item["relevance"] = result["relevance"] * factor
            item["boosted"] = True
            item["cross_references"] = shared
        boosted.append(item)
    return boosted


@traced("dedupe")
def dedupe(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    threshold = runtime.context.settings.memory_fabric_dedup_threshold
    before = state.get("candidates", [])
    after = dedupe_results(before, threshold)
    merged = len(before) - len(after)
    return {
        "candidates": after,
        "_candidates": [{"id": c["id"], "score": c["relevance"]} for c in after],
        "_notes": f"merged {merged} near-duplicate(s) above {threshold:.2f} similarity",
    }


@traced("cross_reference")
def cross_reference(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    store = runtime.context.store
    candidates = state.get("candidates", [])
    types = {name: t for c in candidates for name, t in c.get("entity_types", {}).items()}
    # Only entity cues can cross-reference: counting keywords too would only cost time.
    names = sorted(
        {n for c in candidates for n in c.get("entities", []) if types.get(n) not in ENTITY_FREE_TYPES}
    )
    counts = store.cue_engram_counts(names) if names else {}
    factor = runtime.context.settings.memory_fabric_boost_factor
    boosted = cross_reference_boost(candidates, counts, types, factor, total=store.count_engrams())
    relations = store.relations_of([c["id"] for c in boosted]) if boosted else []
    by_engram: dict[str, list[dict[str, str]]] = {}
    for relation in relations:
        by_engram.setdefault(relation.engram_id, []).append(
            {"from": relation.source, "relation": relation.relation, "to": relation.target}
        )
    for item in boosted:
        ids = [item["id"], *item.get("merged_ids", [])]
        item["graph_relations"] = [rel for i in ids for rel in by_engram.get(i, [])]
    count = sum(1 for item in boosted if item.get("boosted"))
    return {
        "candidates": boosted,
        "_candidates": [{"id": c["id"], "score": c["relevance"]} for c in boosted],
        "_notes": f"boosted {count} result(s) x{factor} for entities shared elsewhere in the graph",
    }
