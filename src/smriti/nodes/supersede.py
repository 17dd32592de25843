"""Corrections: a newer memory supersedes an older one it contradicts.

A memory that states the same subject and relation with another value ("Alice prefers
pgvector", later "Alice now prefers Qdrant") marks the older one ``superseded_by`` the newer.
Three ways to find it:

* the caller says so: ``supersedes=<id>`` on store (checked before anything is written);
* the offline heuristic, over the relations the analysis extracted: only for relations that
  hold one value at a time (:data:`SINGLE_VALUED`: someone prefers one thing, lives in one
  place, works at one company), since "Alice uses Redis" does not contradict "Alice uses
  Postgres";
* the LLM, when one is configured: its queued analysis is shown the closest earlier memories
  and names those the new one corrects (``nodes/enrich.py``).

Recall returns the current fact (``current_only`` in ``nodes/refine.py``, ``demote_superseded``
in ``nodes/rank.py``): a superseded memory is hidden unless ``include_superseded`` asks for it,
and then comes back demoted (below the memory that superseded it) with ``superseded_by`` in the
result and the reason in the trace.
History is kept: nothing is deleted. Forgetting the newer memory makes the older current again
(:meth:`~smriti.stores.base.StoreBase.delete_engram`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.errors import NotFound
from smriti.nodes.state import MemoryContext, StoreState, traced
from smriti.stores.base import GraphStore, Relation, normalise_cue_name

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

# Relation (as extracted, lower case) -> the single-valued relation it states. A past tense
# ("preferred", "worked at") tells history, not the current value, so it supersedes nothing.
SINGLE_VALUED: dict[str, str] = {
    "prefers": "prefers",
    "chose": "prefers",
    "switched to": "prefers",
    "switched_to": "prefers",
    "lives in": "lives-in",
    "lives_in": "lives-in",
    "moved to": "lives-in",
    "moved_to": "lives-in",
    "works at": "works-at",
    "works_at": "works-at",
    "joined": "works-at",
}
# How many memories encoded by a relation's subject are checked for a contradiction.
SUBJECT_SCAN = 50


def check_supersedes(store: GraphStore, raw: object) -> str:
    """The id of the memory ``supersedes`` names ('' when none).

    Raises:
        NotFound: no memory with that id (a user error: nothing is stored).
    """
    if raw is None or raw == "":
        return ""
    if not isinstance(raw, str):
        raise NotFound("supersedes must be the id of an existing memory")
    engram_id = raw.strip()
    if engram_id and store.get_engram(engram_id) is None:
        raise NotFound(f"supersedes: no memory with id {engram_id!r}; nothing was stored")
    return engram_id


def single_valued(relation: str) -> str | None:
    """The single-valued relation ``relation`` states, or None."""
    return SINGLE_VALUED.get(" ".join(relation.strip().lower().split()))


def contradicted(new: Iterable[Mapping[str, str]], older: Iterable[Relation], new_id: str) -> dict[str, str]:
    """Older memories whose single-valued relation the new relations restate with another value.

    Args:
        new: the new memory's relations ({"source", "relation", "target"}).
        older: RelatesTo facts recorded by other memories.
        new_id: the new memory (its own facts are skipped).

    Returns:
        older engram id -> why ("alice prefers: pgvector -> qdrant").
    """
    stated: dict[tuple[str, str], str] = {}
    for rel in new:
        kind = single_valued(rel.get("relation", ""))
        subject, value = normalise_cue_name(rel.get("source", "")), normalise_cue_name(rel.get("target", ""))
        if kind and subject and value:
            stated[(subject, kind)] = value
    found: dict[str, str] = {}
    for fact in older:
        kind = single_valued(fact.relation)
        if not kind or not fact.engram_id or fact.engram_id == new_id:
            continue
        now_value = stated.get((fact.source, kind))
        if now_value is not None and now_value != fact.target:
            found.setdefault(fact.engram_id, f"{fact.source} {kind}: {fact.target} -> {now_value}")
    return found


def detect(
    store: GraphStore,
    engram_id: str,
    created_at: datetime,
    relations: Sequence[Mapping[str, str]],
    nearby: Iterable[str] = (),
) -> dict[str, str]:
    """The current, older memories the relations of memory ``engram_id`` (of time
    ``created_at``) contradict (id -> why).

    Looks at the memories encoded by each subject of a single-valued relation and at ``nearby``
    ones (the most similar), then keeps those created before it and not yet superseded.
    """
    subjects = [
        normalise_cue_name(r.get("source", "")) for r in relations if single_valued(r.get("relation", ""))
    ]
    subjects = [s for s in dict.fromkeys(subjects) if s]
    if not subjects:
        return {}
    ids = {hit.engram_id for hit in store.engrams_by_cues(subjects, SUBJECT_SCAN)} | set(nearby)
    ids.discard(engram_id)
    if not ids:
        return {}
    found = contradicted(relations, store.relations_of(sorted(ids)), engram_id)
    if not found:
        return {}
    older = {e.id: e for e in store.get_engrams(sorted(found))}
    current = {old.id for old in older.values() if not old.superseded_by and old.created_at <= created_at}
    return {old_id: why for old_id, why in found.items() if old_id in current}


def mark_superseded(store: GraphStore, new_id: str, old_ids: Iterable[str]) -> list[str]:
    """Point each older memory at ``new_id``; returns the ids marked. The caller holds the lock."""
    marked = sorted({old for old in old_ids if old and old != new_id})
    if marked:
        store.update_engrams({old: {"superseded_by": new_id} for old in marked})
    return marked


# ----------------------------------------------------------------------------- store step
@traced
def supersede(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Mark the older memories this one corrects: named by the caller, or found by the heuristic."""
    context = runtime.context
    store = context.store
    reasons: dict[str, str] = {}
    explicit = state.get("supersedes") or ""
    if explicit:
        reasons[explicit] = "stated by the caller (supersedes)"
    # The memory's time from the state, not read back: a store's batch may not have sent it yet.
    nearby = [hit["id"] for hit in state.get("similar", [])]
    created_at = datetime.fromisoformat(state["stored_at"])
    found = detect(store, state["id"], created_at, state["analysis"].get("relations", []), nearby)
    for old_id, why in found.items():
        reasons.setdefault(old_id, f"contradicted ({why})")
    with context.write_lock:
        marked = mark_superseded(store, state["id"], reasons)
    notes = "; ".join(f"{old} {reasons[old]}" for old in marked) or "supersedes nothing"
    return {
        "superseded": marked,
        "_candidates": [{"id": old, "score": 0.0} for old in marked],
        "_notes": notes,
    }
