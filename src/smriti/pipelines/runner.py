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

* LangGraph's recursion limit: a run that has not ended after ``recursion_limit`` supersteps
  (LangGraph's default, or the caller's) raises LangGraph's own ``GraphRecursionError``, counted
  as Pregel counts (a run of ``n`` supersteps needs a limit above ``n``);
* a run in which nothing wrote an output key returns None, as LangGraph's ``invoke`` does.

What it does not model it refuses: :mod:`smriti.pipelines.gate` checks a pipeline's shape
(TypedDict schemas, ``(state, runtime)`` nodes reading the whole state, ``(state)`` routes) and
a pipeline it refuses runs through its compiled graph, as does any run with LangSmith tracing
on; a node or route that returns ``Command``, ``Send``, ``Overwrite`` or an annotated object,
or calls what needs LangGraph's run context (``interrupt``, ``get_config``), raises
:class:`NotModelled`. ``tests/test_runner_vs_langgraph.py`` runs small graphs through both and
compares outputs, traces and errors; ``tests/test_runner.py`` does the same on the real
pipelines over real stores.

Every step stays inspectable: each node appends its :class:`TraceEntry` (the trace decorator,
``nodes/state.py``), and ``pipeline.graph`` is the LangGraph graph of the same pipeline for
stepping through it (``stream``, checkpointers, ``interrupt_before``).
"""

from __future__ import annotations

import contextvars
import inspect
import itertools
import logging
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

log = logging.getLogger(__name__)

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


def _no_op(*_: Any) -> None:
    return None


@dataclass(frozen=True)
class StepRuntime:
    """What a node gets as ``runtime``: the fields of ``langgraph.runtime.Runtime`` with the
    values LangGraph gives them in a plain ``invoke`` (no store, no custom stream, no
    checkpointer). Its ``execution_info`` is not modelled (None)."""

    context: Any
    store: Any = None
    stream_writer: Callable[[Any], None] = _no_op
    heartbeat: Callable[[], None] = _no_op
    previous: Any = None
    execution_info: Any = None
    server_info: Any = None
    control: Any = None


class NotModelled(TypeError):
    """A node or route did what only LangGraph runs (returned a ``Command``, ``Send`` or
    ``Overwrite``, or called ``interrupt``): the pipeline must run through its compiled graph
    (``pipeline.graph``)."""


def default_recursion_limit() -> int:
    """LangGraph's default recursion limit (``langgraph._internal._config``), read as it reads
    it, without importing LangGraph; ``tests/test_runner_vs_langgraph.py`` checks the two agree."""
    return int(os.environ.get("LANGGRAPH_DEFAULT_RECURSION_LIMIT", "10007"))


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
    output_set: frozenset[str]
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
    output_keys = typing.get_type_hints(pipeline.output_schema or pipeline.state_schema)
    edges: dict[str, list[str]] = {}
    for source, target in pipeline.edges:
        edges.setdefault(source, []).append(target)
    plan = Plan(
        fields=fields,
        input_keys=frozenset(typing.get_type_hints(pipeline.input_schema or pipeline.state_schema)),
        output_keys=tuple(output_keys),
        output_set=frozenset(output_keys),
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


def invoke(
    pipeline: Pipeline,
    payload: Mapping[str, Any],
    context: Any,
    *,
    recursion_limit: int | None = None,
    on_step: Callable[[str], None] | None = None,
) -> Any:
    """``pipeline.graph.invoke(payload, context=context)``: on the runner where the gate
    (``gate.py``) admits the pipeline and LangSmith tracing is off, else through the graph.

    ``on_step(node)`` is called as each node's writes land (a progress bar), as LangGraph's
    ``stream_mode="updates"`` names them.

    Raises:
        GraphRecursionError: (LangGraph's) the run did not end within ``recursion_limit`` steps.
        InvalidUpdateError: (LangGraph's) two writes to a plain key in one step, or a node
            returned something other than a dict.
        NotModelled: a node or route returned a ``Command``, ``Send`` or ``Overwrite``.
    """
    limit = default_recursion_limit() if recursion_limit is None else recursion_limit
    if limit < 1:
        raise ValueError("recursion_limit must be at least 1")  # as LangGraph
    if pipeline.runs_directly and not tracing_enabled():
        return _run(pipeline, payload, StepRuntime(context=context), limit, on_step or _no_op)
    config = None if recursion_limit is None else {"recursion_limit": recursion_limit}
    if on_step is None:
        if config is None:
            return pipeline.graph.invoke(payload, context=context)
        return pipeline.graph.invoke(payload, config, context=context)
    output = None
    for mode, chunk in pipeline.graph.stream(
        payload, config, context=context, stream_mode=["updates", "values"]
    ):
        if mode == "values":
            output = chunk
        else:
            for node in chunk:
                on_step(node)
    return output


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


def _from_langgraph(value: Any) -> bool:
    """``value`` is one of LangGraph's control objects (``Command``, ``Send``, ``Overwrite``):
    only code that imported LangGraph can make one, so the check imports nothing."""
    return type(value).__module__.startswith("langgraph.")


def _updates(name: str, output: Any) -> dict[str, Any]:
    if output is None:
        return {}
    if not isinstance(output, dict):
        commands = output if isinstance(output, list | tuple) else [output]
        # LangGraph also reads an object with annotated fields (a dataclass, a Pydantic model)
        # as the writes of those fields.
        annotated = any("__annotations__" in vars(kind) for kind in type(output).__mro__)
        if annotated or any(map(_from_langgraph, commands)):
            raise NotModelled(
                f"node {name!r} returned {type(output).__name__}: the direct runner runs nodes that "
                "return a dict or None; run the pipeline's compiled graph (pipeline.graph)"
            )
        from langgraph.errors import ErrorCode, InvalidUpdateError, create_error_message

        # LangGraph's own message (graph/state.py), with the node named in the log
        log.error("node %r returned %r, not a dict of the state keys it changes", name, output)
        raise InvalidUpdateError(
            create_error_message(
                message=f"Expected dict, got {output}", error_code=ErrorCode.INVALID_GRAPH_NODE_RETURN_VALUE
            )
        )
    for key, value in output.items():
        if _from_langgraph(value):
            raise NotModelled(
                f"node {name!r} wrote {type(value).__name__} to {key!r}: the direct runner "
                "does not model it; run the pipeline's compiled graph (pipeline.graph)"
            )
    return output


def _routes(pipeline: Pipeline, name: str, state: dict[str, Any]) -> list[str]:
    targets: list[str] = []
    for route, ends in pipeline.branches.get(name, ()):
        chosen = route(state)
        for choice in chosen if isinstance(chosen, list) else [chosen]:
            if _from_langgraph(choice):
                raise NotModelled(
                    f"the route after {name!r} returned {type(choice).__name__}: the direct runner "
                    "does not model it; run the pipeline's compiled graph (pipeline.graph)"
                )
            if choice not in ends:
                raise UnknownRoute(
                    f"pipeline {pipeline.name}: {name} routed to {choice!r}, not one of {ends}"
                )
            targets.append(choice)
    return targets


class UnknownRoute(KeyError, ValueError):
    """A route named a node it did not declare (LangGraph raises a bare ``KeyError`` of the name;
    this is one, with a message that says where)."""

    def __str__(self) -> str:
        return str(self.args[0])


def _run(
    pipeline: Pipeline,
    payload: Mapping[str, Any],
    runtime: StepRuntime,
    recursion_limit: int,
    on_step: Callable[[str], None],
) -> Any:
    plan = plan_of(pipeline)
    # Fresh state, as Pregel makes it for a run without a checkpoint: reducers' empty values.
    values = {key: field.empty() for key, field in plan.fields.items() if field.empty is not None}
    given = {k: v for k, v in payload.items() if k in plan.input_keys}
    _apply(plan, values, [(START, given)])
    output_written = any(key in plan.output_set for key in given)  # no output: LangGraph returns None
    step = list(plan.edges.get(START, ()))
    if START in pipeline.branches:  # a conditional entry: routed on the input
        step = [name for name in dict.fromkeys(step + _routes(pipeline, START, values)) if name != END]
    arrived: dict[str, set[str]] = {}
    for tick in itertools.count():
        # Pregel checks its limit before it looks for the next step's tasks: the tick that finds
        # none counts too.
        if tick >= recursion_limit:
            _raise_recursion_error(recursion_limit)
        if not step:
            break
        before = dict(values) if len(step) > 1 and any(name in pipeline.branches for name in step) else None
        writes = _execute(pipeline, step, values, runtime)
        _apply(plan, values, writes)
        following: list[str] = []
        for name, update in writes:
            output_written = output_written or any(key in plan.output_set for key in update)
            on_step(name)
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
    if not output_written:
        return None
    return {key: values[key] for key in plan.output_keys if key in values}


def _raise_recursion_error(limit: int) -> None:
    from langgraph.errors import ErrorCode, GraphRecursionError, create_error_message

    raise GraphRecursionError(
        create_error_message(
            message=f"Recursion limit of {limit} reached without hitting a stop condition. "
            "You can increase the limit by setting the `recursion_limit` config key.",
            error_code=ErrorCode.GRAPH_RECURSION_LIMIT,
        )
    )


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
        try:
            output = nodes[name](dict(state), runtime)
        except RuntimeError as error:
            _refuse_langgraph_context(step, error)
            raise
        return [(name, _updates(name, output))]
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
        _refuse_langgraph_context(step, failure)
        raise failure
    return [(name, _updates(name, output)) for name, output in zip(step, outputs, strict=True)]


def _refuse_langgraph_context(step: list[str], error: BaseException) -> None:
    """A node that called what needs LangGraph's run context (``interrupt``, ``get_config``,
    ``get_store``, ``get_stream_writer``) fails inside LangGraph with a RuntimeError that names
    none of this: say what happened instead.

    Raises:
        NotModelled: ``error`` is such a failure.
    """
    if not isinstance(error, RuntimeError):
        return
    frame = error.__traceback__
    while frame is not None:
        module = frame.tb_frame.f_globals.get("__name__", "")
        if module.startswith("langgraph."):
            raise NotModelled(
                f"a node of step {step} called {frame.tb_frame.f_code.co_name} of {module}, which "
                "needs LangGraph's run context (an interrupt, the config, the store); run the "
                "pipeline's compiled graph (pipeline.graph)"
            ) from error
        frame = frame.tb_next
