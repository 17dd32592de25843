"""What the direct runner (:mod:`smriti.pipelines.runner`) models, checked on a pipeline's shape.

The runner re-implements the part of LangGraph's semantics the pipelines use. A pipeline outside
that part would run on it with results that differ from LangGraph's, silently; so before a
pipeline runs on the runner, :func:`refusals` lists every way its shape leaves the modelled part,
and a pipeline with any goes through its compiled LangGraph graph instead (whose results are
LangGraph's by definition). Modelled:

* state, input and output schemas that are TypedDicts, with keys that are plain (the last write
  wins) or ``Annotated`` with a two-argument reducer (LangGraph's own channel classes and managed
  values such as ``RemainingSteps`` are not);
* synchronous nodes taking ``(state, runtime)`` that read the whole state: LangGraph infers a
  node's own input schema from its first parameter's annotation when that is a class with type
  hints, and then hands the node only that schema's keys, so such an annotation must be the
  pipeline's state schema; and whose return annotation does not name ``Command``;
* synchronous routes taking ``(state)``, under the same annotation rule.

What a node or route returns is checked as it runs (a ``Command``, ``Send`` or ``Overwrite``
raises :class:`~smriti.pipelines.runner.NotModelled`): no signature shows it.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, Required

if TYPE_CHECKING:  # the pipeline asks for its refusals: no import back at run time
    from smriti.pipelines.pipeline import Pipeline


def refusals(pipeline: Pipeline) -> list[str]:
    """Why the runner would not run ``pipeline`` as LangGraph does; empty when it would."""
    reasons: list[str] = []
    for role, schema in (
        ("state", pipeline.state_schema),
        ("input", pipeline.input_schema),
        ("output", pipeline.output_schema),
    ):
        if schema is not None:
            reasons.extend(f"{role} schema: {why}" for why in _schema_refusals(schema))
    for name, node in pipeline.nodes.items():
        reasons.extend(f"node {name!r}: {why}" for why in _callable_refusals(node, ["runtime"], pipeline))
    for source, routes in pipeline.branches.items():
        for route, _ in routes:
            why_not = _callable_refusals(route, [], pipeline)
            reasons.extend(f"route after {source!r}: {why}" for why in why_not)
    return reasons


def _schema_refusals(schema: Any) -> list[str]:
    if not typing.is_typeddict(schema):
        return [f"{schema!r} is not a TypedDict (a Pydantic model or dataclass reaches nodes as itself)"]
    reasons = []
    for key, hint in typing.get_type_hints(schema, include_extras=True).items():
        while typing.get_origin(hint) in (Required, NotRequired):
            hint = typing.get_args(hint)[0]
        if typing.get_origin(hint) is Annotated and _is_langgraph_channel(hint.__metadata__[-1]):
            reasons.append(f"key {key!r} is a LangGraph channel or managed value")
    return reasons


def _is_langgraph_channel(metadata: Any) -> bool:
    """A channel class or instance, or a managed value (``RemainingSteps``): not a reducer."""
    kind = metadata if isinstance(metadata, type) else type(metadata)
    return isinstance(metadata, type) or kind.__module__.split(".")[0] == "langgraph"


def _callable_refusals(func: Callable[..., Any], injected: list[str], pipeline: Pipeline) -> list[str]:
    if inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(inspect.unwrap(func)):
        return ["is async"]
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return ["has no readable signature"]
    names = [p.name for p in parameters]
    positional = all(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)
    if not positional or len(names) != 1 + len(injected) or names[1:] != injected:
        wanted = ", ".join(["state", *injected])
        return [f"takes ({', '.join(names)}), not ({wanted})"]
    hints = _hints(func)
    reasons = []
    first = hints.get(names[0])
    if isinstance(first, type) and first is not pipeline.state_schema and _hints(first):
        reasons.append(f"reads the state as {first.__name__} (LangGraph would pass only its keys)")
    if "Command" in repr(hints.get("return", "")):
        reasons.append("returns a Command")
    return reasons


def _hints(obj: Any) -> dict[str, Any]:
    """``obj``'s type hints as LangGraph reads them: none when they do not resolve (a name
    imported for type checking only), as LangGraph then infers nothing from them either."""
    try:
        return typing.get_type_hints(obj)
    except (NameError, TypeError):
        return {}
