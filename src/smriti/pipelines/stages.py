"""Coarse graphs: a pipeline's steps grouped into stages, one LangGraph node per stage.

Each pipeline is written step by step (``recall.py``'s ``build_recall_pipeline``: one node per
step function, 26 of them). LangGraph's ``invoke`` pays for every superstep (a checkpoint, the
channels' bookkeeping, a task), which on recall's 21 supersteps cost 2x the steps' own CPU. So
production compiles a coarse graph of the same steps: :func:`coarsen` groups consecutive steps
into stages (the design card's grain: parse the query, search, gather, expand, refine, rank),
and each stage is one LangGraph node that calls its steps in order (:func:`stage_node`).

The coarse graph is the fine one with chains folded, checked when it is made: inside a stage
each step's only successor is the next step, by a plain edge; every route, fan-out, join and
entry of the fine graph targets the first step of a stage (or the end). So a run of the coarse
graph calls the same steps, in the same order, on the same state as the fine graph, and each
step still appends its own trace entry (``explain`` shows the 23 steps of a recall, not its
stages). ``tests/test_stages.py`` compares the two on the real pipelines.

A stage tells each finished step to LangGraph's ``custom`` stream (``runtime.stream_writer``,
a no-op in a plain ``invoke``) and to the run's ``on_step`` (:func:`run`: the MCP server's
progress notifications, the CLI's progress bar), as it happens.
"""

from __future__ import annotations

import itertools
import logging
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Annotated, Any, NotRequired, Required

from smriti.pipelines.pipeline import END, START, Node, Pipeline, Route

log = logging.getLogger(__name__)

ON_STEP = "smriti_on_step"  # the run's config key of ``run``'s ``on_step``

Reducer = Callable[[Any, Any], Any]


def reducers(schema: type) -> dict[str, Reducer | None]:
    """Every key of a TypedDict state, with its reducer (None: the last write wins), read as
    LangGraph reads them: a reducer is an ``Annotated`` key's last metadata when callable."""
    keys: dict[str, Reducer | None] = {}
    for key, hint in typing.get_type_hints(schema, include_extras=True).items():
        while typing.get_origin(hint) in (Required, NotRequired):
            hint = typing.get_args(hint)[0]
        metadata = hint.__metadata__[-1] if typing.get_origin(hint) is Annotated else None
        keys[key] = metadata if callable(metadata) else None
    return keys


def stage_node(name: str, steps: Sequence[Node], schema: type) -> Node:
    """One LangGraph node that runs ``steps`` in order, as the fine graph would run them one
    superstep each: every step reads the state with the earlier steps' writes applied (through
    the keys' reducers), and the node returns all of their writes, each key's folded into one
    (the reducers are associative: LangGraph then folds that into the channel alike)."""
    keys = reducers(schema)
    named = [(step.__name__, step) for step in steps]

    def stage(state: dict[str, Any], runtime: Any) -> dict[str, Any]:
        from langgraph.config import get_config  # runs inside LangGraph: imported already

        view = dict(state)
        written: dict[str, Any] = {}
        write = runtime.stream_writer
        on_step = get_config().get("configurable", {}).get(ON_STEP)
        for step_name, step in named:
            update = step(dict(view), runtime)
            if update is None:
                update = {}
            elif not isinstance(update, dict):
                raise TypeError(f"step {step_name!r} returned {type(update).__name__}, not a dict")
            for key, value in update.items():
                if key not in keys:
                    continue  # as LangGraph: a key the state has not is dropped
                reducer = keys[key]
                if reducer is None:
                    view[key] = written[key] = value
                    continue
                view[key] = reducer(view[key], value) if key in view else value
                written[key] = reducer(written[key], value) if key in written else value
            trace = update.get("trace")
            write({"stage": name, "step": step_name, "ms": trace[-1]["ms"] if trace else None})
            if on_step is not None:
                on_step(step_name)
        return written

    stage.__name__ = stage.__qualname__ = name
    stage.__doc__ = f"Stage {name}: " + " > ".join(step_name for step_name, _ in named)
    return stage


