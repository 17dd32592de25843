"""A pipeline's shape (its steps, edges, routes and state schemas), written without LangGraph.

The store, recall and consolidate pipelines are built on :class:`Pipeline`, whose methods are
LangGraph's ``StateGraph``'s (``add_node``, ``add_edge``, ``add_conditional_edges``). Two things
run one:

* :meth:`Pipeline.compile` builds the LangGraph graph it describes, node for node and edge for
  edge: the graph for stepping through a pipeline (checkpointer, ``interrupt_before``,
  ``stream``), embedding it as a subgraph, and LangSmith tracing. ``memory.recall_graph`` and
  the modules' ``recall_graph``, ``store_graph`` and ``consolidate_graph`` are these, compiled
  at first use.
* :func:`smriti.pipelines.runner.invoke` runs the pipeline itself, with LangGraph's semantics
  (supersteps, reducers, joins, routes, the recursion limit) and the same trace: every
  production run (the server, the CLI, ``Memory``, the LangGraph store adapter) goes through
  it. A pipeline whose shape leaves what the runner models (:attr:`Pipeline.refusals`,
  ``gate.py``) runs through its compiled graph instead (docs/executor.md).

Why the shape is not a ``StateGraph`` itself: importing LangGraph imports ``langchain_core``'s
runnables and tracers and ``langsmith`` (~0.8 s on the 2-core machine), and a server's first
recall waited for that import. Described here, a pipeline runs without LangGraph loaded, and
LangGraph is imported by whoever asks for the compiled graph.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# LangGraph's own names for a graph's entry and exit (``langgraph.constants``), so that a
# pipeline's edges are a StateGraph's edges as they are.
START = "__start__"
END = "__end__"

Node = Callable[[Any, Any], Any]  # (state, runtime) -> the keys it changes
Route = Callable[[Any], Any]  # state -> the next node's name (or names)


@dataclass(eq=False)
class Pipeline:
    """Steps and edges over a TypedDict state, as a ``StateGraph`` has them."""

    name: str
    state_schema: type
    context_schema: type | None = None
    input_schema: type | None = None
    output_schema: type | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[tuple[str, str]] = field(default_factory=list)
    joins: list[tuple[tuple[str, ...], str]] = field(default_factory=list)  # target runs once all ran
    branches: dict[str, list[tuple[Route, tuple[str, ...]]]] = field(default_factory=dict)

    def add_node(self, name: str, node: Node) -> None:
        if name in self.nodes or name in (START, END):
            raise ValueError(f"pipeline {self.name}: node {name!r} is already defined or reserved")
        self.nodes[name] = node

    def add_edge(self, source: str | Sequence[str], target: str) -> None:
        """``source`` -> ``target``; a list of sources is a join: ``target`` runs once all ran."""
        if isinstance(source, str):
            self.edges.append((source, target))
        else:
            self.joins.append((tuple(source), target))

    def add_conditional_edges(self, source: str, route: Route, ends: Sequence[str]) -> None:
        """After ``source``, ``route(state)`` names the next node, one of ``ends``."""
        self.branches.setdefault(source, []).append((route, tuple(ends)))

    def compile(self, checkpointer: Any = None, interrupt_before: list[str] | None = None) -> Any:
        """The LangGraph graph of this pipeline (imports LangGraph)."""
        from langgraph.graph import StateGraph

        builder: Any = StateGraph(  # Any: the nodes' types are this class's, not StateGraph's overloads
            self.state_schema,
            context_schema=self.context_schema,
            input_schema=self.input_schema,
            output_schema=self.output_schema,
        )
        for name, node in self.nodes.items():
            builder.add_node(name, node)
        for source, target in self.edges:
            builder.add_edge(source, target)
        for sources, target in self.joins:
            builder.add_edge(list(sources), target)
        for source, routes in self.branches.items():
            for route, ends in routes:
                builder.add_conditional_edges(source, route, list(ends))
        return builder.compile(checkpointer=checkpointer, interrupt_before=interrupt_before, name=self.name)

    @functools.cached_property
    def graph(self) -> Any:
        """:meth:`compile` without a checkpointer, made once."""
        return self.compile()

    @functools.cached_property
    def refusals(self) -> tuple[str, ...]:
        """Why the direct runner would not run this pipeline as LangGraph does (``gate.py``);
        empty when it would. A pipeline is described in full before its first run."""
        from smriti.pipelines.gate import refusals

        return tuple(refusals(self))

    @property
    def runs_directly(self) -> bool:
        """The direct runner models everything this pipeline uses; otherwise it runs through
        its compiled LangGraph graph."""
        return not self.refusals
