"""Production's coarse graphs (pipelines/stages.py) against the same pipelines step by step: same
outputs, same traces, same steps in the same order; and every production call runs a compiled
LangGraph graph, the one executor."""

from __future__ import annotations

import importlib.util
import json
import operator
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph.state import CompiledStateGraph

from smriti.memory import Memory
from smriti.pipelines import stages
from smriti.pipelines.consolidate import STEPS, build_consolidate_stages
from smriti.pipelines.pipeline import END, START, Pipeline
from smriti.pipelines.recall import STAGES, build_recall_pipeline, build_recall_stages
from smriti.pipelines.store import build_store_stages, store_graph

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
def test_recall_in_stages_is_recall_step_by_step(filled, mode):
    coarse = build_recall_stages(reinforce=False)  # reinforcing would change the second run's scores
    assert coarse.fine is not None
    fine = coarse.fine.compile()
    for query in QUERIES:
        for extra in ({}, {"memory_type": "episodic"}, {"include_superseded": True, "limit": 2}):
            payload = {"query": query, "mode": mode, "explain": True, **extra}
            expected = fine.invoke(payload, context=filled)
            got = coarse.graph.invoke(payload, context=filled)
            assert _without_timings(got) == _without_timings(expected)
            assert got["result"]["results"] or mode == "search"


def test_recall_runs_the_parallel_branches_once_and_joins_them(filled):
    graph = build_recall_stages().graph
    out = graph.invoke({"query": "billing Postgres", "explain": True}, context=filled)
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
    assert len(nodes) == len(build_recall_pipeline().nodes) - 2  # every step but list_recent, vector_only
    # the branches are nodes of their own, run in one superstep
    updates = [
        name
        for chunk in graph.stream({"query": "billing"}, context=filled, stream_mode="updates")
        for name in chunk
    ]
    assert updates[:2] == ["validate", "parse"] and updates[5:] == [
        "gather",
        "expand",
        "current_only",
        "refine",
        "rank",
    ]
    assert sorted(updates[2:5]) == ["cue_traverse", "fulltext_search", "vector_search"]


def test_store_in_stages_is_store_step_by_step(make_context):
    ours, theirs = make_context(user="ours"), make_context(user="theirs")
    coarse = build_store_stages()
    assert coarse.fine is not None
    fine = coarse.fine.compile()
    same_id: dict[str, str] = {}  # their memory's id -> ours (ids are random)
    for text in [*TEXTS, TEXTS[0]]:  # the last one is a near-duplicate: the run ends after dedupe
        payload = {"content": text, "tags": "t", "source": "notes"}
        got, expected = coarse.graph.invoke(payload, context=ours), fine.invoke(payload, context=theirs)
        same_id.setdefault(expected["id"], got["id"])
        translated = json.dumps(_without_timings(expected))
        for their_id, our_id in same_id.items():
            translated = translated.replace(their_id, our_id)
        assert _ties_by_id(_without_timings(got)) == _ties_by_id(json.loads(translated))
    assert got["deduplicated"] is True
    assert [entry["node"] for entry in got["trace"]] == [
        "validate_store",
        "analyze",
        "embed",
        "find_duplicate",
    ]


def test_consolidate_in_stages_is_consolidate_step_by_step(make_context):
    """Two stores filled alike, one consolidated in stages and one step by step: the same report
    and the same steps (ids differ, so only counts and names are compared)."""
    ours, theirs = make_context(user="ours"), make_context(user="theirs")
    for context in (ours, theirs):
        for text in TEXTS * 2:  # near-duplicates reinforce, so strengthen has work
            store_graph.invoke({"content": text, "source": "notes"}, context=context)
    coarse = build_consolidate_stages()
    assert coarse.fine is not None
    steps: list[str] = []
    got = stages.run(coarse.graph, {}, ours, on_step=steps.append)
    expected = coarse.fine.compile().invoke({}, context=theirs)
    assert got is not None and expected is not None
    untimed = [
        {**_without_timings(output), "report": _without_ms(output["report"])} for output in (got, expected)
    ]
    assert untimed[0] == untimed[1]
    assert steps == [entry["node"] for entry in got["trace"]] == STEPS


