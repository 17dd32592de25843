"""A direct executor for the compiled pipelines: the same nodes, edges and reducers, none of
Pregel's per-step machinery.

LangGraph's ``invoke`` builds a checkpoint, a channel per node trigger and a task per step,
and runs parallel steps in a thread pool made for that call: ~5-7 ms of the ~30 ms a recall
took at 10k memories (profiled; 23 nodes), ~3 ms of a three-node ``list``. :func:`invoke`
runs a compiled :class:`StateGraph` from its builder instead, with LangGraph's semantics:

* supersteps: the nodes triggered together run on the same snapshot of the state (the
  parallel ones in threads, as LangGraph does), and their writes are applied together, in
  node-name order (LangGraph sorts a step's writes by task path), through the graph's own
  channel objects (so reducers, ``LastValue`` conflicts and initial values are LangGraph's);
* edges, waiting edges (a join runs once all its sources ran) and conditional edges (read on
  the state with the node's own writes applied, as LangGraph's ``fresh`` read);
* input and output filtered by the graph's input and output schemas.

Every step stays inspectable as before: each node appends its :class:`TraceEntry` (the trace
decorator, ``nodes/state.py``), and the compiled graph is unchanged for stepping through it
(checkpointer, ``interrupt_before``, ``stream``). A graph with a checkpointer or interrupts,
an async node, a node that takes ``config``, or a run with LangSmith tracing on goes through
``graph.invoke`` itself (:func:`plan_for` decides), so nothing LangGraph offers is lost: the
direct path is for the plain runs the server, the CLI and ``Memory`` make.
"""

from __future__ import annotations

import contextvars
import inspect
import threading
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from langgraph._internal._typing import MISSING
from langgraph.graph import END, START
from langgraph.runtime import Runtime

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


Node = Callable[[dict[str, Any], Runtime[Any]], Any]
Route = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class Plan:
    """What :func:`invoke` needs of a compiled graph, read once from its builder."""

    channels: Mapping[str, Any]  # name -> an empty channel (copied per run)
    input_keys: frozenset[str]
    output_keys: tuple[str, ...] | str
    nodes: Mapping[str, Node]
    edges: Mapping[str, tuple[str, ...]]  # source -> targets
    joins: tuple[tuple[frozenset[str], str], ...]  # (sources, target): target runs once all ran
    branches: Mapping[str, tuple[tuple[Route, Mapping[Any, str] | None], ...]]


# Keyed by the graph object itself, held weakly: keyed by id(), a graph freed (tests build many)
# left its plan to the next graph allocated at the same address, which then ran another graph's
# nodes (seen once in CI: a toy graph ran the recall graph's validate step).
_plans: weakref.WeakKeyDictionary[Any, Plan | None] = weakref.WeakKeyDictionary()
_plans_lock = threading.Lock()


def plan_for(graph: Any) -> Plan | None:
    """The direct plan of ``graph``, or None when it must run through ``graph.invoke``
    (a checkpointer, interrupts, an async node, a node or branch taking more than
    ``(state, runtime)``, or anything this executor does not model). Cached per graph."""
    with _plans_lock:
        if graph in _plans:
            return _plans[graph]
    plan = _make_plan(graph)
    with _plans_lock:
        _plans[graph] = plan
    return plan


def _make_plan(graph: Any) -> Plan | None:
    builder = getattr(graph, "builder", None)
    if builder is None or graph.checkpointer or graph.interrupt_before_nodes or graph.interrupt_after_nodes:
        return None
    if builder.managed:
        return None
    nodes: dict[str, Node] = {}
    for name, spec in builder.nodes.items():
        runnable = spec.runnable
        func = getattr(runnable, "func", None)
        if (
            func is None
            or inspect.iscoroutinefunction(func)
            or set(getattr(runnable, "func_accepts", {})) - {"runtime"}
            or spec.retry_policy
            or spec.cache_policy
            or spec.defer
            or spec.ends
            or spec.input_schema is not builder.state_schema
        ):
            return None
        nodes[name] = func
    edges: dict[str, list[str]] = {}
    for source, target in builder.edges:
        edges.setdefault(source, []).append(target)
    branches: dict[str, list[tuple[Route, Mapping[Any, str] | None]]] = {}
    for source, specs in builder.branches.items():
        for spec in specs.values():
            path = spec.path
            route = getattr(path, "func", None)
            if route is None or inspect.iscoroutinefunction(route) or getattr(path, "func_accepts", {}):
                return None
            branches.setdefault(source, []).append((route, spec.ends))
    output = graph.output_channels
    return Plan(
        channels=dict(builder.channels),
        input_keys=frozenset(builder.schemas[builder.input_schema]),
        output_keys=tuple(output) if isinstance(output, list) else output,
        nodes=nodes,
        edges={source: tuple(targets) for source, targets in edges.items()},
        joins=tuple((frozenset(sources), target) for sources, target in builder.waiting_edges),
        branches={source: tuple(routes) for source, routes in branches.items()},
    )


