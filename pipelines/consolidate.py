"""The consolidate graph: repair > decay > prune > strengthen > orphans > recluster > indexes >
embed_cues.

A straight chain: each step reads the store afresh, so the graph can be stopped between
any two steps (``interrupt_before`` with a checkpointer) and resumed later. The run's
``report`` collects one or more keys per step; ``trace`` has one entry per step that ran.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from langgraph.graph import END, START, StateGraph

from smriti.nodes.cluster import recluster
from smriti.nodes.decay import decay, orphans, prune, strengthen
from smriti.nodes.index import embed_cues, manage_indexes
from smriti.nodes.repair import repair
from smriti.nodes.state import ConsolidateInput, ConsolidateOutput, ConsolidateState, MemoryContext

STEPS = ["repair", "decay", "prune", "strengthen", "orphans", "recluster", "indexes", "embed_cues"]
_NODES = [repair, decay, prune, strengthen, orphans, recluster, manage_indexes, embed_cues]


def build_consolidate_graph(checkpointer: Any = None, interrupt_before: list[str] | None = None):
    """Compile the consolidate graph; pass a checkpointer and ``interrupt_before`` to step through it.

    Args:
        checkpointer: a LangGraph checkpointer (e.g. ``MemorySaver()``); needed to interrupt.
        interrupt_before: node names (from :data:`STEPS`) to pause before.

    Raises:
        ValueError: an unknown node name in ``interrupt_before``.
    """
    unknown = sorted(set(interrupt_before or []) - set(STEPS))
    if unknown:
        raise ValueError(f"unknown consolidate step(s) {unknown}; steps are {STEPS}")
    builder = StateGraph(
        ConsolidateState,
        context_schema=MemoryContext,
        input_schema=ConsolidateInput,
        output_schema=ConsolidateOutput,
    )
    for name, node in zip(STEPS, _NODES, strict=True):
        builder.add_node(name, node)
    builder.add_edge(START, STEPS[0])
    for before, after in pairwise(STEPS):
        builder.add_edge(before, after)
    builder.add_edge(STEPS[-1], END)
    return builder.compile(
        checkpointer=checkpointer, interrupt_before=interrupt_before, name="smriti_consolidate"
    )


consolidate_graph = build_consolidate_graph()
