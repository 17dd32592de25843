"""``SmritiStore``: a LangGraph ``BaseStore`` backed by one user's Smriti memory.

Give it to ``graph.compile(store=...)`` or ``create_react_agent(..., store=...)`` and the
agent's long-term store becomes Smriti memories: linked to cues, clustered, decaying and
reinforced like every other memory of that user, and found by the MCP tools' recall too.

It honours LangGraph's store contract (the reference being ``InMemoryStore``); where Smriti
decides something the contract leaves open, it is written here and relied on by the tests.

* **One store, one user.** A SmritiStore wraps one :class:`~smriti.memory.Memory` (one user's
  database). Namespaces do not select users; open one SmritiStore per user for isolation.
* **An item is one engram.** Its content is the value as JSON text (``json.dumps`` with
  ``ensure_ascii=False``), so a value round-trips exactly as JSON does (tuples come back as
  lists). The engram's ``source`` is ``"langgraph-store:" + json.dumps([*namespace, key])``
  (exact: case and punctuation kept), and a per-namespace index in the store's metadata maps
  each key to its engram id, times and TTL, so ``get`` is one lookup, never a search. Engrams
  also get the tags ``langgraph-store`` and ``ns:<namespace joined by />``.
* **Put replaces.** Putting an existing key stores the new value as a new engram and deletes
  the old one (``created_at`` is kept). Near-duplicate merging is off for store writes: two
  keys with equal values stay two items.
* **Search with a query is similarity search** (LangGraph's meaning of ``score``): every
  item of the namespace prefix that passes the filter and has a vector is ranked by the cosine
  similarity of the configured embeddings (``index``; see ``store_index.py``), best first; an
  exact match scores ~1.0. Items put with ``index=False``, or with none of the indexed fields,
  have no vector: a query search ranks them last, with ``score=None`` (as InMemoryStore
  does). **Without a query** search lists
  the matching items, most recently updated first, with ``score=None``.
* **Associative recall coexists as an option.** ``SmritiStore(memory, ranking="recall")`` ranks
  query searches by Smriti's recall instead (cues, associations, clusters, recency, importance
  and decay: the score the MCP ``recall`` tool shows), returning only the items recall reaches.
  That is outside LangGraph's contract (scores are not similarities, unreached items are
  missing), so it is opt-in. Both rankings reinforce the engrams a query search returns, as any
  recalled memory is (``reinforce=False`` for side-effect-free searches); listings do not.
* **Filters** compare value fields, with dotted keys into nested dicts and the operators
  ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte`` (``store_filters.py``).
* **TTL** (``store_ttl.py``): ``ttl={"default_ttl", "refresh_on_read", "sweep_interval_minutes",
  "omit_expired"}`` and ``put(..., ttl=minutes)``; expired items are invisible at once and
  deleted by ``sweep_ttl`` or the sweeper (``start_ttl_sweeper``/``stop_ttl_sweeper``).
* **Async.** The database is embedded and synchronous. A synchronous method called on a
  thread whose event loop is running (a Jupyter cell: ipykernel runs cells on one) runs its
  work in a worker thread and waits for it, as LangGraph's InMemoryStore and SqliteStore just
  work there; it holds that loop meanwhile, so inside async code the ``a*`` methods (which
  embed with the model's async API, then run the database work in a worker thread) are the
  ones to use. Synchronous graph nodes run in worker threads and may use either.
* **Forgetting.** Items are stored at the important threshold by default, so consolidation
  never prunes them; pass ``importance`` below ``IMPORTANT_THRESHOLD`` to let unused items decay
  away. An item whose engram is gone (pruned, or forgotten through the MCP tools) reads as
  missing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from smriti.integrations.store_filters import matches_filter, namespace_matches
from smriti.integrations.store_index import (
    StoreIndex,
    aembed_documents,
    aembed_query,
    decode_vectors,
    encode_vectors,
    similarity,
)
from smriti.integrations.store_items import Entry, ItemMeta, vector_key
from smriti.integrations.store_ttl import Sweeper, expiry, is_expired

if TYPE_CHECKING:
    from smriti.memory import Memory
    from smriti.nodes.state import MemoryContext
    from smriti.pipelines.pipeline import Pipeline

__all__ = ["SmritiStore", "matches_filter", "namespace_matches", "parse_source", "source_of"]

SOURCE_PREFIX = "langgraph-store:"
STORE_TAG = "langgraph-store"
# Recall (ranking="recall") is asked for this many more results than a page needs, because
# other memories and other namespaces compete for the same ranks before the filters apply.
_OVERSAMPLE = 4
_MIN_POOL = 50

Ranking = Literal["similarity", "recall"]


def source_of(namespace: tuple[str, ...], key: str) -> str:
    """The engram ``source`` that identifies an item exactly."""
    return SOURCE_PREFIX + json.dumps([*namespace, key], ensure_ascii=False)


def parse_source(source: str) -> tuple[tuple[str, ...], str] | None:
    """Inverse of :func:`source_of`; None for memories that are not store items."""
    if not source.startswith(SOURCE_PREFIX):
        return None
    try:
        parts = json.loads(source[len(SOURCE_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(parts, list) or len(parts) < 2 or not all(isinstance(p, str) for p in parts):
        return None
    return tuple(parts[:-1]), parts[-1]


def off_the_loop[T](function: Callable[[], T]) -> T:
    """``function()``, run in a worker thread when this thread's event loop is running (module
    docstring, Async): an embedder or a database client that runs a loop of its own
    (``asyncio.run``) cannot run on a thread whose loop is running."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="smriti-store") as worker:
        return worker.submit(contextvars.copy_context().run, function).result()


