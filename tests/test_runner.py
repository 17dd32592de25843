"""The direct executor (pipelines/runner.py) against LangGraph's own invoke: same outputs, same traces."""

from __future__ import annotations

import json
import operator
import threading
import time
from typing import Annotated, Any, TypedDict

import langsmith
import pytest
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph

from smriti.memory import Memory
from smriti.pipelines import runner
from smriti.pipelines.checkpoint import checkpointer
from smriti.pipelines.recall import build_recall_graph
from smriti.pipelines.store import build_store_graph, store_graph

TEXTS = [
    "Alice from the billing team moved the invoices service to Postgres in March.",
    "Bob prefers cursor pagination for the orders API; offset pagination timed out.",
    "The billing incident on Friday was caused by a stale Redis cache in Berlin.",
    "Carol reviews every Postgres migration before it reaches production.",
    "Alice and Bob met in Berlin to plan the invoices rewrite.",
    "Our team writes design notes in Markdown and keeps them in the docs repository.",
]
QUERIES = [
    "Who moved invoices to Postgres?",
    "billing incident Berlin",
    "pagination",
    "Alice",
    "design notes",
]


def _without_timings(output: dict[str, Any]) -> dict[str, Any]:
    trace = [{k: v for k, v in entry.items() if k != "ms"} for entry in output.get("trace", [])]
    return {**output, "trace": trace}


def _ties_by_id(output: dict[str, Any]) -> dict[str, Any]:
    """Trace candidates ordered by (-score, id): equal scores come in id order, and ids are random."""
    trace = [
        {**entry, "candidates": sorted(entry["candidates"], key=lambda c: (-c["score"], c["id"]))}
        for entry in output["trace"]
    ]
    return {**output, "trace": trace}


@pytest.fixture
def filled(make_context):
    context = make_context()
    for text in TEXTS:
        store_graph.invoke({"content": text, "source": "notes"}, context=context)
    return context


@pytest.mark.parametrize("mode", ["recall", "search", "list"])
def test_recall_is_the_same_as_langgraphs(filled, mode):
    graph = build_recall_graph(reinforce=False)  # reinforcing would change the second run's scores
    assert runner.plan_for(graph) is not None
    for query in QUERIES:
        for extra in ({}, {"memory_type": "episodic"}, {"include_superseded": True, "limit": 2}):
            payload = {"query": query, "mode": mode, "explain": True, **extra}
            expected = graph.invoke(payload, context=filled)
            got = runner.invoke(graph, payload, filled)
            assert _without_timings(got) == _without_timings(expected)
            assert got["result"]["results"] or mode == "search"


def test_recall_runs_the_parallel_branches_once_and_joins_them(filled):
    graph = build_recall_graph()
    out = runner.invoke(graph, {"query": "billing Postgres", "explain": True}, filled)
    nodes = [entry["node"] for entry in out["trace"]]
    # Pregel applies a step's writes in node-name order: the branches' trace entries too.
    assert nodes[:6] == [
        "validate",
        "parse_query",
        "recognise",
        "cue_traverse",
        "fulltext_search",
        "vector_search",
    ]
    assert nodes.count("gather") == 1 and nodes[-2:] == ["reinforce", "format"]


def test_store_is_the_same_as_langgraphs(make_context):
    ours, theirs = make_context(user="ours"), make_context(user="theirs")
    graph = build_store_graph()
    same_id: dict[str, str] = {}  # their memory's id -> ours (ids are random)
    for text in [*TEXTS, TEXTS[0]]:  # the last one is a near-duplicate: the run ends after dedupe
        payload = {"content": text, "tags": "t", "source": "notes"}
        got, expected = runner.invoke(graph, payload, ours), graph.invoke(payload, context=theirs)
        same_id.setdefault(expected["id"], got["id"])
        translated = json.dumps(_without_timings(expected))
        for their_id, our_id in same_id.items():
            translated = translated.replace(their_id, our_id)
        assert _ties_by_id(_without_timings(got)) == _ties_by_id(json.loads(translated))
    assert got["deduplicated"] is True


def test_memory_runs_its_graphs_directly(make_context, monkeypatch):
    memory = Memory(make_context())
    calls: list[str] = []
    original = runner._run
    monkeypatch.setattr(runner, "_run", lambda plan, *a: calls.append("direct") or original(plan, *a))
    stored = memory.store(TEXTS[0])
    result = memory.recall("invoices Postgres", explain=True)
    assert calls == ["direct", "direct"]
    assert result["results"][0]["id"] == stored["id"]
    assert stored["trace"][0]["node"] == "validate" and result["trace"][-1]["node"] == "format"


