"""The store graph: validate_store > analyze > embed > find_duplicate > write > link_cues >
supersede > queue_analysis > associate > inherit_cluster > index_check. A near-duplicate ends the
run after ``find_duplicate`` with the existing id and ``deduplicated: true``. Each node is named
after its function, and so is its trace entry.

validate_store to write are in ``nodes/encode.py``,
link_cues to index_check in ``nodes/link.py``, supersede in ``nodes/supersede.py`` (corrections)
and queue_analysis in ``nodes/enrich.py`` (the LLM's analysis, run later from a durable queue);
the state is ``nodes/state.py``'s StoreState.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from smriti.nodes.encode import analyze, embed, find_duplicate, validate_store, write
from smriti.nodes.enrich import queue_analysis
from smriti.nodes.link import associate, index_check, inherit_cluster, link_cues
from smriti.nodes.state import MemoryContext, StoreInput, StoreOutput, StoreState
from smriti.nodes.supersede import supersede
from smriti.pipelines.pipeline import END, START, Pipeline
from smriti.pipelines.stages import coarsen

# The nodes in order; each is named after its function.
_NODES = [
    validate_store,
    analyze,
    embed,
    find_duplicate,
    write,
    link_cues,
    supersede,
    queue_analysis,
    associate,
    inherit_cluster,
    index_check,
]
STEPS = [node.__name__ for node in _NODES]


def _after_find_duplicate(state: StoreState) -> str:
    return END if state.get("duplicate_of") else "write"


def build_store_pipeline() -> Pipeline:
    """The store pipeline step by step (one node per step)."""
    builder = Pipeline(
        "smriti_store_steps",
        StoreState,
        context_schema=MemoryContext,
        input_schema=StoreInput,
        output_schema=StoreOutput,
    )
    for node in _NODES:
        builder.add_node(node.__name__, node)
    builder.add_edge(START, STEPS[0])
    for before, after in pairwise(STEPS[:4]):
        builder.add_edge(before, after)
    builder.add_conditional_edges("find_duplicate", _after_find_duplicate, ["write", END])
    for before, after in pairwise(STEPS[4:]):
        builder.add_edge(before, after)
    builder.add_edge(STEPS[-1], END)
    return builder


# The stages production runs (stages.py): encode the text (up to the near-duplicate check,
# which may end the run), write it, link it.
STAGES: dict[str, list[str]] = {
    "encode": STEPS[:4],
    "write": STEPS[4:8],
    "link": STEPS[8:],
}


def build_store_stages() -> Pipeline:
    """The store pipeline in :data:`STAGES`, what production runs."""
    return coarsen(build_store_pipeline(), "smriti_store", STAGES)


def build_store_graph(checkpointer: Any = None, interrupt_before: list[str] | None = None) -> Any:
    """The store pipeline step by step, compiled into a LangGraph graph (imports LangGraph); pass
    a checkpointer and ``interrupt_before`` (step names) to step through it."""
    return build_store_pipeline().compile(checkpointer, interrupt_before)


store_steps = build_store_pipeline()  # one node per step (docs, notebooks)
store_pipeline = coarsen(store_steps, "smriti_store", STAGES)  # production's: in stages


def __getattr__(name: str) -> Any:
    # ``store_graph``, production's compiled graph, is made at first use (LangGraph's import).
    if name == "store_graph":
        return store_pipeline.graph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
