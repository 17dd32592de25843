"""What a MemoryContext keeps between runs is a typed record, not a dict of string keys
(issue 38, item 6)."""

from __future__ import annotations

import dataclasses

from smriti.memory import Memory
from smriti.nodes.leiden import LeidenEngine
from smriti.nodes.state import ContextCache, MemoryContext


def test_the_cache_is_a_typed_record():
    cache = next(f for f in dataclasses.fields(MemoryContext) if f.name == "cache")
    assert cache.type == "ContextCache" and cache.default_factory is ContextCache
    assert {f.name for f in dataclasses.fields(ContextCache)} == {
        "leiden",
        "indexes_ready",
        "recent_by_source",
    }


def test_runs_fill_it_and_a_restore_clears_it(settings):
    with Memory.open(settings) as memory:
        stored = [
            memory.store(f"Atlas deploy note {n}: the {word} moved to Postgres", source="chat")["id"]
            for n, word in enumerate(["pipeline", "billing", "search", "cache"])
        ]
        memory.consolidate()
        cache = memory.context.cache
        assert isinstance(cache.leiden, LeidenEngine)
        assert cache.recent_by_source["chat"][0] == stored[-1]  # newest first
        cache.clear()
        assert (cache.leiden, cache.indexes_ready, cache.recent_by_source) == (None, False, {})
