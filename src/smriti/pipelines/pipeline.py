"""A pipeline's shape (its steps, edges, routes and state schemas), written without LangGraph.

The store, recall and consolidate pipelines are built on :class:`Pipeline`, whose methods are
LangGraph's ``StateGraph``'s (``add_node``, ``add_edge``, ``add_conditional_edges``), and
:meth:`Pipeline.compile` builds the ``StateGraph`` it describes, node for node and edge for
edge. Each pipeline is described twice from one list of steps: step by step (one node per step
function: for stepping through it in a notebook, with a checkpointer and ``interrupt_before``),
and in stages (``stages.py``: consecutive steps folded into one node each), which is what every
production call runs, compiled once per process (:attr:`Pipeline.graph`). docs/executor.md
tells why.

Why the shape is not a ``StateGraph`` itself: importing LangGraph (with ``langchain_core``'s
runnables) takes ~0.5 s on the 2-core machine. Described here, the pipelines are imported
without it, and a server imports LangGraph in a background thread while its handshake, its
store's opening and its embedder's loading go on (``server/app.py``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

# LangGraph's own names for a graph's entry and exit (``langgraph.constants``), so that a
# pipeline's edges are a StateGraph's edges as they are.
START = "__start__"
END = "__end__"

_COMPILING = threading.Lock()

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
    # A coarse pipeline's stages (stage node -> its steps' names) and the step-by-step pipeline it
    # folds (``stages.coarsen``); empty and None for a step-by-step one.
    stages: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fine: Pipeline | None = None
    _compiled: Any = field(default=None, init=False, repr=False)

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

    def stage_pipeline(self, stage: str) -> Pipeline:
        """One stage's steps as a pipeline of their own, a chain (its ``compile()`` steps through
        them: ``stream``, ``interrupt_before``), started from the state the stage would get."""
        if self.fine is None or stage not in self.stages:
            raise KeyError(f"pipeline {self.name} has no stage {stage!r}; stages: {sorted(self.stages)}")
        steps = self.stages[stage]
        chain = Pipeline(f"{self.name}.{stage}", self.state_schema, context_schema=self.context_schema)
        for step in steps:
            chain.add_node(step, self.fine.nodes[step])
        chain.add_edge(START, steps[0])
        for before, after in itertools.pairwise(steps):
            chain.add_edge(before, after)
        chain.add_edge(steps[-1], END)
        return chain

    @property
    def compiled_graph(self) -> Any:
        """:attr:`graph` if it was compiled already, else None (compiles nothing)."""
        return self._compiled

    @property
    def graph(self) -> Any:
        """:meth:`compile` without a checkpointer, made once per pipeline object (the modules'
        pipelines are made once per process, so their graphs are compiled once), under a lock:
        a server's warm-up thread and its first call may ask at once."""
        compiled = self._compiled
        if compiled is None:
            with _COMPILING:
                if self._compiled is None:
                    self._compiled = self.compile()
                compiled = self._compiled
        return compiled
