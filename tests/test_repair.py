"""Consolidation repairs half-written memories (issue 12, point 9): an engram an older version
left without cue links gets them from the offline analysis of its content."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from smriti.memory import Memory
from smriti.providers.heuristic import analyze_offline
from smriti.stores.base import Engram, normalise_cue_name

T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
HALF_WRITTEN = "Bob recommends cursor pagination for the orders API because offsets get slow."


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu"])
def test_consolidation_links_the_cues_of_an_engram_that_has_none(make_context, db_type):
    context = make_context(db_type=db_type)
    memory = Memory(context)
    whole = memory.store("Alice prefers Postgres with pgvector for retrieval projects.")
    store = context.store
    # What a kill between the engram's write and its cue links left behind (versions before
    # stores were atomic): the row, its embedding and its text, no EncodedBy edge.
    vector = context.embedder.embed_documents([HALF_WRITTEN])[0]
    store.create_engram(
        Engram(
            id="half", content=HALF_WRITTEN, tags="api", created_at=T0, last_accessed_at=T0, embedding=vector
        )
    )
    store.create_engram(
        Engram(id="bare", content="... !!", created_at=T0, last_accessed_at=T0, embedding=vector)
    )
    assert store.uncued_engram_ids() == ["bare", "half"]
    assert store.engrams_by_cues(["pagination"], 5) == []
    cues_before = {c.name for c in store.cues_of([whole["id"]])[whole["id"]]}

    report = memory.consolidate(now=T0)
    assert report["repaired"] == 1 and report["unrepairable"] == 1
    expected = {normalise_cue_name(c.name) for c in analyze_offline(HALF_WRITTEN).cues} | {"api"}
    assert {c.name for c in store.cues_of(["half"])["half"]} == expected
    assert [hit.engram_id for hit in store.engrams_by_cues(["pagination", "cursor"], 5)] == ["half"]
    assert store.relations_of(["half"]), "its relations are recorded again"
    assert any(
        r["kind"] == "co_occurs" and "pagination" in (r["source"], r["target"])
        for r in memory.export_records()
    )
    # Through recall's cue branch too, and the whole memory is untouched.
    hits = memory.recall("cursor pagination", explain=True)
    assert hits["results"][0]["id"] == "half"
    assert {c.name for c in store.cues_of([whole["id"]])[whole["id"]]} == cues_before
    assert store.uncued_engram_ids() == ["bare"]

    again = memory.consolidate(now=T0)
    assert again["repaired"] == 0 and again["unrepairable"] == 1
    # Forget takes back exactly what repair linked, as for a memory stored whole.
    memory.forget("half")
    assert store.engrams_by_cues(["pagination"], 5) == []
