"""The direct runner: a :class:`~smriti.pipelines.pipeline.Pipeline` run with LangGraph's
semantics, none of Pregel's per-step machinery, and without importing LangGraph.

LangGraph's ``invoke`` builds a checkpoint, a channel per node trigger and a task per step,
and runs parallel steps in a thread pool made for that call: ~5-7 ms of the ~30 ms a recall
took at 10k memories (profiled; 23 nodes), ~3 ms of a three-node ``list``. And importing
LangGraph takes ~0.8 s, which a server's first recall waited for. :func:`invoke` runs the
pipeline's own nodes with LangGraph's semantics:

* state keys as LangGraph makes channels of a TypedDict: a key annotated with a reducer
  (``Annotated[list[X], operator.add]``) folds every write into its value, starting from the
  type's empty value; any other key keeps the last value, and two writes to it in one step are
  refused (LangGraph's ``InvalidUpdateError``);
* supersteps: the nodes triggered together run on the same snapshot of the state (the
  parallel ones in threads, as LangGraph does), and their writes are applied together, in
  node-name order (LangGraph sorts a step's writes by task path);
* edges, joins (a target runs once all its sources ran) and conditional edges (read on the
  state with the node's own writes applied, as LangGraph's ``fresh`` read);
* input and output filtered by the pipeline's input and output schemas.

Every step stays inspectable as before: each node appends its :class:`TraceEntry` (the trace
decorator, ``nodes/state.py``), and ``pipeline.graph`` is the LangGraph graph of the same
pipeline for stepping through it. A pipeline with an async node or a node taking more than
``(state, runtime)`` (:attr:`Pipeline.runs_directly`), or a run with LangSmith tracing on, goes
through the compiled graph's ``invoke``, so nothing LangGraph offers is lost: the direct path
is for the plain runs the server, the CLI and ``Memory`` make. ``tests/test_runner.py`` checks
outputs and traces against LangGraph's on the real pipelines and on a toy one.
"""

from __future__ import annotations

import contextvars
import inspect
import os
import sys
import threading
import typing
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Required

from smriti.pipelines.pipeline import END, START, Pipeline

# Threads for a step's parallel nodes (recall's three branches): made once, not per run.
_POOL_WORKERS = 4
_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(_POOL_WORKERS, thread_name_prefix="smriti-step")
        return _pool


@dataclass(frozen=True)
class StepRuntime:
    """What a node gets as ``runtime``: the run's context, as ``langgraph.runtime.Runtime``
    carries it (the nodes read nothing else of it)."""

    context: Any


Reducer = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class Field:
    """One state key: its reducer (None: the last value wins) and its empty value, if any."""

    reducer: Reducer | None
    empty: Callable[[], Any] | None


_NO_VALUE = object()


def _field(hint: Any) -> Field:
    """A key's channel as LangGraph reads it from a TypedDict annotation: a reducer is the
    last ``Annotated`` metadata when it is a two-argument callable; its start value is the
    annotated type called with no arguments (``list[X]()`` is ``[]``) when that works."""
    while typing.get_origin(hint) in (Required, NotRequired):
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) is not Annotated:
        return Field(None, None)
    reducer = hint.__metadata__[-1]
    if not callable(reducer):
        return Field(None, None)
    parameters = inspect.signature(reducer).parameters.values()
    if sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters) != 2:
        raise ValueError(f"a state reducer takes (current, update): {reducer!r} does not")  # as LangGraph
    base = typing.get_args(hint)[0]
    kind = typing.get_origin(base) or base
    try:
        kind()
    except Exception:  # why: as LangGraph, a type with no empty value starts unset
        return Field(reducer, None)
    return Field(reducer, kind)


@dataclass(frozen=True)
class Plan:
    """What :func:`_run` reads of a pipeline, derived once (a pipeline is described in full
    before its first run)."""

    fields: Mapping[str, Field]  # every key of the state, input and output schemas
    input_keys: frozenset[str]
    output_keys: tuple[str, ...]
    edges: Mapping[str, tuple[str, ...]]  # source -> targets
    joins: tuple[tuple[frozenset[str], str], ...]


_plans: weakref.WeakKeyDictionary[Pipeline, Plan] = weakref.WeakKeyDictionary()
_plans_lock = threading.Lock()


def plan_of(pipeline: Pipeline) -> Plan:
    with _plans_lock:
        plan = _plans.get(pipeline)
    if plan is not None:
        return plan
    fields: dict[str, Field] = {}
    for schema in (pipeline.state_schema, pipeline.input_schema, pipeline.output_schema):
        for key, hint in typing.get_type_hints(schema or pipeline.state_schema, include_extras=True).items():
            fields.setdefault(key, _field(hint))
    edges: dict[str, list[str]] = {}
    for source, target in pipeline.edges:
        edges.setdefault(source, []).append(target)
    plan = Plan(
        fields=fields,
        input_keys=frozenset(typing.get_type_hints(pipeline.input_schema or pipeline.state_schema)),
        output_keys=tuple(typing.get_type_hints(pipeline.output_schema or pipeline.state_schema)),
        edges={source: tuple(targets) for source, targets in edges.items()},
        joins=tuple((frozenset(sources), target) for sources, target in pipeline.joins),
    )
    with _plans_lock:
        _plans[pipeline] = plan
    return plan


_TRACING_VARIABLES = (
    "LANGSMITH_TRACING_V2",
    "LANGCHAIN_TRACING_V2",
    "LANGSMITH_TRACING",
    "LANGCHAIN_TRACING",
)


