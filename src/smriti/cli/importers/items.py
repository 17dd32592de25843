"""What every importer yields, and storing it through the store pipeline."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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


@dataclass
class Phases:
    """Where an import's time went, in seconds: embedding the contents (the calls made for
    them), the offline analysis (the store pipeline's ``analyze`` step) and the rest of storing
    (the pipeline's other steps: duplicate search, writes, cues, associations)."""

    embedding: float = 0.0
    analysis: float = 0.0
    storing: float = 0.0

    def line(self) -> str:
        return (
            f"time: embedding {self.embedding:.1f} s, analysis {self.analysis:.1f} s,"
            f" storing {self.storing:.1f} s"
        )


# Contents embedded in one call: an endpoint answers 16 in one round trip; MiniLM in numpy runs
# no faster per text in larger batches on one BLAS thread (measured: 40-45 ms a text at 1-16,
# 47-73 at 32-128 on a loaded 2-core machine).
EMBED_BATCH = 16


class _EmbeddedAhead:
    """The context's embedder, answering the contents embedded ahead in one batch call (the
    store pipeline embeds one memory at a time: a call per memory, and an endpoint's round
    trip each); anything else (cue names, queries) goes to the embedder itself."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ready: dict[str, list[float]] = {}

    def embed_ahead(self, texts: list[str]) -> None:
        self.ready = dict(zip(texts, self.inner.embed_documents(texts), strict=True))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if texts and all(text in self.ready for text in texts):
            return [self.ready[text] for text in texts]
        return list(self.inner.embed_documents(texts))

    def embed_query(self, text: str) -> list[float]:
        return list(self.inner.embed_query(text))

    def __getattr__(self, name: str) -> Any:  # the model's name and the like, for identity
        return getattr(self.inner, name)


def store_items(
    memory: Memory,
    items: list[Item],
    on_memory: Callable[[], None] | None = None,
    phases: Phases | None = None,
) -> dict[str, int]:
    """Store each item through the store pipeline; returns counts (stored, deduplicated, relations).

    Every item is checked before the first is stored (validators.check_store), so a file
    with one bad item changes nothing. Contents are embedded ``EMBED_BATCH`` at a time.
    ``phases``, when given, is filled with where the time went.
    """
    limit = memory.context.settings.max_content_chars
    requests = [
        check_store(item.content, max_chars=limit, tags=item.tags, source=item.source) for item in items
    ]
    counts = {"stored": 0, "deduplicated": 0, "relations": 0}
    context = memory.context
    ahead = _EmbeddedAhead(context.embedder)
    context.embedder = ahead  # type: ignore[assignment]  # why: an Embeddings in all but its class
    pairs = list(zip(items, requests, strict=True))
    phases = phases if phases is not None else Phases()
    try:
        for start in range(0, len(pairs), EMBED_BATCH):
            batch = pairs[start : start + EMBED_BATCH]
            started = time.perf_counter()
            ahead.embed_ahead([request["content"] for _, request in batch])
            phases.embedding += time.perf_counter() - started
            _store_batch(memory, batch, counts, on_memory, phases)
    finally:
        context.embedder = ahead.inner
    return counts


def _store_batch(
    memory: Memory,
    batch: list[tuple[Item, Any]],
    counts: dict[str, int],
    on_memory: Callable[[], None] | None,
    phases: Phases,
) -> None:
    for item, request in batch:
        started = time.perf_counter()
        stored = memory.store_checked(request)
        spent = time.perf_counter() - started
        analysis = sum(step["ms"] for step in stored["trace"] if step["node"] == "analyze") / 1000
        phases.analysis += analysis
        phases.storing += spent - analysis
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
