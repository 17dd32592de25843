"""``SmritiStore``: a LangGraph ``BaseStore`` backed by one user's Smriti memory.

Give it to ``graph.compile(store=...)`` or ``create_react_agent(..., store=...)`` and the
agent's long-term store becomes Smriti memories: searchable by associative recall, linked to
cues, clustered, decaying and reinforced like every other memory of that user.

How the key-value model maps onto memories (decided here, relied on by the tests):

* **One store, one user.** A SmritiStore wraps one :class:`~smriti.memory.Memory` (one user's
  database). Namespaces do not select users; open one SmritiStore per user for isolation.
* **An item is one engram.** Its content is the value as JSON text (``json.dumps`` with
  ``ensure_ascii=False``), so a value round-trips exactly as JSON does: dicts, lists,
  strings, numbers, booleans and None come back equal (tuples come back as lists).
* **Namespace and key are exact.** The engram's ``source`` is
  ``"langgraph-store:" + json.dumps([*namespace, key])`` (case and punctuation preserved), and
  a per-namespace index in the store's metadata maps each key to its engram id with the
  item's ``created_at``/``updated_at``, so ``get(namespace, key)`` is one lookup, never a
  search. Engrams also get the tags ``langgraph-store`` and ``ns:<namespace joined by />``
  (lower-cased, like all Smriti tags) so they are recognisable in recall results and the CLI.
* **Put replaces.** Putting an existing key stores the new value as a new engram and deletes
  the old one (``created_at`` is kept). Smriti's near-duplicate merging is switched off for
  store writes: two keys with equal values stay two items.
* **Search with a query** runs Smriti's recall graph and returns the items it reaches,
  ordered by the recall score (``SearchItem.score``); items the query does not reach at all are
  not returned. The items returned (only those) are reinforced, as any recalled memory is;
  pass ``reinforce=False`` for side-effect-free searches. **Without a query**, search lists
  the namespace's items, most recently updated first, with ``score=None``.
* **Filters** compare top-level value fields: equality (nested dicts and lists compare
  structurally) and the operators ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``.
* **Forgetting.** Items are stored at the important threshold by default, so consolidation
  never prunes them (a key-value store should not lose data by itself); pass ``importance``
  below ``IMPORTANT_THRESHOLD`` to let unused items decay away. An item whose engram is gone
  (pruned, or forgotten through the MCP tools) reads as missing.
* Not supported: TTLs (``supports_ttl = False``) and per-field indexing (``index=`` is
  accepted and ignored: the whole value is indexed).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import threading
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

if TYPE_CHECKING:
    from smriti.memory import Memory
    from smriti.nodes.state import Candidate, MemoryContext

SOURCE_PREFIX = "langgraph-store:"
STORE_TAG = "langgraph-store"
_NAMESPACES_META = "langgraph_store:namespaces"
_ENTRIES_META = "langgraph_store:ns:"
# Recall is asked for this many more results than a page needs, because other memories and
# other namespaces compete for the same ranks before the namespace and filter are applied.
_OVERSAMPLE = 4
_MIN_POOL = 50


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


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` satisfies every ``{field: expected}`` of ``filter`` (see module docstring)."""
    return all(_compare(value.get(field), expected) for field, expected in (filter or {}).items())


