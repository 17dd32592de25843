"""The consolidate graph: repair > decay > prune > strengthen > orphans > recluster >
manage_indexes. Each node is named after its function, and so is its trace entry.

Why not ``cdlib`` (named by the design card for community detection): the Leiden run needs
``leidenalg`` on an ``igraph`` graph, which Smriti already uses directly (nodes/leiden.py), and
the quality measure its report gives, modularity, is igraph's own (``Graph.modularity``). cdlib
would add its measures (conductance and the like) at the price of 26 more packages in Smriti's
environment, among them scipy, scikit-learn, plotly, seaborn and PuLP (``pip install --dry-run
cdlib``, 2026-12), for a report line; the design card's other measures are one igraph call away if
wanted.

A straight chain: each step reads the store afresh, so the graph can be stopped between
any two steps (``interrupt_before`` with a checkpointer) and resumed later. The run's
``report`` collects one or more keys per step; ``trace`` has one entry per step that ran.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from smriti.nodes.cluster import recluster
from smriti.nodes.decay import decay, orphans, prune, strengthen
from smriti.nodes.index import manage_indexes
from smriti.nodes.repair import repair
from smriti.nodes.state import ConsolidateInput, ConsolidateOutput, ConsolidateState, MemoryContext
from smriti.pipelines.pipeline import END, START, Pipeline
from smriti.pipelines.stages import coarsen

_NODES = [repair, decay, prune, strengthen, orphans, recluster, manage_indexes]
STEPS = [node.__name__ for node in _NODES]


# The stages production runs (stages.py): repair, the decay pass, reclustering, the indexes.
STAGES: dict[str, list[str]] = {
    "repair": ["repair"],
    "decay": ["decay", "prune", "strengthen", "orphans"],
    "recluster": ["recluster"],
    "indexes": ["manage_indexes"],
}


def build_consolidate_pipeline() -> Pipeline:
    """The consolidate pipeline step by step: a chain of :data:`STEPS`."""
    builder = Pipeline(
        "smriti_consolidate_steps",
        ConsolidateState,
        context_schema=MemoryContext,
        input_schema=ConsolidateInput,
        output_schema=ConsolidateOutput,
    )
    for node in _NODES:
        builder.add_node(node.__name__, node)
    builder.add_edge(START, STEPS[0])
    for before, after in pairwise(STEPS):
        builder.add_edge(before, after)
    builder.add_edge(STEPS[-1], END)
    return builder


def build_consolidate_graph(checkpointer: Any = None, interrupt_before: list[str] | None = None) -> Any:
    """Compile the consolidate graph step by step (imports LangGraph); pass a checkpointer and
    ``interrupt_before`` to step through it.

    Args:
        checkpointer: a LangGraph checkpointer (e.g. ``MemorySaver()``); needed to interrupt.
        interrupt_before: node names (from :data:`STEPS`) to pause before.

    Raises:
        ValueError: an unknown node name in ``interrupt_before``.
    """
    unknown = sorted(set(interrupt_before or []) - set(STEPS))
    if unknown:
        raise ValueError(f"unknown consolidate step(s) {unknown}; steps are {STEPS}")
    return consolidate_steps.compile(checkpointer, interrupt_before)


def build_consolidate_stages() -> Pipeline:
    """The consolidate pipeline in :data:`STAGES`, what production runs."""
    return coarsen(build_consolidate_pipeline(), "smriti_consolidate", STAGES)


consolidate_steps = build_consolidate_pipeline()  # one node per step (docs, notebooks)
consolidate_pipeline = coarsen(consolidate_steps, "smriti_consolidate", STAGES)  # production's: in stages


def __getattr__(name: str) -> Any:
    # ``consolidate_graph``, production's compiled graph, is made at first use (LangGraph's import).
    if name == "consolidate_graph":
        return consolidate_pipeline.graph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
