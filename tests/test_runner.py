"""The direct runner (pipelines/runner.py) against LangGraph's own invoke of the same pipeline:
same outputs, same traces; and the serving path does not import LangGraph at all."""

from __future__ import annotations

import json
import operator
import subprocess
import sys
import threading
import time
from typing import Annotated, Any, TypedDict

import langsmith
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.errors import InvalidUpdateError

from smriti.memory import Memory
from smriti.pipelines import runner
from smriti.pipelines.consolidate import STEPS, consolidate_pipeline
from smriti.pipelines.pipeline import END, START, Pipeline
from smriti.pipelines.recall import build_recall_pipeline
from smriti.pipelines.store import build_store_pipeline, store_graph

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


def _without_ms(value: Any) -> Any:
    """``value`` with every ``ms`` key left out, at any depth (consolidation's report times steps)."""
    if isinstance(value, dict):
        return {key: _without_ms(item) for key, item in value.items() if key != "ms"}
    return value


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
    pipeline = build_recall_pipeline(reinforce=False)  # reinforcing would change the second run's scores
    assert pipeline.runs_directly
    graph = pipeline.compile()
    for query in QUERIES:
        for extra in ({}, {"memory_type": "episodic"}, {"include_superseded": True, "limit": 2}):
            payload = {"query": query, "mode": mode, "explain": True, **extra}
            expected = graph.invoke(payload, context=filled)
            got = runner.invoke(pipeline, payload, filled)
            assert _without_timings(got) == _without_timings(expected)
            assert got["result"]["results"] or mode == "search"


def test_recall_runs_the_parallel_branches_once_and_joins_them(filled):
    out = runner.invoke(build_recall_pipeline(), {"query": "billing Postgres", "explain": True}, filled)
    nodes = [entry["node"] for entry in out["trace"]]
    # Pregel applies a step's writes in node-name order: the branches' trace entries too.
    assert nodes[:6] == [
        "validate_recall",
        "extract_query_cues",
        "recognise",
        "cue_traverse",
        "fulltext_search",
        "vector_search",
    ]
    assert nodes.count("gather") == 1 and nodes[-2:] == ["reinforce", "format_result"]


def test_store_is_the_same_as_langgraphs(make_context):
    ours, theirs = make_context(user="ours"), make_context(user="theirs")
    pipeline = build_store_pipeline()
    graph = pipeline.compile()
    same_id: dict[str, str] = {}  # their memory's id -> ours (ids are random)
    for text in [*TEXTS, TEXTS[0]]:  # the last one is a near-duplicate: the run ends after dedupe
        payload = {"content": text, "tags": "t", "source": "notes"}
        got, expected = runner.invoke(pipeline, payload, ours), graph.invoke(payload, context=theirs)
        same_id.setdefault(expected["id"], got["id"])
        translated = json.dumps(_without_timings(expected))
        for their_id, our_id in same_id.items():
            translated = translated.replace(their_id, our_id)
        assert _ties_by_id(_without_timings(got)) == _ties_by_id(json.loads(translated))
    assert got["deduplicated"] is True


def test_consolidate_is_the_same_as_langgraphs(make_context):
    """Two stores filled alike, one consolidated by the runner and one by LangGraph: the same
    report and the same steps (ids differ, so only counts and names are compared)."""
    ours, theirs = make_context(user="ours"), make_context(user="theirs")
    for context in (ours, theirs):
        for text in TEXTS * 2:  # near-duplicates reinforce, so strengthen has work
            runner.invoke(build_store_pipeline(), {"content": text, "source": "notes"}, context)
    pipeline = consolidate_pipeline
    steps: list[str] = []
    got = runner.invoke(pipeline, {}, ours, on_step=steps.append)
    expected = pipeline.compile().invoke({}, context=theirs)
    assert got is not None and expected is not None
    untimed = [
        {**_without_timings(output), "report": _without_ms(output["report"])} for output in (got, expected)
    ]
    assert untimed[0] == untimed[1]
    assert steps == [entry["node"] for entry in got["trace"]] == STEPS


