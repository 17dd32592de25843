"""SmritiStore against LangGraph's store contract (issue 26): index, similarity search, filters,
TTL, the async rules and namespaces. Real SQLite stores on tmp_path; only embeddings are fake."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp, SearchOp

from smriti.integrations.langgraph_store import SmritiStore
from smriti.memory import Memory
from tests.clock import Clock

WORDS = ["alpha", "beta", "gamma", "delta", "red", "green", "blue", "apple", "car"]


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def memory(make_context, clock):
    return Memory(make_context(clock=clock))


@pytest.fixture
def words(keyword_embedder):
    return keyword_embedder(WORDS, dims=16)


def make(memory, embed, fields=None, **options):
    return SmritiStore(memory, index={"dims": 16, "embed": embed, "fields": fields}, **options)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# ----------------------------------------------------------------------------- index
def test_index_config_is_exposed_and_only_configured_fields_are_embedded(memory, words):
    store = make(memory, words, fields=["text"])
    assert store.index_config["dims"] == 16 and store.index_config["fields"] == ["text"]
    assert store.index_config["embed"] is words and store.embeddings is words
    store.put(("docs",), "a", {"text": "alpha", "note": "beta"})
    (hit,) = store.search(("docs",), query="alpha")
    assert hit.score == pytest.approx(1.0, abs=1e-6)
    (miss,) = store.search(("docs",), query="beta")  # "note" is not indexed
    assert miss.score == pytest.approx(0.0, abs=1e-6)


def test_without_index_whole_values_are_embedded_with_the_memory_embedder(memory):
    store = SmritiStore(memory)
    assert store.index_config["fields"] is None and store.embeddings is memory.context.embedder
    assert store.index_config["dims"] == memory.context.settings.embedding_dims
    store.put(("d",), "k", {"text": "Lisbon to Porto by train"})
    store.put(("d",), "other", {"text": "chickpea curry recipe"})
    assert store.search(("d",), query='{"text": "Lisbon to Porto by train"}')[0].key == "k"


def test_nested_and_list_paths_embed_one_vector_per_text_best_one_scores(memory, words):
    store = make(memory, words, fields=["meta.title", "parts[*].body"])
    store.put(("d",), "k", {"meta": {"title": "alpha"}, "parts": [{"body": "gamma"}, {"body": "delta"}]})
    store.put(("d",), "plain", {"title": "gamma"})  # none of the fields: no vector
    for query in ("alpha", "gamma", "delta"):
        found = store.search(("d",), query=query)
        assert [i.key for i in found] == ["k", "plain"] and found[0].score == pytest.approx(1.0, abs=1e-6)
        assert found[1].score is None  # no vector: ranked last
    assert {i.key for i in store.search(("d",))} == {"k", "plain"}


def test_put_index_paths_override_the_configured_fields(memory, words):
    store = make(memory, words, fields=["text"])
    store.put(("d",), "k", {"text": "alpha", "tag": "blue"}, index=["tag"])
    assert store.search(("d",), query="blue")[0].score == pytest.approx(1.0, abs=1e-6)
    assert store.search(("d",), query="alpha")[0].score == pytest.approx(0.0, abs=1e-6)


def test_index_false_items_are_ranked_last_with_no_score_as_in_memory_store_does(memory, words, clock):
    """An item put with ``index=False`` is not left out of a query search: it comes after every
    scored item with ``score=None``, as LangGraph's InMemoryStore returns it."""
    from langgraph.store.memory import InMemoryStore

    reference = InMemoryStore(index={"dims": 16, "embed": words.embed_documents})
    store = make(memory, words)
    for one in (store, reference):
        one.put(("d",), "indexed", {"text": "red apple"})
        one.put(("d",), "hidden", {"text": "red apple"}, index=False)
        one.put(("d",), "other", {"text": "green car"})
    for one in (store, reference):
        found = one.search(("d",), query="red apple", limit=10)
        assert [i.key for i in found][-1] == "hidden" and found[-1].score is None, found
        assert found[0].key == "indexed" and found[0].score == pytest.approx(1.0, abs=1e-6)
        assert all(i.score is not None for i in found[:-1])
    assert {i.key for i in store.search(("d",))} == {"indexed", "hidden", "other"}
    assert [i.key for i in store.search(("d",), query="apple", filter={"text": "red apple"})] == [
        "indexed",
        "hidden",
    ]
    # replacing an indexed item with index=False removes its vector
    store.put(("d",), "indexed", {"text": "red apple"}, index=False)
    found = store.search(("d",), query="red apple")
    assert found[0].key == "other" and {(i.key, i.score) for i in found[1:]} == {
        ("indexed", None),
        ("hidden", None),
    }


