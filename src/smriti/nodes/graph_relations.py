"""The entries of a result's ``graph_relations``, shared by the steps that explain a result.

relation_traverse (``nodes/relations.py``) attaches the paths that reached a memory (kind
``path``, at most :data:`MAX_PATHS`); cross_reference (``nodes/refine.py``) attaches the
memory's own facts (kind ``own``) and what other memories say about its shared entities
(kind ``entity``, :func:`entity_relations`). Kept apart so each step module holds only its steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from smriti.stores.base import Relation

# Paths kept per result: one explains it; a few show it was reached several ways.
MAX_PATHS = 3


def relation_entry(relation: Relation, kind: str, **extra: str) -> dict[str, Any]:
    """A ``graph_relations`` entry: ``{from, relation, to, kind}`` (+ ``extra`` keys)."""
    entry = {"from": relation.source, "relation": relation.relation, "to": relation.target, "kind": kind}
    return {**entry, **extra}


def by_entity(relations: Sequence[Relation]) -> dict[str, list[Relation]]:
    """``relations`` under each of their two ends, in the given order (an edge between two
    entities is listed under both)."""
    index: dict[str, list[Relation]] = {}
    for relation in relations:
        index.setdefault(relation.source, []).append(relation)
        if relation.target != relation.source:
            index.setdefault(relation.target, []).append(relation)
    return index


def entity_relations(
    cross_references: Sequence[str],
    own_ids: Iterable[str],
    index: Mapping[str, Sequence[Relation]],
    limit: int,
) -> list[dict[str, Any]]:
    """The graph relations of a result's cross-referenced entities, recorded by other memories.

    Memory Fabric step 5 adds "the graph relations" of the entities that appear elsewhere in
    the graph to the result: what the rest of the memory says about them. Of the relations in
    ``index`` (see :func:`by_entity`, built once from the newest edges) under one of
    ``cross_references`` and recorded by a memory outside ``own_ids`` (its own are listed as
    kind ``own``): the newest ``limit``, each as kind ``entity`` naming the shared ``entity``
    and the ``memory`` that recorded it.
    """
    own = set(own_ids)
    chosen: dict[Relation, str] = {}  # relation -> the shared entity it was found under
    for entity in cross_references:
        fresh = [r for r in index.get(entity, ()) if r.engram_id not in own and r not in chosen]
        for relation in fresh[:limit]:  # no entity needs more than the limit
            chosen[relation] = entity
    newest = sorted(chosen, key=lambda r: r.created_at, reverse=True)[:limit]
    return [relation_entry(r, "entity", entity=chosen[r], memory=r.engram_id) for r in newest]
