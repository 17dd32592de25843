"""The engrams part, the stated facts and an updatable memory time on every backend (see conftest.BACKENDS):
facts are stored, replaced and keyword-searched (scan and index), travel in exports, and
``created_at`` can be changed in place (what a landed LLM analysis does with a stated time)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from smriti.stores.base import Engram
from smriti.stores.records import import_into
from tests.stores.conformance.data import T0

pytestmark = pytest.mark.engrams


def _engram(eid: str, content: str, **fields) -> Engram:
    return Engram(id=eid, content=content, created_at=T0, last_accessed_at=T0, **fields)


@pytest.mark.parametrize("indexed", [False, True], ids=["scan", "indexed"])
def test_facts_are_searched_and_replaced(store, indexed):
    store.create_engram(_engram("f1", "Alice talked about databases", facts="Alice prefers Qdrant"))
    store.create_engram(_engram("f2", "Bob talked about queues"))
    store.create_engram(_engram("f3", "Nothing to see here"))
    if indexed:
        store.ensure_indexes(0)
    assert store.get_engram("f1").fact_list() == ["Alice prefers Qdrant"]
    assert [h.id for h in store.fulltext_search("qdrant", 10)] == ["f1"]
    assert store.fulltext_search("kafka", 10) == []

    assert store.update_engrams({"f2": {"facts": "Bob runs Kafka\nBob owns billing"}}) == 1
    assert store.update_engram("f1", facts="Alice prefers Milvus")  # replaced, not appended
    assert store.get_engram("f2").fact_list() == ["Bob runs Kafka", "Bob owns billing"]
    assert [h.id for h in store.fulltext_search("kafka", 10)] == ["f2"]
    assert [h.id for h in store.fulltext_search("milvus", 10)] == ["f1"]
    assert store.fulltext_search("qdrant", 10) == []


def test_created_at_is_updatable_and_others_stay(store):
    store.create_engram(_engram("t1", "the offsite happened", summary="offsite"))
    earlier = datetime(2025, 11, 3, 8, 0, tzinfo=timezone(timedelta(hours=2)))
    assert store.update_engram("t1", created_at=earlier, facts="The offsite was in Lisbon")
    got = store.get_engram("t1")
    assert got.created_at == earlier and got.created_at.tzinfo is not None
    assert got.last_accessed_at == T0 and got.summary == "offsite"
    assert [s.id for s in store.engram_states(["t1"])] == ["t1"]
    with pytest.raises(ValueError, match="None"):
        store.update_engram("t1", created_at=None)
    with pytest.raises(ValueError, match="cannot update id"):
        store.update_engram("t1", id="t2")
    with pytest.raises(TypeError):
        store.update_engram("t1", created_at="2025-11-03")
    assert store.get_engram("t1").created_at == earlier


def test_facts_travel_in_exports(store, backend):
    store.create_engram(_engram("x1", "Alice talked about databases", facts="Alice prefers Qdrant"))
    store.update_engram("x1", created_at=T0 - timedelta(days=3))
    records = list(store.export_records())
    assert next(r for r in records if r["kind"] == "engram")["facts"] == "Alice prefers Qdrant"
    other = backend.open("bob")
    import_into(other, records)
    copied = other.get_engram("x1")
    assert copied.fact_list() == ["Alice prefers Qdrant"] and copied.created_at == T0 - timedelta(days=3)
    assert [h.id for h in other.fulltext_search("qdrant", 10)] == ["x1"]


@pytest.mark.parametrize("indexed", [False, True], ids=["scan", "indexed"])
def test_words_either_side_of_a_line_break_are_found(store, indexed):
    """Multi-line content (a pasted note, a chat turn with a list) is searchable word by word."""
    store.create_engram(_engram("n1", "Deploy checklist:\nKafka\nBilling\r\nrollback\tplan"))
    store.create_engram(_engram("n2", "Nothing to see here"))
    if indexed:
        store.ensure_indexes(0)
    for word in ("checklist", "kafka", "billing", "rollback", "plan"):
        assert [h.id for h in store.fulltext_search(word, 10)] == ["n1"], word
    assert store.get_engram("n1").content == "Deploy checklist:\nKafka\nBilling\r\nrollback\tplan"