def test_every_production_pipeline_runs_on_the_runner(make_context, monkeypatch):
    """Store, recall and consolidate through ``Memory`` (the server, the CLI, the library) and the
    LangGraph store adapter's writes and recall-ranked searches: one executor, the runner."""
    from smriti.integrations.langgraph_store import SmritiStore

    memory = Memory(make_context())
    calls: list[str] = []
    original = runner._run
    monkeypatch.setattr(
        runner, "_run", lambda pipeline, *a: calls.append(pipeline.name) or original(pipeline, *a)
    )
    graphs: list[str] = []
    monkeypatch.setattr(Pipeline, "compile", lambda self, *a, **k: graphs.append(self.name))
    stored = memory.store(TEXTS[0])
    result = memory.recall("invoices Postgres", explain=True)
    progress: list[str] = []
    report = memory.consolidate(on_step=progress.append)
    assert calls == ["smriti_store", "smriti_recall", "smriti_consolidate"]
    assert result["results"][0]["id"] == stored["id"]
    assert stored["trace"][0]["node"] == "validate_store" and result["trace"][-1]["node"] == "format_result"
    assert progress == STEPS and [entry["node"] for entry in report["trace"]] == STEPS
    calls.clear()
    store = SmritiStore(memory, ranking="recall")
    store.put(("notes",), "db", {"text": "Alice moved the invoices service to Postgres."})
    found = store.search(("notes",), query="invoices Postgres")
    assert [item.key for item in found] == ["db"]
    assert calls == ["smriti_store", "smriti_recall"]
    assert graphs == []  # no LangGraph graph was compiled for any of it


def test_runs_it_does_not_model_go_through_langgraph(filled, monkeypatch):
    pipeline = build_recall_pipeline(reinforce=False)
    # With LangSmith tracing on, LangGraph records the run (nothing is sent: invoke is patched).
    monkeypatch.setattr(
        type(pipeline.graph), "invoke", lambda self, payload, context: {"through": "langgraph"}
    )
    with langsmith.tracing_context(enabled=True):
        assert runner.invoke(pipeline, {"query": "x"}, filled) == {"through": "langgraph"}
    assert "result" in runner.invoke(pipeline, {"query": "x"}, filled)
    # Before anything imported langsmith (a server), its environment variables are read instead.
    monkeypatch.delitem(sys.modules, "langsmith")
    assert "result" in runner.invoke(pipeline, {"query": "x"}, filled)
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    assert runner.invoke(pipeline, {"query": "x"}, filled) == {"through": "langgraph"}


def test_a_node_the_runner_does_not_model_sends_the_pipeline_through_langgraph():
    async def asynchronous(state: Toy, runtime: Any) -> dict[str, Any]:
        return {"seen": ["async"]}

    def with_config(state: Toy, config: RunnableConfig) -> dict[str, Any]:
        return {"seen": ["config"]}

    for node, seen in ((asynchronous, None), (with_config, ["config"])):
        pipeline = Pipeline("odd", Toy)
        pipeline.add_node("odd", node)
        pipeline.add_edge(START, "odd")
        pipeline.add_edge("odd", END)
        assert not pipeline.runs_directly
        if seen is not None:  # LangGraph ran it, passing its own config
            assert runner.invoke(pipeline, {"mode": "l"}, None) == {"mode": "l", "seen": seen}


