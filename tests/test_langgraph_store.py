"""SmritiStore: a LangGraph BaseStore on Smriti memories (conformance-style round trips)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from langgraph.store.base import BaseStore, Item, SearchItem

from smriti.integrations.langgraph_store import (
    SOURCE_PREFIX,
    SmritiStore,
    matches_filter,
    parse_source,
    source_of,
)
from smriti.memory import Memory
from tests.clock import Clock


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def memory(make_context, clock):
    return Memory(make_context(clock=clock))


@pytest.fixture
def store(memory):
    return SmritiStore(memory)


VALUE = {
    "text": "Alice prefers dark mode in every editor",
    "nested": {"list": [1, 2.5, "three", None, True], "ünïcode": "日本語 ✓"},
    "float": 0.1 + 0.2,
    "empty": {},
}


def test_is_a_base_store_with_ttl(store):
    # TTLs used to be refused (supports_ttl False); LangGraph's contract has them (issue 26).
    assert isinstance(store, BaseStore) and store.supports_ttl is True
    store.put(("a",), "k", {"x": 1}, ttl=5)
    assert store.get(("a",), "k").value == {"x": 1}


def test_put_get_round_trips_the_value_exactly(store):
    store.put(("Users", "Alice"), "Pref/1", VALUE)
    item = store.get(("Users", "Alice"), "Pref/1")
    assert isinstance(item, Item)
    assert item.value == VALUE and item.key == "Pref/1" and item.namespace == ("Users", "Alice")
    assert item.created_at == item.updated_at and item.created_at.tzinfo is not None


def test_get_is_exact_on_namespace_case_and_key(store):
    store.put(("users", "alice"), "k", {"v": 1})
    assert store.get(("Users", "alice"), "k") is None
    assert store.get(("users",), "k") is None
    assert store.get(("users", "alice"), "K") is None
    assert store.get(("users", "alice", "k"), "k") is None


def test_equal_values_under_two_keys_stay_two_items(store, memory):
    store.put(("ns",), "a", {"text": "the same words"})
    store.put(("ns",), "b", {"text": "the same words"})
    store.delete(("ns",), "a")
    assert store.get(("ns",), "a") is None
    assert store.get(("ns",), "b").value == {"text": "the same words"}
    assert memory.stats()["engrams"] == 1


def test_put_replaces_keeps_created_at_and_leaves_one_engram(store, memory, clock):
    store.put(("ns",), "k", {"v": "first version of the note"})
    created = store.get(("ns",), "k").created_at
    clock.advance(hours=1)
    store.put(("ns",), "k", {"v": "second version, completely different"})
    item = store.get(("ns",), "k")
    assert item.value == {"v": "second version, completely different"}
    assert item.created_at == created and item.updated_at == created + timedelta(hours=1)
    assert memory.stats()["engrams"] == 1


def test_delete_removes_item_engram_and_empty_namespace(store, memory):
    store.put(("ns", "x"), "k", {"v": 1})
    store.delete(("ns", "x"), "k")
    store.delete(("ns", "x"), "k")  # deleting twice is fine
    assert store.get(("ns", "x"), "k") is None
    assert memory.stats()["engrams"] == 0
    assert store.list_namespaces() == []


def test_engram_carries_exact_source_and_namespace_tags(store, memory):
    store.put(("Users", "a,b"), "key", {"v": 1})
    (engram,) = memory.context.store.list_recent(5)
    assert engram.source == source_of(("Users", "a,b"), "key")
    assert parse_source(engram.source) == (("Users", "a,b"), "key")
    assert engram.tag_list() == ["langgraph-store", "ns:users/a b"]
    assert engram.importance == memory.context.settings.important_threshold
    assert parse_source("meeting-notes") is None and parse_source(SOURCE_PREFIX + "not json") is None


def test_forgotten_engram_reads_as_missing(store, memory):
    store.put(("ns",), "k", {"v": 1})
    memory.forget(memory.context.store.list_recent(1)[0].id)
    assert store.get(("ns",), "k") is None
    assert store.search(("ns",)) == []


def _corpus(store):
    store.put(("docs", "db"), "pg", {"text": "PostgreSQL stores the billing invoices", "stars": 5})
    store.put(("docs", "db"), "kuzu", {"text": "Kuzu is an embedded graph database", "stars": 4})
    store.put(("docs", "db"), "duck", {"text": "DuckDB reads Parquet files for analytics", "stars": 3})
    store.put(("docs", "food"), "curry", {"text": "Chickpea curry with coconut milk and spinach", "stars": 5})
    store.put(("other",), "pg2", {"text": "PostgreSQL billing invoices in another namespace", "stars": 1})


def test_search_with_query_ranks_every_item_of_the_prefix_by_similarity(store):
    # Similarity search (LangGraph's contract): every item under the prefix comes back, ranked;
    # before issue 26 only the items associative recall reached did (now ranking="recall").
    _corpus(store)
    found = store.search(("docs",), query="PostgreSQL billing invoices", limit=10)
    assert all(isinstance(i, SearchItem) for i in found)
    assert found[0].key == "pg"
    assert {i.key for i in found} == {"pg", "kuzu", "duck", "curry"}
    scores = [i.score for i in found]
    assert scores == sorted(scores, reverse=True) and all(-1 <= s <= 1 for s in scores)
    food = store.search(("docs", "food"), query="coconut curry and PostgreSQL billing", limit=10)
    assert [(i.namespace, i.key) for i in food] == [(("docs", "food"), "curry")]


def test_recall_ranking_scores_match_smriti_recall_of_the_same_query(store, memory):
    _corpus(store)
    recall_store = SmritiStore(memory, reinforce=False, ranking="recall")
    found = recall_store.search((), query="graph database Kuzu", limit=3)
    recalled = memory.recall("graph database Kuzu", limit=3)["results"]
    assert [i.score for i in found] == pytest.approx([r["score"] for r in recalled], abs=1e-6)
    assert [i.key for i in found] == [parse_source(r["source"])[1] for r in recalled]


def test_search_filter_limit_and_offset(store):
    _corpus(store)
    found = store.search(("docs",), query="database", filter={"stars": {"$gte": 4}}, limit=10)
    assert found and all(i.value["stars"] >= 4 for i in found)
    everything = store.search(("docs",), query="billing database graph analytics curry", limit=10)
    page = store.search(("docs",), query="billing database graph analytics curry", limit=2, offset=1)
    assert [i.key for i in page] == [i.key for i in everything[1:3]]


def test_search_without_query_lists_most_recently_updated_first(store, clock):
    _corpus(store)
    clock.advance(minutes=5)
    store.put(("docs", "db"), "duck", {"text": "DuckDB reads Parquet files", "stars": 2})
    found = store.search(("docs",))
    assert found[0].key == "duck" and len(found) == 4
    assert {i.key for i in found} == {"pg", "kuzu", "duck", "curry"}
    assert all(i.score is None for i in found)
    assert [i.key for i in store.search(("docs",), filter={"stars": 5})] in (["curry", "pg"], ["pg", "curry"])
    assert len(store.search(("docs",), limit=2, offset=3)) == 1


def test_search_reinforces_only_what_it_returns(store, memory):
    _corpus(store)
    found = store.search(("docs", "db"), query="PostgreSQL billing invoices", limit=1)
    counts = {e.source: e.access_count for e in memory.context.store.list_recent(10)}
    assert counts[source_of(("docs", "db"), found[0].key)] == 1
    assert sum(counts.values()) == 1  # "other"/"pg2" matched too but was filtered out
    SmritiStore(memory, reinforce=False).search(("docs",), query="PostgreSQL billing")
    assert sum(e.access_count for e in memory.context.store.list_recent(10)) == 1


def test_filter_semantics():
    value = {"a": 1, "b": "x", "n": {"c": [1, 2]}, "f": 2.5}
    assert matches_filter(value, {"a": 1, "b": "x"})
    assert matches_filter(value, {"n": {"c": [1, 2]}}) and not matches_filter(value, {"n": {"c": [1]}})
    assert matches_filter(value, {"f": {"$gt": 2, "$lt": 3}}) and not matches_filter(
        value, {"f": {"$lte": 2}}
    )
    assert matches_filter(value, {"b": {"$ne": "y"}}) and not matches_filter(value, {"missing": {"$gt": 0}})
    with pytest.raises(ValueError, match="unsupported filter operator"):
        matches_filter(value, {"a": {"$in": [1]}})


def test_list_namespaces_prefix_suffix_depth_and_paging(store):
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]:
        store.put(namespace, "k", {"v": list(namespace)})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("b", "c")) == [("a", "b", "c"), ("z", "b", "c")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("z", "b", "c")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "x"), ("z", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]


def test_async_api_matches_sync(store):
    async def scenario():
        await store.aput(("async",), "k", {"v": "asynchronous put of a value"})
        item = await store.aget(("async",), "k")
        found = await store.asearch(("async",), query="asynchronous put")
        namespaces = await store.alist_namespaces()
        await store.adelete(("async",), "k")
        return item, found, namespaces, await store.aget(("async",), "k")

    item, found, namespaces, gone = asyncio.run(scenario())
    assert item.value == {"v": "asynchronous put of a value"}
    assert [i.key for i in found] == ["k"] and namespaces == [("async",)] and gone is None


def test_store_persists_across_reopen(settings):
    from smriti.providers.hashing import HashingEmbeddings

    with Memory.open(settings, embedder=HashingEmbeddings(64)) as memory:
        SmritiStore(memory).put(("persist",), "k", VALUE)
    with Memory.open(settings, embedder=HashingEmbeddings(64)) as memory:
        assert SmritiStore(memory).get(("persist",), "k").value == VALUE


def test_graph_nodes_use_it_as_their_store(store):
    from langgraph.graph import START, StateGraph
    from langgraph.runtime import Runtime
    from typing_extensions import TypedDict

    class State(TypedDict):
        fact: str
        found: list[str]

    def write(state: State, runtime: Runtime) -> dict:
        runtime.store.put(("facts",), "1", {"text": state["fact"]})
        return {}

    def read(state: State, runtime: Runtime) -> dict:
        return {"found": [i.value["text"] for i in runtime.store.search(("facts",), query="Porto train")]}

    builder = StateGraph(State)
    builder.add_node("write", write)
    builder.add_node("read", read)
    builder.add_edge(START, "write")
    builder.add_edge("write", "read")
    graph = builder.compile(store=store)
    out = graph.invoke({"fact": "Alice takes the train from Lisbon to Porto.", "found": []})
    assert out["found"] == ["Alice takes the train from Lisbon to Porto."]
