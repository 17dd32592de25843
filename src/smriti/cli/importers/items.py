"""What every importer yields, and storing it through the store pipeline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from smriti.stores.base import Relation
from smriti.validators import check_store

if TYPE_CHECKING:
    from smriti.memory import Memory


@dataclass(frozen=True)
class Item:
    """One memory to store, and the fact it states (server-memory relations)."""

    content: str
    source: str
    tags: str = ""
    relation: tuple[str, str, str] | None = None  # (from, relation, to)


def store_items(
    memory: Memory, items: list[Item], on_memory: Callable[[], None] | None = None
) -> dict[str, int]:
    """Store each item through the store pipeline; returns counts (stored, deduplicated, relations).

    Every item is checked before the first is stored (validators.check_store), so a file
    with one bad item changes nothing.
    """
    limit = memory.context.settings.max_content_chars
    requests = [
        check_store(item.content, max_chars=limit, tags=item.tags, source=item.source) for item in items
    ]
    counts = {"stored": 0, "deduplicated": 0, "relations": 0}
    for item, request in zip(items, requests, strict=True):
        stored = memory.store_checked(request)
        known = bool(stored.get("deduplicated"))  # imported before: its fact is there too
        counts["deduplicated" if known else "stored"] += 1
        if item.relation is not None and not known:
            source, relation, target = item.relation
            with memory.context.write_lock:
                memory.context.store.add_relations(
                    [Relation(source, relation, target, engram_id=stored["id"])]
                )
            counts["relations"] += 1
        if on_memory is not None:
            on_memory()
    return counts
