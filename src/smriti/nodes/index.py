"""Consolidation's last step: make sure the search indexes exist once the store is big enough."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smriti.nodes.state import ConsolidateState, MemoryContext, traced

if TYPE_CHECKING:
    from langgraph.runtime import Runtime


def remember_index_state(context: MemoryContext, indexes: dict[str, bool]) -> bool:
    """Note in the context whether every index the store reported is built (the store
    pipeline's lazy index check then skips the store call); returns that."""
    ready = bool(indexes) and all(indexes.values())
    context.cache.indexes_ready = ready
    return ready


@traced
def manage_indexes(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Build the HNSW vector and full-text indexes once engrams exceed INDEX_THRESHOLD; report their state.

    Always asks the store (unlike the store pipeline's cached check): consolidation is rare,
    and an index dropped behind our back (a re-embedding, say) is noticed and rebuilt here.
    """
    context = runtime.context
    threshold = context.settings.index_threshold
    with context.write_lock:
        indexes = dict(context.store.ensure_indexes(threshold))
    remember_index_state(context, indexes)
    built = ", ".join(f"{name}={'yes' if ready else 'no'}" for name, ready in indexes.items()) or "none"
    return {"report": {"indexes": indexes}, "_notes": f"threshold {threshold}: {built}"}