@dataclasses.dataclass
class _Embedded:
    """The vectors a batch needs, computed before the database work (sync or async model)."""

    documents: dict[int, dict[str, list[float]]]  # op position -> path -> vector
    queries: dict[str, list[float]]


class SmritiStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are Smriti memories of one user.

    Args:
        memory: a :class:`smriti.memory.Memory` or a ``MemoryContext``; the caller keeps
            ownership and closes it.
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``); default: the
            memory's embedder over whole values. Exposed, resolved, as ``index_config``.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl``, ``refresh_on_read``,
            ``sweep_interval_minutes``, ``omit_expired``).
        importance: importance of stored items; default: the important threshold, so
            consolidation never prunes them.
        reinforce: whether query searches reinforce the items they return.
        ranking: ``"similarity"`` (LangGraph's contract) or ``"recall"`` (Smriti's associative
            recall score) for query searches.
    """

    supports_ttl = True

    def __init__(
        self,
        memory: Memory | MemoryContext,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        importance: float | None = None,
        reinforce: bool = True,
        ranking: Ranking = "similarity",
    ) -> None:
        from smriti.integrations.tools import as_memory
        from smriti.pipelines.store import store_pipeline

        if ranking not in ("similarity", "recall"):
            raise ValueError(f"ranking must be 'similarity' or 'recall', got {ranking!r}")
        self.memory = as_memory(memory)
        context = self.memory.context
        settings = context.settings
        self.importance = settings.important_threshold if importance is None else importance
        self.reinforce = reinforce
        self.ranking = ranking
        self._index = StoreIndex.build(index, context.embedder, settings)
        self.index_config = self._index.config
        self.embeddings = self._index.embeddings
        self.ttl_config = ttl
        omit_expired = (ttl or {}).get("omit_expired", True) is not False
        self._meta = ItemMeta(lambda: self.memory.context.store, omit_expired)
        # Same store, lock and cache; only the thresholds differ: keys are distinct items even
        # when their values are equal, so neither write-time nor recall-time merging applies.
        self._write_context = dataclasses.replace(
            context, settings=settings.model_copy(update={"store_dedup_threshold": 2.0})
        )
        self._store_pipeline = store_pipeline
        self._recall_pipeline: Pipeline | None = None  # built at the first recall-ranked search
        self._lock = threading.RLock()
        self._sweeper: Sweeper | None = None
        self._reindex_if_changed()

    # ------------------------------------------------------------------ BaseStore interface
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (in a worker thread on an event loop's thread: module docstring)."""
        ops = list(ops)
        self._validate(ops)
        return off_the_loop(lambda: self._execute(ops, self._embed(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        self._validate(ops)
        embedded = await self._aembed(ops)
        # The embedded databases are synchronous: the database work runs in a worker thread.
        return await asyncio.to_thread(self._execute, ops, embedded)

    @staticmethod
    def _validate(ops: Sequence[Op]) -> None:
        for op in ops:
            if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
                raise TypeError(f"unknown store operation {type(op).__name__}")
            validate_op_namespace(op)
            if isinstance(op, PutOp) and op.value is not None and not isinstance(op.value, Mapping):
                raise TypeError(f"store values must be dicts, got {type(op.value).__name__}")

    # ------------------------------------------------------------------ embedding (before the db)
    def _documents(self, ops: Sequence[Op]) -> list[tuple[int, str, str]]:
        return [
            (i, path, text)
            for i, op in enumerate(ops)
            if isinstance(op, PutOp) and op.value is not None
            for path, text in self._index.texts(op.value, op.index)
        ]

    def _queries(self, ops: Sequence[Op]) -> list[str]:
        if self.ranking != "similarity":
            return []
        return sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})

    def _embed(self, ops: Sequence[Op]) -> _Embedded:
        documents, queries = self._documents(ops), self._queries(ops)
        vectors = self._index.embeddings.embed_documents([t for _, _, t in documents]) if documents else []
        return self._embedded(
            documents, vectors, queries, [self._index.embeddings.embed_query(q) for q in queries]
        )

    async def _aembed(self, ops: Sequence[Op]) -> _Embedded:
        documents, queries = self._documents(ops), self._queries(ops)
        embeddings = self._index.embeddings
        vectors = await aembed_documents(embeddings, [t for _, _, t in documents]) if documents else []
        query_vectors = await asyncio.gather(*(aembed_query(embeddings, q) for q in queries))
        return self._embedded(documents, vectors, queries, list(query_vectors))

    def _embedded(
        self,
        documents: list[tuple[int, str, str]],
        vectors: Sequence[Sequence[float]],
        queries: list[str],
        query_vectors: Sequence[Sequence[float]],
    ) -> _Embedded:
        if len(vectors) != len(documents):
            raise ValueError(
                f"the embedding model returned {len(vectors)} vectors for {len(documents)} texts"
            )
        by_op: dict[int, dict[str, list[float]]] = {}
        for (i, path, _), vector in zip(documents, self._index.checked(vectors), strict=True):
            by_op.setdefault(i, {})[path] = vector
        return _Embedded(by_op, dict(zip(queries, self._index.checked(query_vectors), strict=True)))

    # ------------------------------------------------------------------ executing a batch
    def _execute(self, ops: Sequence[Op], embedded: _Embedded) -> list[Result]:
        results: list[Result] = []
        with self._lock:
            for i, op in enumerate(ops):
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, PutOp):
                    if op.value is None:
                        self._delete(op.namespace, op.key)
                    else:
                        self._put(op, embedded.documents.get(i, {}))
                    results.append(None)
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, embedded.queries.get(op.query or "")))
                else:
                    results.append(self._list_namespaces(op))
        return results

    # ------------------------------------------------------------------ index in metadata
    @property
    def _graph_store(self):
        return self.memory.context.store

    def _now(self) -> datetime:
        return self.memory.context.clock()

    # ------------------------------------------------------------------ writes
    def _put(self, op: PutOp, vectors: Mapping[str, list[float]]) -> None:
        namespace, key, value = tuple(op.namespace), op.key, dict(op.value or {})
        content = json.dumps(value, ensure_ascii=False)
        label = "/".join(namespace).replace(",", " ")
        entries = self._meta.entries(namespace)
        previous = entries.get(key)
        output = self._store_pipeline.graph.invoke(
            {
                "content": content,
                "importance": self.importance,
                "tags": f"{STORE_TAG},ns:{label}",
                "source": source_of(namespace, key),
            },
            context=self._write_context,
        )
        now = self._now()
        if previous is not None and previous["id"] != output["id"]:
            self._forget_engram(previous["id"])
        if vectors:
            self._meta.set_vectors(namespace, key, encode_vectors(self._index.signature, vectors))
        else:
            self._meta.delete_vectors(namespace, key)
        keep_created = previous is not None and not (self._meta.omit_expired and is_expired(previous, now))
        entries[key] = {
            "id": output["id"],
            "created_at": previous["created_at"] if keep_created and previous else now.isoformat(),
            "updated_at": now.isoformat(),
            "index": op.index if op.index is not None else None,
            "ttl": op.ttl,
            "expires_at": expiry(now, op.ttl),
        }
        self._meta.save(namespace, entries)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        namespace = tuple(namespace)
        entries = self._meta.entries(namespace)
        entry = entries.pop(key, None)
        if entry is None:
            return
        self._forget_engram(entry["id"])
        self._meta.delete_vectors(namespace, key)
        self._meta.save(namespace, entries)

    def _forget_engram(self, engram_id: str) -> None:
        from smriti.errors import NotFound

        with contextlib.suppress(NotFound):  # already pruned or forgotten elsewhere
            self.memory.forget(engram_id)

    # ------------------------------------------------------------------ reads
    def _get(self, op: GetOp) -> Item | None:
        namespace, now = tuple(op.namespace), self._now()
        entry = self._meta.live(namespace, now).get(op.key)
        if entry is None:
            return None
        engram = self._graph_store.get_engram(entry["id"])
        if engram is None:
            return None
        if op.refresh_ttl and entry.get("ttl") is not None:
            self._meta.refresh(namespace, [op.key], now)
        return _item(Item, namespace, op.key, engram.content, entry)

    def _matching(self, op: SearchOp, now: datetime) -> list[tuple[SearchItem, str]]:
        """Every live item under the prefix that passes the filter, with its engram id."""
        prefix = tuple(op.namespace_prefix)
        found: list[tuple[SearchItem, str]] = []
        for namespace in self._meta.namespaces():
            if namespace[: len(prefix)] != prefix:
                continue
            entries = self._meta.live(namespace, now)
            by_id = {e["id"]: k for k, e in entries.items()}
            for engram in self._graph_store.get_engrams(list(by_id)):
                key = by_id[engram.id]
                item = _item(SearchItem, namespace, key, engram.content, entries[key])
                if matches_filter(item.value, op.filter):
                    found.append((item, engram.id))
        return found

    def _search(self, op: SearchOp, query_vector: list[float] | None) -> list[SearchItem]:
        now = self._now()
        if op.query and self.ranking == "recall":
            page = self._recall_page(op, now)
        else:
            found = self._matching(op, now)
            if op.query and query_vector is not None:
                found = self._ranked(found, tuple(op.namespace_prefix), query_vector)
            else:
                found.sort(key=lambda f: (f[0].updated_at, f[0].namespace, f[0].key), reverse=True)
            page = found[op.offset : op.offset + op.limit]
        if op.query and self.reinforce and page:
            self.memory.context.reinforcer.reinforce([engram_id for _, engram_id in page], now)
        if op.refresh_ttl and page:
            by_namespace: dict[tuple[str, ...], list[str]] = {}
            for item, _ in page:
                by_namespace.setdefault(item.namespace, []).append(item.key)
            for namespace, keys in by_namespace.items():
                self._meta.refresh(namespace, keys, now)
        return [item for item, _ in page]

    def _ranked(
        self, found: list[tuple[SearchItem, str]], prefix: tuple[str, ...], query_vector: list[float]
    ) -> list[tuple[SearchItem, str]]:
        """The items by cosine similarity to the query (best first), then those without vectors
        (put with ``index=False``, or with none of the indexed fields) with ``score`` None, most
        recently updated first: last, as LangGraph's InMemoryStore ranks them, never left out."""
        stored = self._meta.vectors_under(prefix)
        ranked: list[tuple[SearchItem, str]] = []
        unranked: list[tuple[SearchItem, str]] = []
        for item, engram_id in found:
            raw = stored.get(vector_key(item.namespace, item.key))
            vectors = decode_vectors(raw, self._index.signature) if raw else None
            if vectors is None:
                item.score = None
                unranked.append((item, engram_id))
                continue
            item.score = similarity(query_vector, vectors)
            ranked.append((item, engram_id))
        ranked.sort(key=lambda f: (-(f[0].score or 0.0), -f[0].updated_at.timestamp(), f[0].key))
        unranked.sort(key=lambda f: (-f[0].updated_at.timestamp(), f[0].key))
        return ranked + unranked

    def _recall_page(self, op: SearchOp, now: datetime) -> list[tuple[SearchItem, str]]:
        """Rank by Smriti's recall score; keep the prefix's live items that pass the filter."""
        from smriti.pipelines.recall import build_recall_stages

        if self._recall_pipeline is None:
            # Without its reinforce step: only the page returned is reinforced (by _search).
            self._recall_pipeline = build_recall_stages(reinforce=False)
        context = self.memory.context
        pool = max((op.offset + op.limit) * _OVERSAMPLE, _MIN_POOL)
        search_context = dataclasses.replace(
            context,
            settings=context.settings.model_copy(
                update={
                    "memory_fabric_max_results": max(pool, context.settings.memory_fabric_max_results),
                    "memory_fabric_dedup_threshold": 2.0,  # equal values under two keys are two items
                }
            ),
        )
        # Items are values under keys, not facts that correct each other: none is hidden.
        query = {"query": op.query, "limit": pool, "include_superseded": True}
        output = self._recall_pipeline.graph.invoke(query, context=search_context)
        prefix = tuple(op.namespace_prefix)
        entries_cache: dict[tuple[str, ...], dict[str, Entry]] = {}
        kept: list[tuple[SearchItem, str]] = []
        for result in output["result"]["results"]:
            located = parse_source(result.get("source") or "")
            if located is None or located[0][: len(prefix)] != prefix:
                continue
            namespace, key = located
            if namespace not in entries_cache:
                entries_cache[namespace] = self._meta.live(namespace, now)
            entry = entries_cache[namespace].get(key)
            if entry is None or entry["id"] != result["id"]:
                continue  # expired, or a replaced version being deleted
            item = _item(SearchItem, namespace, key, result["text"], entry, result["score"])
            if matches_filter(item.value, op.filter):
                kept.append((item, result["id"]))
        return kept[op.offset : op.offset + op.limit]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        now = self._now()
        namespaces = [
            ns
            for ns in self._meta.namespaces()
            if all(namespace_matches(ns, condition) for condition in op.match_conditions or ())
            and self._meta.live(ns, now)
        ]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ re-embedding
    def _reindex_if_changed(self) -> None:
        """Re-embed every item when the index (model, dims, fields) differs from the last one."""
        with self._lock:
            if self._meta.index_signature() != self._index.signature:
                self._reindex()

    def reindex(self) -> int:
        """Embed every item again with the current index; returns how many items have vectors."""
        return off_the_loop(self._reindex)

    def _reindex(self) -> int:
        count = 0
        with self._lock:
            for namespace in self._meta.namespaces():
                entries = self._meta.entries(namespace)
                by_id = {e["id"]: k for k, e in entries.items()}
                for engram in self._graph_store.get_engrams(list(by_id)):
                    key = by_id[engram.id]
                    texts = self._index.texts(json.loads(engram.content), entries[key].get("index"))
                    if not texts:
                        self._meta.delete_vectors(namespace, key)
                        continue
                    vectors = self._index.checked(
                        self._index.embeddings.embed_documents([t for _, t in texts])
                    )
                    record = dict(zip([p for p, _ in texts], vectors, strict=True))
                    self._meta.set_vectors(namespace, key, encode_vectors(self._index.signature, record))
                    count += 1
            self._meta.set_index_signature(self._index.signature)
        return count

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """Delete every expired item (engram and vectors too); returns how many."""
        return off_the_loop(self._sweep)

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` for the event loop (the work runs in a worker thread)."""
        return await asyncio.to_thread(self._sweep)

    def _sweep(self) -> int:
        swept = 0
        with self._lock:
            now = self._now()
            for namespace in self._meta.namespaces():
                entries = self._meta.entries(namespace)
                expired = [key for key, entry in entries.items() if is_expired(entry, now)]
                for key in expired:
                    self._forget_engram(entries.pop(key)["id"])
                    self._meta.delete_vectors(namespace, key)
                if expired:
                    self._meta.save(namespace, entries)
                    swept += len(expired)
        return swept

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the ``ttl`` config's)
        in a daemon thread; the future completes when :meth:`stop_ttl_sweeper` stops it."""
        if self._sweeper is not None and not self._sweeper.future.done():
            return self._sweeper.future
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if not interval:
            raise ValueError("no sweep interval: pass sweep_interval_minutes or set it in the ttl config")
        self._sweeper = Sweeper(self._sweep, float(interval))
        return self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; True when it has stopped (or never ran) within ``timeout`` seconds."""
        if self._sweeper is None:
            return True
        stopped = self._sweeper.stop(timeout)
        if stopped:
            self._sweeper = None
        return stopped

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if self._sweeper is not None:
                self._sweeper.stop(0)


def _item(
    cls: type[Item],
    namespace: tuple[str, ...],
    key: str,
    content: str,
    entry: Mapping[str, Any],
    score: float | None = None,
) -> Any:
    fields = {
        "namespace": namespace,
        "key": key,
        "value": json.loads(content),
        "created_at": datetime.fromisoformat(entry["created_at"]),
        "updated_at": datetime.fromisoformat(entry["updated_at"]),
    }
    if cls is SearchItem:
        return SearchItem(score=score, **fields)
    return Item(**fields)