def coarsen(fine: Pipeline, name: str, stages: Mapping[str, Sequence[str]]) -> Pipeline:
    """The coarse pipeline of ``fine`` with each of ``stages`` (stage name -> its steps' names,
    in order) one node. A step may end two stages (recall's ``format_result``).

    Raises:
        ValueError: a grouping that would change what runs (a step inside a stage with another
            way out, a route or edge into the middle of a stage, a step in no stage).
    """
    coarse = Pipeline(
        name,
        fine.state_schema,
        context_schema=fine.context_schema,
        input_schema=fine.input_schema,
        output_schema=fine.output_schema,
    )
    coarse.stages = {stage: tuple(steps) for stage, steps in stages.items()}
    coarse.fine = fine
    starts: dict[str, str] = {}
    for stage, steps in stages.items():
        if steps[0] in starts:
            raise ValueError(f"{name}: stages {starts[steps[0]]!r} and {stage!r} both start at {steps[0]!r}")
        starts[steps[0]] = stage
    missing = set(fine.nodes) - {step for steps in stages.values() for step in steps}
    if missing:
        raise ValueError(f"{name}: steps in no stage: {sorted(missing)}")
    outs = _ways_out(fine)

    def to_stage(target: str) -> str:
        if target == END:
            return END
        if target not in starts:
            raise ValueError(f"{name}: {target!r} is reached from another stage but starts none")
        return starts[target]

    for stage, steps in stages.items():
        for step, after in itertools.pairwise(steps):
            if outs.get(step) != [("edge", after)]:
                raise ValueError(f"{name}: in stage {stage!r}, {step!r} leads elsewhere than {after!r}")
        coarse.add_node(stage, stage_node(stage, [fine.nodes[step] for step in steps], fine.state_schema))
    ends = {stage: steps[-1] for stage, steps in stages.items()}
    for source, target in fine.edges:
        for stage in _stages_ending(source, ends):
            coarse.add_edge(stage, to_stage(target))
    for sources, target in fine.joins:
        coarse.add_edge([_one_stage_ending(source, ends, name) for source in sources], to_stage(target))
    for source, routes in fine.branches.items():
        for route, targets in routes:
            mapped = _mapped_route(route, {target: to_stage(target) for target in targets})
            for stage in _stages_ending(source, ends):
                coarse.add_conditional_edges(stage, mapped, [to_stage(target) for target in targets])
    return coarse


def _ways_out(fine: Pipeline) -> dict[str, list[tuple[str, str]]]:
    outs: dict[str, list[tuple[str, str]]] = {}
    for source, target in fine.edges:
        outs.setdefault(source, []).append(("edge", target))
    for sources, target in fine.joins:
        for source in sources:
            outs.setdefault(source, []).append(("join", target))
    for source, routes in fine.branches.items():
        outs.setdefault(source, []).extend(("route", ",".join(targets)) for _, targets in routes)
    return outs


def _stages_ending(step: str, ends: Mapping[str, str]) -> Iterator[str]:
    if step == START:
        yield START
    yield from (stage for stage, last in ends.items() if last == step)


def _one_stage_ending(step: str, ends: Mapping[str, str], name: str) -> str:
    stages = list(_stages_ending(step, ends))
    if len(stages) != 1:
        raise ValueError(f"{name}: a join waits for {step!r}, which ends {len(stages)} stages, not one")
    return stages[0]


def _mapped_route(route: Route, names: Mapping[str, str]) -> Route:
    """``route`` answering with stage names instead of step names."""

    def mapped(state: Any) -> Any:
        chosen = route(state)
        if isinstance(chosen, list):
            return [names.get(choice, choice) for choice in chosen]
        return names.get(chosen, chosen)

    mapped.__name__ = getattr(route, "__name__", "route")
    return mapped


def run(
    graph: Any, payload: Mapping[str, Any], context: Any, on_step: Callable[[str], None] | None = None
) -> Any:
    """``graph.invoke(payload, context=context)``, with ``on_step(step)`` called by each stage as
    each of its steps finishes, in the thread that ran it (the calling thread, but for recall's
    parallel branches). Invoked, not streamed: LangGraph's ``stream`` runs even a lone node in
    a pool thread, and the store's steps must run in the thread that holds its transaction
    (``Memory.store_checked``)."""
    if on_step is None:
        return graph.invoke(payload, context=context)
    return graph.invoke(payload, {"configurable": {ON_STEP: on_step}}, context=context)


def compiled(pipelines: Mapping[str, Pipeline]) -> dict[str, str]:
    """The class of each of ``pipelines``' compiled graphs, for those compiled so far (nothing is
    compiled here): what a server's status shows as the executor its calls run on."""
    return {
        name: f"{type(graph).__module__}.{type(graph).__qualname__}"
        for name, pipeline in pipelines.items()
        if (graph := pipeline.compiled_graph) is not None
    }
