"""The direct runner against LangGraph on small graphs: each graph runs through both, and their
outputs, the order the nodes ran in, and their errors must be the same.

The graphs follow the contracts of LangGraph's own Pregel tests (libs/langgraph/tests/
test_pregel.py: single and many processes in and out, fan-out with a waiting edge, a waiting edge
reached through a branch, conditional entry points, loops under a recursion limit, reducers on
the input, runs that write nothing), restricted to what the runner models. What it does not
model, the gate (``pipelines/gate.py``) sends to LangGraph, or the runner refuses as it runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal, TypedDict

import pydantic
import pytest
from langgraph._internal._config import DEFAULT_RECURSION_LIMIT
from langgraph.errors import GraphRecursionError, InvalidUpdateError
from langgraph.managed import RemainingSteps
from langgraph.types import Command, Overwrite, Send, interrupt

from smriti.pipelines import runner
from smriti.pipelines.pipeline import END, START, Pipeline


def sorted_add(current: list[str], update: list[str]) -> list[str]:
    return sorted(current + update)


def keep_larger(current: int | None, update: int | None) -> int | None:
    return max(x for x in (current, update) if x is not None) if current or update else None


class State(TypedDict, total=False):
    query: str
    count: int
    answer: str
    docs: Annotated[list[str], sorted_add]
    log: Annotated[list[str], operator.add]
    best: Annotated[int | None, keep_larger]  # no empty value: starts unset, as in LangGraph


class Question(TypedDict, total=False):
    query: str
    count: int


class Answer(TypedDict, total=False):
    answer: str
    log: Annotated[list[str], operator.add]


Node = Callable[[State, Any], Any]


def node(name: str, body: Callable[[State], dict[str, Any] | None] = lambda state: None) -> Node:
    """A node that records its name in ``log`` (the order nodes ran in), then ``body``'s writes."""

    def run(state: State, runtime: Any) -> Any:
        return {"log": [name], **(body(state) or {})}

    run.__name__ = name
    return run


def outcome(run: Callable[[], Any]) -> tuple[str, Any]:
    """What a run gave: ("ok", output) or ("error", (type, first line of the message))."""
    try:
        return "ok", run()
    except Exception as error:
        return "error", (type(error), str(error).splitlines()[0] if str(error) else "")


def assert_same(pipeline: Pipeline, payload: Any, recursion_limit: int | None = None) -> Any:
    """Run ``pipeline`` through LangGraph and through the runner; assert the same outcome."""
    assert pipeline.runs_directly, pipeline.refusals
    config = {} if recursion_limit is None else {"recursion_limit": recursion_limit}
    theirs = outcome(lambda: pipeline.compile().invoke(payload, config or None))
    ours = outcome(lambda: runner.invoke(pipeline, payload, None, recursion_limit=recursion_limit))
    assert ours == theirs
    return ours


def chain(names: list[str], state: type = State, **schemas: type) -> Pipeline:
    pipeline = Pipeline("chain", state, **schemas)
    for name in names:
        pipeline.add_node(name, node(name, lambda s, name=name: {"count": s.get("count", 0) + 1}))
    pipeline.add_edge(START, names[0])
    for before, after in itertools.pairwise(names):
        pipeline.add_edge(before, after)
    pipeline.add_edge(names[-1], END)
    return pipeline


# ------------------------------------------------------------------------- steps, joins, routes
@pytest.mark.parametrize("length", [1, 2, 7])
def test_a_chain_in_and_out(length):
    kind, output = assert_same(chain([f"n{i}" for i in range(length)]), {"count": 10})
    assert kind == "ok" and output["count"] == 10 + length


def test_a_fan_out_with_a_waiting_edge():
    pipeline = Pipeline("fan", State)
    pipeline.add_node("rewrite", node("rewrite", lambda s: {"query": f"query: {s['query']}"}))
    pipeline.add_node("analyze", node("analyze", lambda s: {"query": f"analyzed: {s['query']}"}))
    pipeline.add_node("retrieve_one", node("retrieve_one", lambda s: {"docs": ["doc2", "doc1"]}))

    def slow(state: State) -> dict[str, Any]:
        time.sleep(0.05)
        return {"docs": ["doc4", "doc3"]}

    pipeline.add_node("retrieve_two", node("retrieve_two", slow))
    pipeline.add_node("qa", node("qa", lambda s: {"answer": ",".join(s["docs"]) + " for " + s["query"]}))
    pipeline.add_edge(START, "rewrite")
    pipeline.add_edge("rewrite", "analyze")
    pipeline.add_edge("analyze", "retrieve_one")
    pipeline.add_edge("rewrite", "retrieve_two")
    pipeline.add_edge(["retrieve_one", "retrieve_two"], "qa")
    pipeline.add_edge("qa", END)
    _, output = assert_same(pipeline, {"query": "what?"})
    assert output["answer"] == "doc1,doc2,doc3,doc4 for analyzed: query: what?"