def _compare(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        if any(k.startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return actual == expected


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return actual == operand
    if op == "$ne":
        return actual != operand
    comparisons = {
        "$gt": lambda a, b: a > b,
        "$gte": lambda a, b: a >= b,
        "$lt": lambda a, b: a < b,
        "$lte": lambda a, b: a <= b,
    }
    if op not in comparisons:
        raise ValueError(f"unsupported filter operator {op!r} (use $eq, $ne, $gt, $gte, $lt or $lte)")
    try:
        return comparisons[op](actual, operand)
    except TypeError:  # missing field or incomparable types: no match, like a SQL NULL
        return False


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """A ``MatchCondition`` (prefix or suffix, ``"*"`` matches any one label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)


class SmritiStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are Smriti memories of one user.

    Args:
        memory: a :class:`smriti.memory.Memory` or a ``MemoryContext``; the caller keeps
            ownership and closes it.
        importance: importance of stored items; default: the important threshold, so
            consolidation never prunes them.
        reinforce: whether query searches reinforce the items they return.
    """

    supports_ttl = False

    def __init__(
        self, memory: Memory | MemoryContext, *, importance: float | None = None, reinforce: bool = True
    ) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        from smriti.integrations.tools import as_memory
        from smriti.pipelines.recall import build_recall_graph
        from smriti.pipelines.store import store_graph

        self.memory = as_memory(memory)
        context = self.memory.context
        settings = context.settings
        self.importance = settings.important_threshold if importance is None else importance
        self.reinforce = reinforce
        # Same store, lock and cache; only the thresholds differ: keys are distinct items even
        # when their values are equal, so neither write-time nor recall-time merging applies.
        self._write_context = dataclasses.replace(
            context, settings=settings.model_copy(update={"store_dedup_threshold": 2.0})
        )
        self._store_graph = store_graph
        # Recall stops before reinforcement so only the items actually returned are reinforced.
        self._recall_saver = InMemorySaver()
        self._recall_graph = build_recall_graph(
            checkpointer=self._recall_saver, interrupt_before=["reinforce"]
        )
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ BaseStore interface
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op.namespace, op.key))
            elif isinstance(op, PutOp):
                if op.value is None:
                    self._delete(op.namespace, op.key)
                else:
                    self._put(op.namespace, op.key, op.value)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The embedded databases are synchronous: run the batch in a worker thread.
        return await asyncio.to_thread(self.batch, list(ops))

    # ------------------------------------------------------------------ index in metadata
    @property
    def _graph_store(self):
        return self.memory.context.store

    def _entries(self, namespace: tuple[str, ...]) -> dict[str, dict[str, str]]:
        raw = self._graph_store.get_meta(_ENTRIES_META + json.dumps(list(namespace), ensure_ascii=False))
        return json.loads(raw) if raw else {}

    def _save_entries(self, namespace: tuple[str, ...], entries: dict[str, dict[str, str]]) -> None:
        meta_key = _ENTRIES_META + json.dumps(list(namespace), ensure_ascii=False)
        self._graph_store.set_meta(meta_key, json.dumps(entries, ensure_ascii=False))
        namespaces = set(self._namespaces())
        known = namespace in namespaces
        if entries and not known:
            namespaces.add(namespace)
        elif not entries and known:
            namespaces.discard(namespace)
        else:
            return
        self._graph_store.set_meta(
            _NAMESPACES_META, json.dumps(sorted(list(ns) for ns in namespaces), ensure_ascii=False)
        )

    def _namespaces(self) -> list[tuple[str, ...]]:
        raw = self._graph_store.get_meta(_NAMESPACES_META)
        return [tuple(ns) for ns in json.loads(raw)] if raw else []

    # ------------------------------------------------------------------ operations
    def _put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> None:
        if not isinstance(value, dict):
            raise TypeError(f"store values must be dicts, got {type(value).__name__}")
        content = json.dumps(value, ensure_ascii=False)
        label = "/".join(namespace).replace(",", " ")
        with self._lock:
            entries = self._entries(namespace)
            previous = entries.get(key)
            output = self._store_graph.invoke(
                {
                    "content": content,
                    "importance": self.importance,
                    "tags": f"{STORE_TAG},ns:{label}",
                    "source": source_of(namespace, key),
                },
                context=self._write_context,
            )
            now = self.memory.context.clock().isoformat()
            if previous is not None and previous["id"] != output["id"]:
                self._forget_engram(previous["id"])
            entries[key] = {
                "id": output["id"],
                "created_at": previous["created_at"] if previous else now,
                "updated_at": now,
            }
            self._save_entries(namespace, entries)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        with self._lock:
            entries = self._entries(namespace)
            entry = entries.pop(key, None)
            if entry is None:
                return
            self._forget_engram(entry["id"])
            self._save_entries(namespace, entries)

    def _forget_engram(self, engram_id: str) -> None:
        from smriti.errors import NotFound

        with contextlib.suppress(NotFound):  # already pruned or forgotten elsewhere
            self.memory.forget(engram_id)

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        entry = self._entries(namespace).get(key)
        if entry is None:
            return None
        engram = self._graph_store.get_engram(entry["id"])
        if engram is None:
            return None
        return _item(Item, namespace, key, engram.content, entry)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.query:
            return self._recall(op)
        prefix = tuple(op.namespace_prefix)
        found: list[SearchItem] = []
        for namespace in self._namespaces():
            if namespace[: len(prefix)] != prefix:
                continue
            entries = self._entries(namespace)
            by_id = {e["id"]: k for k, e in entries.items()}
            for engram in self._graph_store.get_engrams(list(by_id)):
                key = by_id[engram.id]
                item = _item(SearchItem, namespace, key, engram.content, entries[key])
                if matches_filter(item.value, op.filter):
                    found.append(item)
        found.sort(key=lambda i: (i.updated_at, i.namespace, i.key), reverse=True)
        return found[op.offset : op.offset + op.limit]

    def _recall(self, op: SearchOp) -> list[SearchItem]:
        """Rank by Smriti's recall score, keep this namespace's items that pass the filter."""
        context = self.memory.context
        wanted = op.offset + op.limit
        pool = max(wanted * _OVERSAMPLE, _MIN_POOL)
        search_context = dataclasses.replace(
            context,
            settings=context.settings.model_copy(
                update={
                    "memory_fabric_max_results": max(pool, context.settings.memory_fabric_max_results),
                    "memory_fabric_dedup_threshold": 2.0,  # equal values under two keys are two items
                }
            ),
        )
        config = {"configurable": {"thread_id": f"smriti-store-{uuid.uuid4()}"}}
        prefix = tuple(op.namespace_prefix)
        entries_cache: dict[tuple[str, ...], dict[str, dict[str, str]]] = {}
        kept: list[tuple[Candidate, SearchItem]] = []
        try:
            # Items are values under keys, not facts that correct each other: none is hidden.
            query = {"query": op.query, "limit": pool, "include_superseded": True}
            self._recall_graph.invoke(query, config, context=search_context)
            candidates = self._recall_graph.get_state(config).values.get("results", [])
            for candidate in candidates:
                located = parse_source(candidate.source or "")
                if located is None or located[0][: len(prefix)] != prefix:
                    continue
                namespace, key = located
                if namespace not in entries_cache:
                    entries_cache[namespace] = self._entries(namespace)
                entry = entries_cache[namespace].get(key)
                if entry is None or entry["id"] != candidate.id:
                    continue  # a replaced version that is being deleted
                item = _item(SearchItem, namespace, key, candidate.text, entry, candidate.score)
                if matches_filter(item.value, op.filter):
                    kept.append((candidate, item))
            page = kept[op.offset : op.offset + op.limit]
            if self.reinforce and page:
                # Resume the recall graph on just this page: its own reinforce node runs.
                # (as the node just before reinforce, where the graph was interrupted)
                self._recall_graph.update_state(
                    config, {"results": [c for c, _ in page]}, as_node="demote_superseded"
                )
                self._recall_graph.invoke(None, config, context=search_context)
        finally:
            self._recall_saver.delete_thread(config["configurable"]["thread_id"])
        return [item for _, item in page]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = [
            ns
            for ns in self._namespaces()
            if all(namespace_matches(ns, condition) for condition in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]


def _item(
    cls: type[Item],
    namespace: tuple[str, ...],
    key: str,
    content: str,
    entry: Mapping[str, str],
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