def test_embed_may_be_a_function_or_a_provider_string(memory, words):
    store = make(memory, words.embed_documents)
    store.put(("d",), "k", {"text": "green car"})
    assert store.search(("d",), query="green car")[0].score == pytest.approx(1.0, abs=1e-6)
    hashed = SmritiStore(memory, index={"dims": 32, "embed": "hashing:any"})
    assert len(hashed.embeddings.embed_query("x")) == 32
    hashed.put(("h",), "k", {"text": "Porto"})
    assert hashed.search(("h",), query='{"text": "Porto"}')[0].score == pytest.approx(1.0, abs=1e-5)


def test_wrong_dims_and_unknown_providers_are_refused(memory, words):
    store = SmritiStore(memory, index={"dims": 8, "embed": words})
    with pytest.raises(ValueError, match="dims=8"):
        store.put(("d",), "k", {"text": "alpha"})
    assert store.get(("d",), "k") is None  # nothing half-written
    with pytest.raises(ValueError):
        SmritiStore(memory, index={"dims": 8, "embed": "no-such-provider:model"})


def test_reopening_with_another_model_re_embeds_the_items(memory, keyword_embedder):
    first = make(memory, keyword_embedder(["alpha", "beta"], dims=16))
    first.put(("d",), "k", {"text": "beta"})
    second = make(memory, keyword_embedder(["beta", "alpha"], dims=16), fields=["text"])
    # With the first model's vectors the query would score 0 (other axes).
    assert second.search(("d",), query="beta")[0].score == pytest.approx(1.0, abs=1e-6)


# ----------------------------------------------------------------------------- search
def test_query_search_ranks_every_matching_item_with_cosine_scores(memory, words):
    store = make(memory, words)
    docs = {"a": "red apple", "b": "red car", "c": "green apple", "d": "blue car", "e": "delta"}
    for key, text in docs.items():
        store.put(("t",), key, {"text": text})
    store.put(("elsewhere",), "x", {"text": "red apple"})
    found = store.search(("t",), query="red apple", limit=10)
    assert found[0].key == "a" and {i.key for i in found} == set(docs)  # "e" scores 0
    query = words.embed_query("red apple")
    for item in found:
        expected = cosine(query, words.embed_documents([f'{{"text": "{docs[item.key]}"}}'])[0])
        assert item.score == pytest.approx(expected, abs=1e-5)
    assert [i.score for i in found] == sorted((i.score for i in found), reverse=True)
    page = store.search(("t",), query="red apple", limit=2, offset=2)
    assert [i.key for i in page] == [i.key for i in found[2:4]]
    assert all(i.score is None for i in store.search(("t",)))


