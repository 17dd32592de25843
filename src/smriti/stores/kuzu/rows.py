"""The embedded store's Engram table in memory, beside the exact-search caches.

Reading a row through Kuzu's Python binding costs 0.2-0.35 ms a query whatever the table
size, so recall's ten candidates took ~3.5 ms at 10k engrams, a third of a vector search.
While the store answers vector search from :class:`~smriti.stores.search.VectorCache`
(up to ``exact_search_limit`` embeddings) it already holds every embedding in memory; the
other columns are a few hundred bytes a row more, and :class:`EngramRows` keeps them so
those reads become dict lookups.

Rows are held without their embeddings (the vector cache has those, as float32 exactly
like the database column). Like the other caches they are loaded once and then kept in
step by the store's write methods; everything that changes an engram goes through them,
because the database file is locked to this process.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from smriti.stores.base import Engram


class EngramRows:
    """id -> Engram (embedding left out); ``loaded`` says whether it mirrors the table."""

    def __init__(self) -> None:
        self.loaded = False
        self._rows: dict[str, Engram] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def invalidate(self) -> None:
        self.loaded = False
        self._rows = {}

    def load(self, engrams: Iterable[Engram]) -> None:
        """Replace the contents with every engram of the table."""
        self._rows = {engram.id: replace(engram, embedding=None) for engram in engrams}
        self.loaded = True

    def get(self, engram_id: str, embedding: list[float] | None) -> Engram | None:
        """A fresh copy (callers may change it) carrying ``embedding``."""
        row = self._rows.get(engram_id)
        return None if row is None else replace(row, embedding=embedding)

    def put(self, engram: Engram) -> None:
        if self.loaded:
            self._rows[engram.id] = replace(engram, embedding=None)

    def update(self, engram_id: str, fields: Mapping[str, Any]) -> None:
        """Apply changed fields, given as the values a read of the database would return."""
        row = self._rows.get(engram_id)
        if row is not None:
            self._rows[engram_id] = replace(row, **fields)

    def remove(self, engram_id: str) -> None:
        self._rows.pop(engram_id, None)