def test_every_production_call_runs_a_compiled_state_graph(make_context, monkeypatch):
    """Store, recall and consolidate through ``Memory`` (the server, the CLI, the library) and the
    LangGraph store adapter's writes and recall-ranked searches: each a compiled StateGraph."""
    from smriti.integrations.langgraph_store import SmritiStore

    memory = Memory(make_context())
    ran: list[str] = []
    for method in ("stream",):  # invoke streams too
        original = getattr(CompiledStateGraph, method)

        def recorded(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> Any:
            ran.append(self.name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(CompiledStateGraph, method, recorded)
    stored = memory.store(TEXTS[0])
    result = memory.recall("invoices Postgres", explain=True)
    progress: list[str] = []
    report = memory.consolidate(on_step=progress.append)
    assert ran == ["smriti_store", "smriti_recall", "smriti_consolidate"]
    assert result["results"][0]["id"] == stored["id"]
    assert stored["trace"][0]["node"] == "validate_store" and result["trace"][-1]["node"] == "format_result"
    assert progress == STEPS and [entry["node"] for entry in report["trace"]] == STEPS
    assert set(memory.executor()) == {"store", "recall", "consolidate"}
    assert set(memory.executor().values()) == {"langgraph.graph.state.CompiledStateGraph"}
    ran.clear()
    store = SmritiStore(memory, ranking="recall")
    store.put(("notes",), "db", {"text": "Alice moved the invoices service to Postgres."})
    found = store.search(("notes",), query="invoices Postgres")
    assert [item.key for item in found] == ["db"]
    assert ran == ["smriti_store", "smriti_recall"]


def test_there_is_no_other_executor():
    for gone in ("smriti.pipelines.runner", "smriti.pipelines.gate"):
        assert importlib.util.find_spec(gone) is None


def test_a_production_graph_is_compiled_once_per_process():
    from smriti.pipelines import recall

    assert recall.recall_graph is recall.recall_graph is recall.recall_pipeline.graph
    assert isinstance(recall.recall_graph, CompiledStateGraph)
    assert recall.recall_graph.checkpointer is None


def test_on_step_names_each_step_as_it_finishes(filled):
    steps: list[str] = []
    out = stages.run(
        build_recall_stages(reinforce=False).graph, {"query": "Alice", "explain": True}, filled, steps.append
    )
    traced = [entry["node"] for entry in out["trace"]]
    # The parallel branches are told as each finishes; the trace has them in node-name order.
    assert steps[:3] + steps[6:] == traced[:3] + traced[6:] and sorted(steps[3:6]) == traced[3:6]


def test_a_stage_steps_through_as_a_graph_of_its_own(filled):
    """A notebook steps through one stage's steps (``stage_pipeline``), from the state the stage
    gets: the same writes as the stage node."""
    coarse = build_recall_stages(reinforce=False)
    chain = coarse.stage_pipeline("parse")
    updates = [
        list(chunk)
        for chunk in chain.compile().stream(
            {"query": "billing Postgres"}, context=filled, stream_mode="updates"
        )
    ]
    assert updates == [["extract_query_cues"], ["recognise"]]
    with pytest.raises(KeyError, match="no stage"):
        coarse.stage_pipeline("nope")


# ----------------------------------------------------------------------------- coarsening a toy
class Toy(TypedDict, total=False):
    mode: str
    value: int
    seen: Annotated[list[str], operator.add]


def _writer(name: str):
    """Appends its name to ``seen``; the routed nodes and ``tail`` also write ``value``, ``tail``
    from what the earlier ones wrote (a stage's later step must see its earlier steps' writes)."""

    def node(state: Toy, runtime: Any) -> dict[str, Any]:
        update: dict[str, Any] = {"seen": [name]}
        if name in ("left", "right"):
            update["value"] = len(name)
        if name == "tail":
            update["value"] = state["value"] * 100 + len(state["seen"])
        return update

    node.__name__ = name
    return node


def _toy() -> Pipeline:
    builder = Pipeline("toy", Toy)
    for name in ("start", "a", "b", "c", "join", "left", "right", "tail"):
        builder.add_node(name, _writer(name))
    builder.add_edge(START, "start")
    for branch in ("c", "b", "a"):
        builder.add_edge("start", branch)
    builder.add_edge(["c", "b", "a"], "join")
    builder.add_conditional_edges(
        "join", lambda s: "left" if s["mode"] == "l" else "right", ["left", "right"]
    )
    builder.add_edge("left", "tail")
    builder.add_edge("right", "tail")
    builder.add_edge("tail", END)
    return builder


TOY_STAGES = {
    "first": ["start"],
    "a": ["a"],
    "b": ["b"],
    "c": ["c"],
    "join": ["join"],
    "left_tail": ["left", "tail"],
    "right_tail": ["right", "tail"],
}


@pytest.mark.parametrize("mode", ["l", "r"])
def test_a_coarse_toy_graph_is_the_fine_one(mode):
    toy = _toy()
    coarse = stages.coarsen(toy, "toy_coarse", TOY_STAGES)
    expected = toy.compile().invoke({"mode": mode})
    assert coarse.compile().invoke({"mode": mode}) == expected
    assert expected["seen"][-1] == "tail" and expected["value"] == (4 if mode == "l" else 5) * 100 + 6


@pytest.mark.parametrize(
    ("grouping", "why"),
    [
        ({**TOY_STAGES, "left_tail": ["left"]}, "starts none"),  # tail reached, in no stage's start
        ({**TOY_STAGES, "first": ["start", "a"]}, "leads elsewhere"),  # start fans out
        ({k: v for k, v in TOY_STAGES.items() if k != "b"}, "in no stage"),
        ({**TOY_STAGES, "again": ["a"]}, "both start"),
        ({**TOY_STAGES, "a": ["a", "join"]}, "leads elsewhere"),  # a join is not a chain
    ],
)
def test_a_grouping_that_would_change_what_runs_is_refused(grouping, why):
    with pytest.raises(ValueError, match=why):
        stages.coarsen(_toy(), "toy_coarse", grouping)


def test_a_stage_folds_its_steps_writes_as_langgraph_folds_them():
    """A plain key keeps the last step's value; a reducer key gets every step's writes; a key the
    state has not is dropped; a step sees the earlier steps' writes."""
    seen: list[dict[str, Any]] = []

    def first(state: Toy, runtime: Any) -> dict[str, Any]:
        return {"value": 1, "seen": ["first"], "stray": True}

    def second(state: Toy, runtime: Any) -> dict[str, Any]:
        seen.append(dict(state))
        return {"value": state["value"] + 1, "seen": ["second"]}

    one = Pipeline("one", Toy)
    one.add_node("both", stages.stage_node("both", [first, second], Toy))
    one.add_edge(START, "both")
    one.add_edge("both", END)
    updates = list(one.compile().stream({"seen": ["before"]}, stream_mode="updates"))
    assert updates == [{"both": {"value": 2, "seen": ["first", "second"]}}]
    assert seen == [{"seen": ["before", "first"], "value": 1}]


def test_the_recall_stages_cover_every_step_once_except_the_shared_format():
    steps = [step for names in STAGES.values() for step in names]
    assert sorted(set(steps)) == sorted(build_recall_pipeline().nodes)
    assert [step for step in set(steps) if steps.count(step) > 1] == ["format_result"]
