"""Where :class:`~smriti.integrations.langgraph_store.SmritiStore` keeps its items' index: the
memory's metadata (``get_meta``/``set_meta``), so it works the same on every backend.

* ``langgraph_store:namespaces``: the sorted list of namespaces holding items.
* ``langgraph_store:ns:<namespace as JSON>``: key -> entry (engram id, ``created_at``,
  ``updated_at``, the put's ``index`` paths, ``ttl`` and ``expires_at``) of one namespace.
* ``langgraph_store:vec:<[*namespace, key] as JSON>``: one item's vectors (store_index.py).
* ``langgraph_store:index``: the signature of the index the vectors were made with.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from smriti.integrations.store_ttl import expiry, is_expired

_NAMESPACES_META = "langgraph_store:namespaces"
_ENTRIES_META = "langgraph_store:ns:"
_VECTORS_META = "langgraph_store:vec:"
_INDEX_META = "langgraph_store:index"

Entry = dict[str, Any]


def vector_key(namespace: tuple[str, ...], key: str) -> str:
    """The metadata key of one item's vectors."""
    return _VECTORS_META + json.dumps([*namespace, key], ensure_ascii=False)


def _vector_prefix(prefix: tuple[str, ...]) -> str:
    """The literal start of every vector key of items under ``prefix``."""
    opening = json.dumps(list(prefix), ensure_ascii=False)[:-1]  # without its closing "]"
    return _VECTORS_META + (opening + ", " if prefix else opening)


class ItemMeta:
    """Reads and writes the index above; ``omit_expired`` hides expired entries from ``live``."""

    def __init__(self, graph_store: Callable[[], Any], omit_expired: bool) -> None:
        self._store = graph_store
        self.omit_expired = omit_expired

    def entries(self, namespace: tuple[str, ...]) -> dict[str, Entry]:
        raw = self._store().get_meta(_ENTRIES_META + json.dumps(list(namespace), ensure_ascii=False))
        return json.loads(raw) if raw else {}

    def save(self, namespace: tuple[str, ...], entries: dict[str, Entry]) -> None:
        """Write a namespace's entries; the namespace list follows (an empty one leaves it)."""
        meta_key = _ENTRIES_META + json.dumps(list(namespace), ensure_ascii=False)
        self._store().set_meta(meta_key, json.dumps(entries, ensure_ascii=False))
        namespaces = set(self.namespaces())
        known = namespace in namespaces
        if entries and not known:
            namespaces.add(namespace)
        elif not entries and known:
            namespaces.discard(namespace)
        else:
            return
        self._store().set_meta(
            _NAMESPACES_META, json.dumps(sorted(list(ns) for ns in namespaces), ensure_ascii=False)
        )

    def namespaces(self) -> list[tuple[str, ...]]:
        raw = self._store().get_meta(_NAMESPACES_META)
        return [tuple(ns) for ns in json.loads(raw)] if raw else []

    def live(self, namespace: tuple[str, ...], now: datetime) -> dict[str, Entry]:
        """The namespace's entries a read may see at ``now``."""
        entries = self.entries(namespace)
        if not self.omit_expired:
            return entries
        return {k: e for k, e in entries.items() if not is_expired(e, now)}

    def refresh(self, namespace: tuple[str, ...], keys: Iterable[str], now: datetime) -> None:
        """Restart the TTL of ``keys`` (those that have one) from ``now``."""
        entries = self.entries(namespace)
        changed = False
        for key in keys:
            entry = entries.get(key)
            if entry is not None and entry.get("ttl") is not None:
                entry["expires_at"] = expiry(now, entry["ttl"])
                changed = True
        if changed:
            self.save(namespace, entries)

    # -- vectors ---------------------------------------------------------------------------
    def set_vectors(self, namespace: tuple[str, ...], key: str, record: str) -> None:
        self._store().set_meta(vector_key(namespace, key), record)

    def delete_vectors(self, namespace: tuple[str, ...], key: str) -> None:
        self._store().delete_meta(vector_key(namespace, key))

    def vectors_under(self, prefix: tuple[str, ...]) -> dict[str, str]:
        """Every vector record of items under ``prefix``, by :func:`vector_key` (one read)."""
        return self._store().meta_items(_vector_prefix(prefix))

    def index_signature(self) -> str | None:
        return self._store().get_meta(_INDEX_META)

    def set_index_signature(self, signature: str) -> None:
        self._store().set_meta(_INDEX_META, signature)
