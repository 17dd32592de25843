"""What every importer yields, and storing it through the store pipeline."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from smriti.cli.importers.embedding import Embedded, EmbeddingPool
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
    """Where an import's time went, in seconds: embedding the contents (the embedder's calls for
    them, made in a thread ahead of the stores), how much of that the stores waited for, the
    offline analysis (the store pipeline's ``analyze`` step) and the rest of storing (the
    pipeline's other steps: duplicate search, writes, cues, associations)."""

    embedding: float = 0.0
    waited: float = 0.0
    analysis: float = 0.0
    storing: float = 0.0

    def line(self) -> str:
        return (
            f"time: embedding {self.embedding:.1f} s ({self.waited:.1f} s waited for),"
            f" analysis {self.analysis:.1f} s, storing {self.storing:.1f} s"
        )


# Contents embedded per call, the first call small so that storing starts soon, each next one
# twice as large up to EMBED_WINDOW. A call's texts are embedded in any order the embedder likes:
# MiniLM sorts them by token count, so that a batch pads short texts little (bench/RESULTS.md,
# "Import speed, stop 40": 16 unsorted contents a call cost 100 ms a text, 256 sorted 38 ms).
# An endpoint answers a call in one request (OpenAI takes up to 2,048 inputs).
FIRST_EMBED_WINDOW = 32
EMBED_WINDOW = 256


def embed_windows(count: int) -> list[range]:
    """The positions of ``count`` contents, cut into the windows embedded one call each."""
    windows, start, size = [], 0, FIRST_EMBED_WINDOW
    while start < count:
        windows.append(range(start, min(start + size, count)))
        start += size
        size = min(size * 2, EMBED_WINDOW)
    return windows


class _EmbeddedAhead:
    """The context's embedder, answering the contents embedded ahead in one batch call (the
    store pipeline embeds one memory at a time: a call per memory, and an endpoint's round
    trip each); anything else (cue names, queries) goes to the embedder itself."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ready: dict[str, list[float]] = {}

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
    on_memory: Callable[[float], None] | None = None,
    phases: Phases | None = None,
    on_embedded: Callable[[int, float, int], None] | None = None,
) -> dict[str, int]:
    """Store each item through the store pipeline; returns counts (stored, deduplicated, relations).

    Every item is checked before the first is stored (validators.check_store), so a file
    with one bad item changes nothing. The contents are embedded a window at a time
    (:func:`embed_windows`), the next windows while this one is stored, in a thread or, for a
    local model, in child processes (``embedding.py``). ``phases``, when given, is filled
    with where the time went. ``on_embedded(count, seconds, workers)`` is told as each window's
    contents are embedded (from the pool's thread: the seconds the embedder took, and how many
    windows it embeds at once), ``on_memory(seconds)`` as each item is stored.
    """
    limit = memory.context.settings.max_content_chars
    requests = [
        check_store(item.content, max_chars=limit, tags=item.tags, source=item.source) for item in items
    ]
    counts = {"stored": 0, "deduplicated": 0, "relations": 0}
    context = memory.context
    ahead = _EmbeddedAhead(context.embedder)
    phases = phases if phases is not None else Phases()
    contents = [request["content"] for request in requests]

    windows = embed_windows(len(items))
    pool = EmbeddingPool(context.embedder, len(items))

    def submit(window: range) -> Future[Embedded]:
        future = pool.submit(contents[window.start : window.stop])
        if on_embedded is not None:
            count, workers = len(window), pool.in_flight

            def embedded(done: Future[Embedded]) -> None:
                if not done.cancelled() and done.exception() is None:
                    on_embedded(count, done.result()[1], workers)

            future.add_done_callback(embedded)
        return future

    context.embedder = ahead  # type: ignore[assignment]  # why: an Embeddings in all but its class
    try:
        with pool:
            pending = deque(submit(window) for window in windows[: pool.in_flight])
            for number, window in enumerate(windows):
                started = time.perf_counter()
                vectors, seconds = pending.popleft().result()
                phases.waited += time.perf_counter() - started
                phases.embedding += seconds
                if number + pool.in_flight < len(windows):
                    pending.append(submit(windows[number + pool.in_flight]))
                ahead.ready = dict(zip(contents[window.start : window.stop], vectors, strict=True))
                batch = [(items[i], requests[i]) for i in window]
                _store_batch(memory, batch, counts, on_memory, phases)
    finally:
        context.embedder = ahead.inner
    return counts


def _store_batch(
    memory: Memory,
    batch: list[tuple[Item, Any]],
    counts: dict[str, int],
    on_memory: Callable[[float], None] | None,
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
            on_memory(time.perf_counter() - started)