@pytest.mark.parametrize("query", ["both", "one"])
def test_a_waiting_edge_reached_through_a_branch_that_returns_a_list(query):
    pipeline = Pipeline("branchy", State)
    pipeline.add_node("rewrite", node("rewrite"))
    pipeline.add_node("a", node("a", lambda s: {"docs": ["a"]}))
    pipeline.add_node("b", node("b", lambda s: {"docs": ["b"]}))
    pipeline.add_node("qa", node("qa", lambda s: {"answer": "+".join(s["docs"])}))
    pipeline.add_edge(START, "rewrite")
    pipeline.add_conditional_edges(
        "rewrite", lambda s: ["a", "b"] if s["query"] == "both" else "a", ["a", "b"]
    )
    pipeline.add_edge(["a", "b"], "qa")
    pipeline.add_edge("qa", END)
    _, output = assert_same(pipeline, {"query": query})
    assert ("answer" in output) == (query == "both")  # the join waits for both, as LangGraph's


@pytest.mark.parametrize("query", ["left", "right", "stop"])
def test_a_conditional_entry_point(query):
    pipeline = Pipeline("entry", State)
    pipeline.add_node("left", node("left"))
    pipeline.add_node("right", node("right"))
    pipeline.add_conditional_edges(
        START, lambda s: END if s["query"] == "stop" else s["query"], ["left", "right", END]
    )
    pipeline.add_edge("left", END)
    pipeline.add_edge("right", END)
    assert_same(pipeline, {"query": query})


def test_parallel_writes_land_in_node_name_order_and_a_route_reads_its_own_writes():
    pipeline = Pipeline("parallel", State)
    pipeline.add_node("start", node("start"))
    for name in ("zeta", "alpha", "mid"):
        pipeline.add_node(name, node(name, lambda s, name=name: {"best": len(name)}))
        pipeline.add_edge("start", name)
    pipeline.add_node("after_zeta", node("after_zeta", lambda s: {"answer": str(s.get("best"))}))
    pipeline.add_edge(START, "start")
    # Routed on zeta's own write (a fresh read), not on the step's merged state.
    pipeline.add_conditional_edges(
        "zeta", lambda s: "after_zeta" if s["best"] == 4 else END, ["after_zeta", END]
    )
    _, output = assert_same(pipeline, {})
    assert output["log"] == ["start", "alpha", "mid", "zeta", "after_zeta"]


def test_reducers_apply_to_the_input_and_a_key_without_an_empty_value_starts_unset():
    assert_same(chain(["a"]), {"docs": ["z", "y"], "log": ["input"]})
    assert_same(chain(["a"]), {"best": 3})
    _, output = assert_same(chain(["a"]), {"count": 1})
    assert "best" not in output and output["docs"] == []


def test_input_and_output_schemas_filter_what_goes_in_and_comes_out():
    pipeline = chain(["a", "b"], input_schema=Question, output_schema=Answer)
    _, output = assert_same(pipeline, {"count": 1, "answer": "ignored: not an input key", "query": "q"})
    assert set(output) == {"log"}


def test_a_node_that_writes_a_key_the_state_has_not_is_ignored():
    pipeline = Pipeline("stray", State)
    pipeline.add_node("stray", node("stray", lambda s: {"elsewhere": 1}))
    pipeline.add_edge(START, "stray")
    pipeline.add_edge("stray", END)
    assert_same(pipeline, {"count": 1})


# ------------------------------------------------------------------------- runs that write nothing
def _silent() -> Pipeline:
    pipeline = Pipeline("silent", State, output_schema=Question)

    def nothing(state: State, runtime: Any) -> None:
        return None

    pipeline.add_node("nothing", nothing)
    pipeline.add_edge(START, "nothing")
    pipeline.add_edge("nothing", END)
    return pipeline


def test_a_run_in_which_nothing_writes_an_output_key_returns_none():
    assert assert_same(_silent(), {}) == ("ok", None)
    assert assert_same(_silent(), {"log": ["not an output key"]}) == ("ok", None)
    assert assert_same(_silent(), {"count": 0}) == ("ok", {"count": 0})