def tracing_enabled() -> bool:
    """LangSmith tracing is on (its environment variables, or a tracing context): runs go
    through LangGraph, which records them. A tracing context needs ``langsmith`` imported; so
    until something imported it, the variables are read here instead of importing it (~0.3 s)."""
    if "langsmith" not in sys.modules:
        return any(os.environ.get(name, "").strip().lower() == "true" for name in _TRACING_VARIABLES)
    from langsmith.utils import tracing_is_enabled

    return bool(tracing_is_enabled())


def invoke(pipeline: Pipeline, payload: Mapping[str, Any], context: Any) -> Any:
    """``pipeline.graph.invoke(payload, context=context)``, directly where the pipeline allows."""
    if not pipeline.runs_directly or tracing_enabled():
        return pipeline.graph.invoke(payload, context=context)
    return _run(pipeline, payload, StepRuntime(context=context))


def _apply(plan: Plan, values: dict[str, Any], writes: list[tuple[str, dict[str, Any]]]) -> None:
    """A step's writes, grouped per key in node-name order (as Pregel's apply_writes)."""
    grouped: dict[str, list[Any]] = {}
    for _, update in sorted(writes, key=lambda write: write[0]):
        for key, value in update.items():
            if key in plan.fields:
                grouped.setdefault(key, []).append(value)
    for key, written in grouped.items():
        reducer = plan.fields[key].reducer
        if reducer is None:
            if len(written) > 1:
                from langgraph.errors import InvalidUpdateError  # a pipeline's bug: LangGraph's error

                raise InvalidUpdateError(
                    f"At key '{key}': Can receive only one value per step. "
                    "Use an Annotated key to handle multiple values."
                )
            values[key] = written[0]
            continue
        value = values.get(key, _NO_VALUE)
        if value is _NO_VALUE:
            value, written = written[0], written[1:]
        for item in written:
            value = reducer(value, item)
        values[key] = value


def _updates(name: str, output: Any) -> dict[str, Any]:
    if output is None:
        return {}
    if not isinstance(output, dict):
        from langgraph.errors import InvalidUpdateError

        raise InvalidUpdateError(f"Expected dict, got {output!r} from node {name!r}")
    return output


def _routes(pipeline: Pipeline, name: str, state: dict[str, Any]) -> list[str]:
    targets: list[str] = []
    for route, ends in pipeline.branches.get(name, ()):
        chosen = route(state)
        for choice in chosen if isinstance(chosen, list) else [chosen]:
            if choice not in ends:
                raise ValueError(f"pipeline {pipeline.name}: {name} routed to {choice!r}, not one of {ends}")
            targets.append(choice)
    return targets


def _run(pipeline: Pipeline, payload: Mapping[str, Any], runtime: StepRuntime) -> Any:
    plan = plan_of(pipeline)
    # Fresh state, as Pregel makes it for a run without a checkpoint: reducers' empty values.
    values = {key: field.empty() for key, field in plan.fields.items() if field.empty is not None}
    _apply(plan, values, [(START, {k: v for k, v in payload.items() if k in plan.input_keys})])
    step = list(plan.edges.get(START, ()))
    arrived: dict[str, set[str]] = {}
    while step:
        before = dict(values) if len(step) > 1 and any(name in pipeline.branches for name in step) else None
        writes = _execute(pipeline, step, values, runtime)
        _apply(plan, values, writes)
        following: list[str] = []
        for name, update in writes:
            following.extend(plan.edges.get(name, ()))
            if name in pipeline.branches:
                # Routed on the state with this node's own writes (LangGraph's fresh read): the
                # step's state when it ran alone.
                own = values
                if before is not None:
                    own = dict(before)
                    _apply(plan, own, [(name, update)])
                following.extend(_routes(pipeline, name, own))
            for sources, target in plan.joins:
                if name in sources:
                    seen = arrived.setdefault(target, set())
                    seen.add(name)
                    if seen >= sources:
                        following.append(target)
                        seen.clear()
        step = [name for name in dict.fromkeys(following) if name != END]
    return {key: values[key] for key in plan.output_keys if key in values}


def _execute(
    pipeline: Pipeline, step: list[str], state: dict[str, Any], runtime: StepRuntime
) -> list[tuple[str, dict[str, Any]]]:
    """Run one step's nodes on ``state``, each on its own copy of the state dict: one in this
    thread; several in parallel (the first here, the others on the pool, in a copy of this
    thread's context as LangGraph's executor does). All of them finish before an error of
    one is raised, so no node still runs once the caller handles it."""
    nodes = pipeline.nodes
    if len(step) == 1:
        name = step[0]
        return [(name, _updates(name, nodes[name](dict(state), runtime)))]
    pool = _executor()
    futures = [
        pool.submit(contextvars.copy_context().run, nodes[name], dict(state), runtime) for name in step[1:]
    ]
    outputs: list[Any] = []
    failure: BaseException | None = None
    try:
        outputs.append(nodes[step[0]](dict(state), runtime))
    except BaseException as error:  # why: raised below, once the other nodes have finished
        failure = error
    for future in futures:
        try:
            outputs.append(future.result())
        except BaseException as error:  # why: the first failure (in step order) is raised
            failure = failure or error
    if failure is not None:
        raise failure
    return [(name, _updates(name, output)) for name, output in zip(step, outputs, strict=True)]
