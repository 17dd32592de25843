"""The compiled graphs as subgraphs of a user's graph.

Contract (nodes/state.py): a parent graph that adds ``store_graph`` or ``recall_graph``
as a node shares channels by name.

* store reads ``content`` (required), ``importance``, ``tags``, ``source``, ``created_at``
  and writes ``id``, ``memory_type``, ``cues``, ``cluster_id``, ``deduplicated``, ``trace``;
* recall reads ``query``, ``limit``, ``mode``, ``memory_type``, ``explain`` and writes
  ``result`` (the unified result format) and ``trace``;
* consolidate reads ``now`` and writes ``report`` and ``trace``.

Internal channels (hits, candidates, embeddings...) never reach the parent. ``trace`` is a
list every node appends to: give it an ``operator.add`` reducer in the parent when more than
one Smriti graph writes it. The parent is compiled with ``context_schema=MemoryContext`` and
run with ``context=``; the context reaches the subgraphs unchanged.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from smriti.pipelines.context import MemoryContext
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph


class Parent(TypedDict, total=False):
    content: str
    tags: str
    query: str
    id: str
    deduplicated: bool
    result: dict[str, Any]
    trace: Annotated[list[dict[str, Any]], operator.add]
    answer: str


def _answer(state: Parent) -> dict[str, Any]:
    texts = [r["text"] for r in state["result"]["results"]]
    return {"answer": texts[0] if texts else "nothing remembered"}


def _parent():
    builder = StateGraph(Parent, context_schema=MemoryContext)
    builder.add_node("store", store_graph)
    builder.add_node("recall", recall_graph)
    builder.add_node("answer", _answer)
    builder.add_edge(START, "store")
    builder.add_edge("store", "recall")
    builder.add_edge("recall", "answer")
    builder.add_edge("answer", END)
    return builder.compile()


def test_store_and_recall_graphs_run_as_nodes_of_a_parent_graph(make_context):
    context = make_context()
    fact = "Alice deploys the billing service on Friday afternoons."
    out = _parent().invoke(
        {"content": fact, "tags": "ops", "query": "When does Alice deploy billing?"}, context=context
    )
    assert out["deduplicated"] is False and context.store.get_engram(out["id"]).content == fact
    assert out["result"]["results"][0]["id"] == out["id"]
    assert out["answer"] == fact
    nodes = [entry["node"] for entry in out["trace"]]
    assert (
        nodes[0] == "validate_store"
        and "write" in nodes
        and "cue_traverse" in nodes
        and nodes[-1] == "format_result"
    )
    assert not {"hits", "candidates", "embedding", "analysis"} & set(out)  # internals stay inside


def test_context_passes_through_to_the_subgraphs(make_context):
    first, second = make_context(user="alice"), make_context(user="bob")
    graph = _parent()
    graph.invoke({"content": "Alice likes green tea.", "query": "tea"}, context=first)
    out = graph.invoke({"content": "Bob collects vinyl records.", "query": "green tea"}, context=second)
    assert "Alice likes green tea." not in [r["text"] for r in out["result"]["results"]]
    assert all(second.store.get_engram(r["id"]) for r in out["result"]["results"])
    assert first.store.count_engrams() == 1 and second.store.count_engrams() == 1


def test_a_wrapper_node_maps_differently_named_channels(make_context):
    class Chat(TypedDict, total=False):
        question: str
        memories: list[str]

    def remember_and_recall(state: Chat, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
        output = recall_graph.invoke({"query": state["question"], "limit": 3}, context=runtime.context)
        return {"memories": [r["text"] for r in output["result"]["results"]]}

    context = make_context()
    store_graph.invoke({"content": "The Lisbon conference is in March."}, context=context)
    builder = StateGraph(Chat, context_schema=MemoryContext)
    builder.add_node("memories", remember_and_recall)
    builder.add_edge(START, "memories")
    out = builder.compile().invoke({"question": "When is the Lisbon conference?"}, context=context)
    assert out["memories"] == ["The Lisbon conference is in March."]


def test_subgraph_steps_stream_through_the_parent(make_context):
    context = make_context()
    seen = []
    for namespace, chunk in _parent().stream(
        {"content": "Kuzu is an embedded graph database.", "query": "graph database"},
        context=context,
        stream_mode="updates",
        subgraphs=True,
    ):
        seen.extend((namespace[0].split(":")[0] if namespace else "", node) for node in chunk)
    # The subgraphs are production's, in stages (a stage runs several steps: pipelines/stages.py).
    assert ("store", "encode") in seen and ("recall", "vector_search") in seen and ("", "answer") in seen


def test_invalid_input_in_a_subgraph_fails_the_parent_run(make_context):
    from smriti.errors import InvalidInput

    with pytest.raises(InvalidInput, match="content must be a non-empty string"):
        _parent().invoke({"content": "  ", "query": "x"}, context=make_context())