def test_a_server_answers_and_consolidates_without_importing_langgraph(tmp_path):
    """The point of describing pipelines without LangGraph: its ~0.8 s import (langchain_core's
    runnables and tracers, langsmith) is not on a server's path to its first recall."""
    script = f"""
import sys
from pathlib import Path
from smriti.config import Settings
from smriti.memory import Memory
settings = Settings(storage_location=Path({str(tmp_path)!r}), accessing_user="u",
                    embedding_provider="hashing", embedding_dims=64, llm_provider="heuristic",
                    smriti_shared=False)
memory = Memory.open(settings)
memory.load_pipelines()
stored = memory.store("Alice moved the invoices service to Postgres in March.")
found = memory.recall("Who moved invoices to Postgres?", limit=3)
assert found["results"][0]["id"] == stored["id"], found
assert memory.rehearse() == []  # a real recall came first
assert memory.consolidate()["trace"]
memory.close()
print(sorted(name for name in sys.modules if name.split(".")[0] in ("langgraph", "langsmith")))
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout


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


def _toy(*, fail_b: bool = False, conflict: bool = False, finished: list[str] | None = None) -> Pipeline:
    builder = Pipeline("toy", Toy)
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
    return builder


@pytest.mark.parametrize("mode", ["l", "r"])
def test_toy_graph_steps_joins_and_routes_as_langgraph(mode):
    toy = _toy()
    expected = toy.compile().invoke({"mode": mode})
    assert runner.invoke(toy, {"mode": mode, "ignored": 1}, None) == expected
    assert expected["seen"] == ["start", "a", "b", "c", "join", "left" if mode == "l" else "right"]


def test_toy_graph_conflicting_writes_are_refused_as_langgraph_refuses_them():
    toy = _toy(conflict=True)
    with pytest.raises(InvalidUpdateError):
        toy.compile().invoke({"mode": "l"})
    with pytest.raises(InvalidUpdateError):
        runner.invoke(toy, {"mode": "l"}, None)


def test_a_route_to_a_node_it_did_not_declare_is_refused():
    pipeline = Pipeline("lost", Toy)
    pipeline.add_node("start", _writer("start"))
    pipeline.add_node("left", _writer("left"))
    pipeline.add_edge(START, "start")
    pipeline.add_conditional_edges("start", lambda state: "elsewhere", ["left"])
    with pytest.raises(ValueError, match="routed to 'elsewhere'"):
        runner.invoke(pipeline, {"mode": "l"}, None)


def test_a_failing_parallel_node_is_raised_after_the_others_finished():
    finished: list[str] = []
    toy = _toy(fail_b=True, finished=finished)
    with pytest.raises(RuntimeError, match="b failed"):
        runner.invoke(toy, {"mode": "l"}, None)
    assert finished == ["c"]  # the slow branch was not left running behind the error
    assert threading.active_count() < 50


def test_a_plan_lives_exactly_as_long_as_its_pipeline():
    """Plans were once cached by id(graph): a graph freed left its plan to the next graph made at
    the same address, which then ran the other's nodes."""
    import gc
    import weakref

    gc.collect()  # pipelines of earlier tests, freed but not yet collected, leave the cache first
    toy = _toy(finished=[])
    plan = runner.plan_of(toy)
    assert runner.plan_of(toy) is plan  # cached
    held = len(runner._plans)
    gone = weakref.ref(toy)
    del toy
    gc.collect()
    assert gone() is None  # the cache does not keep a pipeline alive
    assert len(runner._plans) == held - 1  # and keeps no plan a new pipeline could be handed


def test_a_state_key_whose_reducer_takes_other_arguments_is_refused_as_langgraph_refuses_it():
    class Odd(TypedDict, total=False):
        seen: Annotated[list[str], len]  # one argument: not a reducer

    def start(state: Odd, runtime: Any) -> dict[str, Any]:
        return {"seen": ["start"]}

    pipeline = Pipeline("odd", Odd)
    pipeline.add_node("start", start)
    pipeline.add_edge(START, "start")
    assert pipeline.runs_directly  # the reducer is checked as the run starts, as LangGraph compiles
    with pytest.raises(ValueError):
        pipeline.compile()
    with pytest.raises(ValueError, match="reducer takes"):
        runner.invoke(pipeline, {}, None)