def test_query_search_with_filters(memory, words):
    store = make(memory, words, fields=["text"])
    for key, text, color, score in [
        ("doc1", "red apple", "red", 4.5),
        ("doc2", "red car", "red", 3.0),
        ("doc3", "green apple", "green", 4.0),
        ("doc4", "blue car", "blue", 3.5),
    ]:
        store.put(("t",), key, {"text": text, "color": color, "score": score})
    assert [i.key for i in store.search(("t",), query="apple", filter={"color": "red"})] == ["doc1", "doc2"]
    found = store.search(("t",), query="blue", filter={"score": {"$gt": 3.2}})
    assert found[0].key == "doc4" and {i.key for i in found} == {"doc1", "doc3", "doc4"}
    both = store.search(("t",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"})
    assert [i.key for i in both] == ["doc3"]


def test_query_search_reinforces_only_the_page(memory, words):
    store = make(memory, words)
    for key in ("a", "b", "c"):
        store.put(("t",), key, {"text": "alpha"})
    store.search(("t",), query="alpha", limit=1)
    assert sum(e.access_count for e in memory.context.store.list_recent(10)) == 1
    store.search(("t",))  # listing does not reinforce
    make(memory, words, reinforce=False).search(("t",), query="alpha")
    assert sum(e.access_count for e in memory.context.store.list_recent(10)) == 1


def test_recall_ranking_returns_recall_scores(memory):
    store = SmritiStore(memory, ranking="recall", reinforce=False)
    store.put(("d",), "pg", {"text": "PostgreSQL stores the billing invoices"})
    store.put(("d",), "curry", {"text": "Chickpea curry with coconut milk"})
    found = store.search(("d",), query="PostgreSQL billing invoices")
    assert found[0].key == "pg"
    recalled = memory.recall("PostgreSQL billing invoices", limit=5)["results"]
    assert found[0].score == pytest.approx(recalled[0]["score"], abs=1e-6)
    with pytest.raises(ValueError, match="ranking"):
        SmritiStore(memory, ranking="bm25")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- filters
def test_dotted_keys_and_operators(memory):
    store = SmritiStore(memory)
    store.put(("u",), "1", {"user": {"access-level": "admin", "age": 40}, "n": "7"})
    store.put(("u",), "2", {"user": {"access-level": "guest", "age": 17}, "n": "12"})
    store.put(("u",), "3", {"name": "no user"})

    def keys(filter):
        return sorted(i.key for i in store.search(("u",), filter=filter))

    assert keys({"user.access-level": "admin"}) == ["1"]
    assert keys({"user.age": {"$gte": 18}}) == ["1"]
    assert keys({"user.age": {"$lt": 18}}) == ["2"]
    assert keys({"user.age": {"$gt": 10, "$lte": 40}}) == ["1", "2"]
    assert keys({"user.access-level": {"$ne": "admin"}}) == ["2", "3"]
    assert keys({"user.access-level": {"$eq": "guest"}}) == ["2"]
    assert keys({"n": {"$gt": 8}}) == ["2"]  # numeric strings compare as numbers
    assert keys({"user": {"access-level": "admin", "age": 40}}) == ["1"]
    with pytest.raises(ValueError, match="unsupported filter operator"):
        store.search(("u",), filter={"n": {"$in": ["7"]}})


# ----------------------------------------------------------------------------- TTL
def test_expired_items_are_invisible_and_swept(memory, clock):
    store = SmritiStore(memory)
    assert store.supports_ttl
    store.put(("t",), "short", {"v": 1}, ttl=1)
    store.put(("t",), "forever", {"v": 2})
    store.put(("gone",), "k", {"v": 3}, ttl=1)
    clock.advance(seconds=59)
    assert store.get(("t",), "short", refresh_ttl=False) is not None
    clock.advance(seconds=2)
    assert store.get(("t",), "short") is None
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert store.list_namespaces() == [("t",)]
    assert memory.stats()["engrams"] == 3  # invisible before the sweep, deleted by it
    assert store.sweep_ttl() == 2 and store.sweep_ttl() == 0
    assert memory.stats()["engrams"] == 1


def test_default_ttl_refresh_on_read_and_overrides(memory, clock):
    store = SmritiStore(memory, ttl={"default_ttl": 10, "refresh_on_read": True})
    store.put(("t",), "default", {"v": 1})
    store.put(("t",), "none", {"v": 2}, ttl=None)
    store.put(("t",), "unread", {"v": 3})
    clock.advance(minutes=8)
    assert store.get(("t",), "default") is not None  # refreshed: expires 10 minutes from now
    clock.advance(minutes=8)
    assert store.get(("t",), "default", refresh_ttl=False) is not None
    assert store.get(("t",), "unread") is None
    clock.advance(minutes=3)
    assert store.get(("t",), "default") is None  # the last read did not refresh
    assert store.get(("t",), "none") is not None


def test_search_refreshes_only_what_it_returns_and_config_can_turn_refresh_off(memory, clock):
    store = SmritiStore(memory, ttl={"default_ttl": 10})
    store.put(("t",), "a", {"n": 1})
    store.put(("t",), "b", {"n": 2})
    clock.advance(minutes=8)
    assert [i.key for i in store.search(("t",), filter={"n": 1})] == ["a"]
    clock.advance(minutes=8)
    assert [i.key for i in store.search(("t",))] == ["a"]
    quiet = SmritiStore(memory, ttl={"default_ttl": 10, "refresh_on_read": False})
    quiet.put(("q",), "k", {"n": 3})
    clock.advance(minutes=8)
    assert quiet.get(("q",), "k") is not None
    clock.advance(minutes=3)
    assert quiet.get(("q",), "k") is None


def test_omit_expired_false_shows_expired_items_until_the_sweep(memory, clock):
    store = SmritiStore(memory, ttl={"omit_expired": False})
    store.put(("t",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=2)
    assert store.get(("t",), "k", refresh_ttl=False) is not None
    assert store.sweep_ttl() == 1 and store.get(("t",), "k") is None


def test_the_sweeper_thread_deletes_expired_items(memory, clock):
    store = SmritiStore(memory, ttl={"sweep_interval_minutes": 0.002})  # every 0.12 s
    with pytest.raises(ValueError, match="sweep interval"):
        SmritiStore(memory).start_ttl_sweeper()
    future = store.start_ttl_sweeper()
    assert store.start_ttl_sweeper() is future  # one sweeper per store
    try:
        store.put(("t",), "k", {"v": 1}, ttl=1)
        clock.advance(minutes=2)
        deadline = time.monotonic() + 10
        while memory.stats()["engrams"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert memory.stats()["engrams"] == 0
    finally:
        assert store.stop_ttl_sweeper(timeout=5)
    assert future.done()


# ----------------------------------------------------------------------------- async
def test_sync_methods_work_on_the_event_loop_thread_as_in_a_jupyter_cell_async_ones_too(memory, words):
    """ipykernel runs a cell on an event loop: ``store.put(...)`` there works, as with
    LangGraph's InMemoryStore and SqliteStore (the work runs in a worker thread)."""
    store = make(memory, words)

    async def scenario():
        store.put(("a",), "k", {"text": "alpha"})
        assert store.get(("a",), "k").value == {"text": "alpha"}
        assert [i.key for i in store.search(("a",), query="alpha")] == ["k"]
        assert store.list_namespaces() == [("a",)]
        assert store.batch([GetOp(("a",), "k")])[0].key == "k"
        assert store.sweep_ttl() == 0
        store.delete(("a",), "k")
        assert store.get(("a",), "k") is None
        await store.aput(("a",), "k", {"text": "alpha"}, ttl=5)
        found = await store.asearch(("a",), query="alpha")
        from_thread = await asyncio.to_thread(store.get, ("a",), "k")  # a worker thread may
        results = await store.abatch([GetOp(("a",), "k"), SearchOp(("a",), None, 10, 0, "alpha")])
        namespaces = await store.alist_namespaces()
        await store.adelete(("a",), "k")
        return (
            found,
            from_thread,
            results,
            namespaces,
            await store.aget(("a",), "k"),
            await store.asweep_ttl(),
        )

    found, from_thread, results, namespaces, gone, swept = asyncio.run(scenario())
    assert found[0].key == "k" and found[0].score == pytest.approx(1.0, abs=1e-6)
    assert from_thread.value == {"text": "alpha"} and results[0].key == "k" and results[1][0].key == "k"
    assert namespaces == [("a",)] and gone is None and swept == 0


def test_async_embedding_functions_are_awaited(memory, words):
    calls = []

    async def aembed(texts):
        calls.append(len(texts))
        return words.embed_documents(texts)

    store = make(memory, aembed)

    async def scenario():
        await store.aput(("a",), "k", {"text": "gamma"})
        return await store.asearch(("a",), query="gamma")

    (found,) = asyncio.run(scenario())
    assert found.score == pytest.approx(1.0, abs=1e-6) and calls == [1, 1]


# ----------------------------------------------------------------------------- namespaces
def test_list_namespaces_prefix_suffix_depth_limit_offset(memory):
    store = SmritiStore(memory)
    for i, namespace in enumerate(
        [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f")]
    ):
        store.put(namespace, f"k{i}", {"i": i})
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("nothing",)) == []


def test_namespaces_are_validated_for_every_entry_point(memory):
    store = SmritiStore(memory)
    for namespace in [(), ("the", "thing.about"), ("some", "")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])
    store.put(("foo", "langgraph"), "k", {"v": 1})
    assert store.search(["foo"])[0].value == {"v": 1}  # a list prefix, as LangGraph allows
