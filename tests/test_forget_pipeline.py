"""Forget through Memory (the MCP tool's and the CLI's path) takes back what the store pipeline
wrote: the export after storing and forgetting a memory is the export from before it."""

from __future__ import annotations

import pytest

from smriti.memory import Memory

FIRST = "Alice moved the billing search to Postgres with pgvector; invoices load in 40 ms now."
# Shares Alice, Postgres and billing with FIRST, and brings more than six cues of its own.
SECOND = (
    "Bob recommends cursor pagination for the orders API because offsets get slow; Alice agrees "
    "and wants Postgres keyset indexes for billing, Kafka for events and Redis for sessions."
)


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu"])
def test_store_then_forget_leaves_the_memory_as_it_was(make_context, db_type):
    memory = Memory(make_context(db_type=db_type))
    memory.store(FIRST, tags="search", source="chat")
    before = list(memory.export_records())

    stored = memory.store(SECOND, tags="api,backend", source="chat")
    assert len(stored["cues"]) > 6
    during = list(memory.export_records())
    assert any(r["kind"] == "relates_to" for r in during if r.get("engram_id") == stored["id"]), (
        "the heuristic should record a relation for this test to mean something"
    )

    memory.forget(stored["id"])
    after = list(memory.export_records())
    assert after == before
    assert stored["id"] not in str(after)