# ------------------------------------------------------------------------- loops and the recursion limit
def _loop(until: int | None) -> Pipeline:
    """``tick`` counts up and loops back to itself until ``count`` reaches ``until`` (never: None)."""
    pipeline = Pipeline("loop", State)
    pipeline.add_node("tick", node("tick", lambda s: {"count": s.get("count", 0) + 1}))
    pipeline.add_edge(START, "tick")
    pipeline.add_conditional_edges(
        "tick", lambda s: END if until is not None and s["count"] >= until else "tick", ["tick", END]
    )
    return pipeline


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 6])
def test_a_loop_stops_at_the_recursion_limit_where_langgraph_stops(limit):
    kind, value = assert_same(_loop(until=4), {"count": 0}, recursion_limit=limit)
    assert (kind == "ok") == (limit > 4)  # four supersteps need a limit above four
    if kind == "error":
        assert value[0] is GraphRecursionError


@pytest.mark.parametrize("length", [1, 3])
def test_a_chain_longer_than_the_limit_is_stopped_as_langgraph_stops_it(length):
    for limit in range(1, length + 3):
        assert_same(chain([f"n{i}" for i in range(length)]), {"count": 0}, recursion_limit=limit)


def test_a_loop_without_an_end_raises_langgraphs_recursion_error_instead_of_hanging():
    _, (error, message) = assert_same(_loop(until=None), {"count": 0}, recursion_limit=50)
    assert error is GraphRecursionError and "Recursion limit of 50 reached" in message
    ended = threading.Event()
    thread = threading.Thread(
        target=lambda: (outcome(lambda: runner.invoke(_loop(until=None), {}, None)), ended.set()), daemon=True
    )
    thread.start()
    assert ended.wait(30), "the default limit did not stop an endless loop"


def test_the_default_recursion_limit_is_langgraphs():
    assert runner.default_recursion_limit() == DEFAULT_RECURSION_LIMIT
    with pytest.raises(ValueError, match="at least 1"):
        runner.invoke(chain(["a"]), {}, None, recursion_limit=0)


# ------------------------------------------------------------------------- errors
def test_two_writes_to_a_plain_key_in_one_step_are_refused_with_langgraphs_error():
    pipeline = Pipeline("conflict", State)
    for name in ("a", "b"):
        pipeline.add_node(name, node(name, lambda s: {"answer": "mine"}))
        pipeline.add_edge(START, name)
    assert assert_same(pipeline, {})[1][0] is InvalidUpdateError


def test_a_node_returning_no_dict_is_refused_with_langgraphs_error():
    pipeline = Pipeline("odd", State)

    def text(state: State, runtime: Any) -> Any:
        return "not a dict"

    pipeline.add_node("text", text)
    pipeline.add_edge(START, "text")
    assert assert_same(pipeline, {})[1][0] is InvalidUpdateError


def test_a_failing_node_raises_its_own_error_and_a_route_to_an_unknown_node_a_key_error():
    def fail(state: State) -> dict[str, Any]:
        raise LookupError("no such thing")

    failing = Pipeline("failing", State)
    failing.add_node("fail", node("fail", fail))
    failing.add_edge(START, "fail")
    assert assert_same(failing, {}) == ("error", (LookupError, "no such thing"))
    lost = Pipeline("lost", State)
    lost.add_node("start", node("start"))
    lost.add_node("left", node("left"))
    lost.add_edge(START, "start")
    lost.add_conditional_edges("start", lambda s: "elsewhere", ["left"])
    theirs = outcome(lambda: lost.compile().invoke({}))
    with pytest.raises(KeyError, match="routed to 'elsewhere'"):  # a KeyError, as LangGraph's
        runner.invoke(lost, {}, None)
    assert theirs[1][0] is KeyError


# ------------------------------------------------------------------------- runtime and progress
def test_a_node_sees_the_runtime_langgraph_gives_it():
    seen: dict[str, list[Any]] = {"ours": [], "theirs": []}

    def look(state: State, runtime: Any) -> dict[str, Any]:
        runtime.stream_writer("ignored outside stream_mode='custom'")
        runtime.heartbeat()
        seen[state["query"]].append((runtime.context, runtime.store, runtime.previous))
        return {"count": 1}

    pipeline = Pipeline("runtime", State, context_schema=dict)
    pipeline.add_node("look", look)
    pipeline.add_edge(START, "look")
    pipeline.compile().invoke({"query": "theirs"}, context={"user": "u"})
    runner.invoke(pipeline, {"query": "ours"}, {"user": "u"})
    assert seen["ours"] == seen["theirs"] == [({"user": "u"}, None, None)]