def tracing_enabled() -> bool:
    """LangSmith tracing is on (LANGSMITH_TRACING, or a tracing context): runs go through
    LangGraph, which records them."""
    from langsmith.utils import tracing_is_enabled

    return bool(tracing_is_enabled())


def invoke(graph: Any, payload: Mapping[str, Any], context: Any) -> Any:
    """``graph.invoke(payload, context=context)``, directly where :func:`plan_for` allows."""
    plan = plan_for(graph)
    if plan is None or tracing_enabled():
        return graph.invoke(payload, context=context)
    return _run(plan, payload, Runtime(context=context))


def _read(channels: Mapping[str, Any]) -> dict[str, Any]:
    return {name: channel.get() for name, channel in channels.items() if channel.is_available()}


def _apply(channels: Mapping[str, Any], writes: list[tuple[str, dict[str, Any]]]) -> None:
    """A step's writes, grouped per channel in node-name order (as Pregel's apply_writes);
    channels nobody wrote are told a step passed (``update([])``)."""
    grouped: dict[str, list[Any]] = {}
    for _, update in sorted(writes, key=lambda write: write[0]):
        for key, value in update.items():
            if key in channels:
                grouped.setdefault(key, []).append(value)
    for key, channel in channels.items():
        if key in grouped:
            channel.update(grouped[key])
        elif channel.is_available():
            channel.update([])


def _updates(name: str, output: Any) -> dict[str, Any]:
    if output is None:
        return {}
    if not isinstance(output, dict):
        from langgraph.errors import InvalidUpdateError

        raise InvalidUpdateError(f"Expected dict, got {output!r} from node {name!r}")
    return output


def _routes(plan: Plan, name: str, state: dict[str, Any]) -> list[str]:
    targets: list[str] = []
    for route, ends in plan.branches.get(name, ()):
        chosen = route(state)
        for choice in chosen if isinstance(chosen, list) else [chosen]:
            targets.append(ends[choice] if ends else choice)
    return targets


def _run(plan: Plan, payload: Mapping[str, Any], runtime: Runtime[Any]) -> Any:
    # Fresh channels, as Pregel makes them for a run without a checkpoint.
    channels = {name: template.from_checkpoint(MISSING) for name, template in plan.channels.items()}
    _apply(channels, [(START, {k: v for k, v in payload.items() if k in plan.input_keys})])
    step = list(plan.edges.get(START, ()))
    arrived: dict[str, set[str]] = {}
    while step:
        before = None
        if len(step) > 1 and any(name in plan.branches for name in step):
            before = {name: channel.copy() for name, channel in channels.items()}
        writes = _execute(plan, step, _read(channels), runtime)
        _apply(channels, writes)
        following: list[str] = []
        for name, update in writes:
            following.extend(plan.edges.get(name, ()))
            if name in plan.branches:
                # Routed on the state with this node's own writes (LangGraph's fresh read): the
                # step's state when it ran alone.
                own = channels
                if before is not None:
                    own = {key: channel.copy() for key, channel in before.items()}
                    _apply(own, [(name, update)])
                following.extend(_routes(plan, name, _read(own)))
            for sources, target in plan.joins:
                if name in sources:
                    seen = arrived.setdefault(target, set())
                    seen.add(name)
                    if seen >= sources:
                        following.append(target)
                        seen.clear()
        step = [name for name in dict.fromkeys(following) if name != END]
    values = _read(channels)
    if isinstance(plan.output_keys, str):
        return values.get(plan.output_keys)
    return {key: values[key] for key in plan.output_keys if key in values}


def _execute(
    plan: Plan, step: list[str], state: dict[str, Any], runtime: Runtime[Any]
) -> list[tuple[str, dict[str, Any]]]:
    """Run one step's nodes on ``state``, each on its own copy of the state dict: one in this
    thread; several in parallel (the first here, the others on the pool, in a copy of this
    thread's context as LangGraph's executor does). All of them finish before an error of
    one is raised, so no node still runs once the caller handles it."""
    if len(step) == 1:
        name = step[0]
        return [(name, _updates(name, plan.nodes[name](dict(state), runtime)))]
    pool = _executor()
    futures = [
        pool.submit(contextvars.copy_context().run, plan.nodes[name], dict(state), runtime)
        for name in step[1:]
    ]
    outputs: list[Any] = []
    failure: BaseException | None = None
    try:
        outputs.append(plan.nodes[step[0]](dict(state), runtime))
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