def test_graphs_it_does_not_model_run_through_langgraph(filled, monkeypatch):
    stepped = build_recall_graph(checkpointer=checkpointer(), interrupt_before=["score"])
    assert runner.plan_for(stepped) is None
    graph = build_recall_graph(reinforce=False)
    assert runner.plan_for(graph) is not None
    # With LangSmith tracing on, LangGraph records the run (nothing is sent: invoke is patched).
    monkeypatch.setattr(type(graph), "invoke", lambda self, payload, context: {"through": "langgraph"})
    with langsmith.tracing_context(enabled=True):
        assert runner.invoke(graph, {"query": "x"}, filled) == {"through": "langgraph"}
    assert "result" in runner.invoke(graph, {"query": "x"}, filled)


# ----------------------------------------------------------------------------- a toy graph
class Toy(TypedDict, total=False):
    mode: str
    value: int
    seen: Annotated[list[str], operator.add]


def _writer(name: str, delay: float = 0.0, fail: bool = False, value: int | None = None):
    def node(state: Toy, runtime: Any) -> dict[str, Any]:
        time.sleep(delay)
        if fail:
            raise RuntimeError(f"{name} failed")
        update: dict[str, Any] = {"seen": [name]}
        if value is not None:
            update["value"] = value
        return update

    node.__name__ = name
    return node


def _toy(*, fail_b: bool = False, conflict: bool = False, finished: list[str] | None = None):
    builder = StateGraph(Toy)
    slow = _writer("c", delay=0.2)

    def c(state: Toy, runtime: Any) -> dict[str, Any]:
        out = slow(state, runtime)
        if finished is not None:
            finished.append("c")
        return out

    builder.add_node("start", _writer("start"))
    builder.add_node("b", _writer("b", fail=fail_b, value=1 if conflict else None))
    builder.add_node("c", c)
    builder.add_node("a", _writer("a", value=2 if conflict else None))
    builder.add_node("join", _writer("join"))
    builder.add_node("left", _writer("left", value=10))
    builder.add_node("right", _writer("right", value=20))
    builder.add_edge(START, "start")
    for branch in ("c", "b", "a"):
        builder.add_edge("start", branch)
    builder.add_edge(["c", "b", "a"], "join")
    builder.add_conditional_edges(
        "join", lambda s: "left" if s["mode"] == "l" else "right", ["left", "right"]
    )
    builder.add_edge("left", END)
    builder.add_edge("right", END)
    return builder.compile()


@pytest.mark.parametrize("mode", ["l", "r"])
def test_toy_graph_steps_joins_and_routes_as_langgraph(mode):
    graph = _toy()
    expected = graph.invoke({"mode": mode})
    assert runner.invoke(graph, {"mode": mode, "ignored": 1}, None) == expected
    assert expected["seen"] == ["start", "a", "b", "c", "join", "left" if mode == "l" else "right"]


def test_toy_graph_conflicting_writes_are_refused_as_langgraph_refuses_them():
    graph = _toy(conflict=True)
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"mode": "l"})
    with pytest.raises(InvalidUpdateError):
        runner.invoke(graph, {"mode": "l"}, None)


def test_a_failing_parallel_node_is_raised_after_the_others_finished():
    finished: list[str] = []
    graph = _toy(fail_b=True, finished=finished)
    with pytest.raises(RuntimeError, match="b failed"):
        runner.invoke(graph, {"mode": "l"}, None)
    assert finished == ["c"]  # the slow branch was not left running behind the error
    assert threading.active_count() < 50


def test_a_plan_lives_exactly_as_long_as_its_graph():
    """Plans were once cached by id(graph): a graph freed left its plan to the next graph made at
    the same address, which then ran the other's nodes."""
    import gc
    import weakref

    graph = _toy(finished=[])
    plan = runner.plan_for(graph)
    assert plan is not None and runner.plan_for(graph) is plan  # cached
    held = len(runner._plans)
    gone = weakref.ref(graph)
    del graph
    gc.collect()
    assert gone() is None  # the cache does not keep a graph alive
    assert len(runner._plans) == held - 1  # and keeps no plan a new graph could be handed