def test_on_step_names_the_nodes_as_langgraphs_updates_stream_does():
    pipeline = _loop(until=3)
    theirs = [name for chunk in pipeline.compile().stream({}, stream_mode="updates") for name in chunk]
    ours: list[str] = []
    runner.invoke(pipeline, {}, None, on_step=ours.append)
    assert ours == theirs == ["tick"] * 3


# ------------------------------------------------------------------------- what the gate refuses
class PydanticState(pydantic.BaseModel):
    count: int = 0
    log: Annotated[list[str], operator.add] = []


@dataclasses.dataclass
class DataclassState:
    count: int = 0


class Managed(TypedDict, total=False):
    count: int
    remaining: RemainingSteps


def _one_node(state_schema: type, step: Callable[..., Any]) -> Pipeline:
    pipeline = Pipeline("refused", state_schema)
    pipeline.add_node("step", step)
    pipeline.add_edge(START, "step")
    pipeline.add_edge("step", END)
    return pipeline


def _counts(state: Any, runtime: Any) -> dict[str, Any]:
    count = state.count if not isinstance(state, dict) else state.get("count", 0)
    return {"count": count + 1}


def _reads_a_part(state: Question, runtime: Any) -> dict[str, Any]:
    return {"count": len(state)}


def _commands(state: State, runtime: Any) -> Command[Literal["step"]]:
    return Command(update={"count": 1})


async def _asynchronous(state: State, runtime: Any) -> dict[str, Any]:
    return {"count": 1}


@pytest.mark.parametrize(
    ("state_schema", "step", "why"),
    [
        (PydanticState, _counts, "not a TypedDict"),
        (DataclassState, _counts, "not a TypedDict"),
        (Managed, _counts, "managed value"),
        (State, _reads_a_part, "reads the state as Question"),
        (State, _commands, "returns a Command"),
        (State, _asynchronous, "is async"),
        (State, lambda state: {"count": 1}, "takes (state)"),
    ],
)
def test_what_the_runner_does_not_model_runs_through_langgraph(state_schema, step, why):
    pipeline = _one_node(state_schema, step)
    assert not pipeline.runs_directly and why in " ".join(pipeline.refusals)
    if step is not _asynchronous:  # LangGraph's sync invoke cannot run an async node either
        assert outcome(lambda: runner.invoke(pipeline, {"count": 2}, None)) == outcome(
            lambda: pipeline.compile().invoke({"count": 2})
        )


@pytest.mark.parametrize(
    "returned",
    [
        Command(update={"count": 5}, goto=END),
        [Command(update={"count": 5})],
        {"log": Overwrite(["replaced"])},
        DataclassState(count=5),  # LangGraph writes its fields
    ],
)
def test_a_node_returning_what_only_langgraph_runs_is_refused_clearly(returned):
    ran: list[str] = []
    pipeline = Pipeline("dynamic", State)
    pipeline.add_node("step", lambda state, runtime: returned)
    pipeline.add_node("after", node("after", lambda s: ran.append("after") or {}))
    pipeline.add_edge(START, "step")
    pipeline.add_edge("step", "after")
    assert pipeline.runs_directly  # nothing in its signature shows it
    with pytest.raises(runner.NotModelled, match=r"pipeline\.graph"):
        runner.invoke(pipeline, {}, None)
    assert ran == []


def test_a_route_sending_is_refused_clearly():
    pipeline = Pipeline("sends", State)
    pipeline.add_node("start", node("start"))
    pipeline.add_node("each", node("each"))
    pipeline.add_edge(START, "start")
    pipeline.add_conditional_edges("start", lambda s: [Send("each", {"query": "x"})], ["each"])
    with pytest.raises(runner.NotModelled, match="Send"):
        runner.invoke(pipeline, {}, None)


def test_a_node_that_needs_langgraphs_run_context_is_refused_clearly():
    def asks(state: State, runtime: Any) -> dict[str, Any]:
        return {"answer": interrupt("which one?")}

    pipeline = _one_node(State, asks)
    assert "__interrupt__" in pipeline.compile().invoke({})  # LangGraph pauses the run
    with pytest.raises(runner.NotModelled, match="interrupt"):
        runner.invoke(pipeline, {}, None)
