"""``uncued_engram_ids``, what consolidation's repair step reads, on every backend."""

from __future__ import annotations

from smriti.stores.base import Cue, Engram


def test_uncued_engram_ids_lists_engrams_without_cue_links(store):
    for engram_id in ("c", "a", "b"):
        store.create_engram(Engram(id=engram_id, content=f"memory {engram_id}"))
    store.link_cues("b", [Cue("linked")])
    assert store.uncued_engram_ids() == ["a", "c"]
    store.link_cues("a", [Cue("linked"), Cue("other")])
    assert store.uncued_engram_ids() == ["c"]
