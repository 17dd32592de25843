"""The recall graph (EcphoryRAG with Memory Fabric stages).

```
validate_recall ─┬─ list ──> list_recent ─────────────────────────────────────────> format_result
                 ├─ search > vector_only > gather ──> current_only > score > ... > format_result
                 └─ recall > extract_query_cues > recognise ┬ cue_traverse ───┐
                                                            ├ vector_search ──┼> gather > activate
                                                            └ fulltext_search ┘
    activate > conversation_context
    conversation_context > multi_hop > episode_context > relation_traverse > bridge > focus
    focus > rerank > current_only
    current_only > find_seed_cluster > shortlist_candidates > merge_duplicates > cross_reference
    cross_reference > score > demote_superseded > reinforce > format_result
```
Each node is named after its function, and so is its trace entry.
(search mode: gather > current_only > score.)
The three direct branches run in parallel and join before expansion. Input is
:class:`RecallInput`, output :class:`RecallOutput` (``result`` in the unified format and
the ``trace``).

Follow one recall by reading these modules top to bottom, in this order: each holds a run of
consecutive steps, so no module is opened twice (``tests/test_recall_layout.py`` checks it).

1. ``nodes/state.py``: the RecallState channels, the typed :class:`Candidate`, the
   MemoryContext (with its scoring profile) and the trace decorator.
2. ``nodes/search.py``: validate_recall (``validators.check_recall``, unless the caller checked
   the request where it entered), list_recent, extract_query_cues, recognise (the query's cues in
   the graph: idf, hubs), cue_traverse, vector_search and
   vector_only, fulltext_search, gather (rank fusion into candidates; the formulas of fusion
   and of the final score are in ``nodes/scoring.py``, the helpers that load and score
   candidates for every step that adds some in ``nodes/candidates.py``).
3. ``nodes/associate.py``: activate (spreading activation, off by default; its engine is
   ``nodes/pagerank.py``), conversation_context, multi_hop.
4. ``nodes/relations.py``: relation_traverse (the Memory Fabric traversal entity -> relation ->
   entity, with paths), bridge (from the entities the best candidates name to the memories about
   them).
5. ``nodes/refine.py``: focus (entity hints, intent, time window), rerank (the optional
   cross-encoder), current_only (superseded memories hidden, or kept with
   ``include_superseded``), find_seed_cluster, shortlist_candidates (the profile's bounds),
   merge_duplicates, cross_reference.
6. ``nodes/rank.py``: score (the profile's score), demote_superseded (ranked below current
   facts), reinforce, format_result (the unified result).
"""

from __future__ import annotations

from typing import Any

from smriti.nodes.associate import activate, conversation_context, episode_context, multi_hop
from smriti.nodes.rank import demote_superseded, format_result, score
from smriti.nodes.rank import reinforce as reinforce_results
from smriti.nodes.refine import (
    cross_reference,
    current_only,
    find_seed_cluster,
    focus,
    merge_duplicates,
    rerank,
    shortlist_candidates,
)
from smriti.nodes.relations import bridge, relation_traverse
from smriti.nodes.search import (
    cue_traverse,
    extract_query_cues,
    fulltext_search,
    gather,
    list_recent,
    recognise,
    validate_recall,
    vector_only,
    vector_search,
)
from smriti.nodes.state import MemoryContext, RecallInput, RecallOutput, RecallState
from smriti.pipelines.pipeline import END, START, Pipeline
from smriti.pipelines.stages import coarsen

DIRECT_BRANCHES = ["cue_traverse", "vector_search", "fulltext_search"]


def _route_mode(state: RecallState) -> str:
    return {"list": "list_recent", "search": "vector_only"}.get(state["mode"], "extract_query_cues")


def _after_gather(state: RecallState) -> str:
    return "current_only" if state["mode"] == "search" else "activate"


def _after_current_only(state: RecallState) -> str:
    return "score" if state["mode"] == "search" else "find_seed_cluster"


def build_recall_pipeline(*, reinforce: bool = True) -> Pipeline:
    """The recall pipeline step by step (one node per step). ``reinforce=False`` leaves out the
    reinforce step, for callers that keep only some of the results and reinforce those
    themselves (the LangGraph store pages and filters them)."""
    builder = Pipeline(
        "smriti_recall_steps",
        RecallState,
        context_schema=MemoryContext,
        input_schema=RecallInput,
        output_schema=RecallOutput,
    )
    # Each node is named after its function (as its trace entry is): one name in three places.
    nodes = [
        validate_recall,
        list_recent,
        vector_only,
        extract_query_cues,
        recognise,
        cue_traverse,
        vector_search,
        fulltext_search,
        gather,
        activate,
        conversation_context,
        multi_hop,
        episode_context,
        relation_traverse,
        bridge,
        focus,
        find_seed_cluster,
        shortlist_candidates,
        merge_duplicates,
        cross_reference,
        rerank,
        current_only,
        score,
        demote_superseded,
        *([reinforce_results] if reinforce else []),
        format_result,
    ]
    for node in nodes:
        builder.add_node(node.__name__, node)

    builder.add_edge(START, "validate_recall")
    builder.add_conditional_edges(
        "validate_recall", _route_mode, ["list_recent", "vector_only", "extract_query_cues"]
    )
    builder.add_edge("list_recent", "format_result")
    builder.add_edge("vector_only", "gather")
    builder.add_edge("extract_query_cues", "recognise")
    for branch in DIRECT_BRANCHES:
        builder.add_edge("recognise", branch)
    builder.add_edge(DIRECT_BRANCHES, "gather")
    builder.add_conditional_edges("gather", _after_gather, ["current_only", "activate"])
    builder.add_edge("activate", "conversation_context")
    builder.add_edge("conversation_context", "multi_hop")
    builder.add_edge("multi_hop", "episode_context")
    builder.add_edge("episode_context", "relation_traverse")
    builder.add_edge("relation_traverse", "bridge")
    builder.add_edge("bridge", "focus")
    builder.add_edge("focus", "rerank")
    builder.add_edge("rerank", "current_only")
    builder.add_conditional_edges("current_only", _after_current_only, ["find_seed_cluster", "score"])
    builder.add_edge("find_seed_cluster", "shortlist_candidates")
    builder.add_edge("shortlist_candidates", "merge_duplicates")
    builder.add_edge("merge_duplicates", "cross_reference")
    builder.add_edge("cross_reference", "score")
    builder.add_edge("score", "demote_superseded")
    if reinforce:
        builder.add_edge("demote_superseded", "reinforce")
        builder.add_edge("reinforce", "format_result")
    else:
        builder.add_edge("demote_superseded", "format_result")
    builder.add_edge("format_result", END)
    return builder


# The stages production runs (stages.py): the design card's grain. A stage's steps run in order
# in one LangGraph node; the three direct branches stay nodes of their own, in parallel.
STAGES: dict[str, list[str]] = {
    "validate": ["validate_recall"],
    "list": ["list_recent", "format_result"],
    "vector_only": ["vector_only"],
    "parse": ["extract_query_cues", "recognise"],
    **{branch: [branch] for branch in DIRECT_BRANCHES},
    "gather": ["gather"],
    "expand": [
        "activate",
        "conversation_context",
        "multi_hop",
        "episode_context",
        "relation_traverse",
        "bridge",
        "focus",
        "rerank",
    ],
    "current_only": ["current_only"],
    "refine": ["find_seed_cluster", "shortlist_candidates", "merge_duplicates", "cross_reference"],
    "rank": ["score", "demote_superseded", "reinforce", "format_result"],
}


def build_recall_stages(*, reinforce: bool = True) -> Pipeline:
    """The recall pipeline in :data:`STAGES`, what production runs (its ``fine`` is
    :func:`build_recall_pipeline`'s)."""
    stages = dict(STAGES)
    if not reinforce:
        stages["rank"] = [step for step in STAGES["rank"] if step != "reinforce"]
    return coarsen(build_recall_pipeline(reinforce=reinforce), "smriti_recall", stages)


def build_recall_graph(
    checkpointer: Any = None, interrupt_before: list[str] | None = None, *, reinforce: bool = True
) -> Any:
    """The recall pipeline step by step, compiled into a LangGraph graph (imports LangGraph);
    pass a checkpointer and ``interrupt_before`` (step names) to step through it."""
    return build_recall_pipeline(reinforce=reinforce).compile(checkpointer, interrupt_before)


recall_steps = build_recall_pipeline()  # one node per step (docs, notebooks)
recall_pipeline = coarsen(recall_steps, "smriti_recall", STAGES)  # production's: in stages


def __getattr__(name: str) -> Any:
    # ``recall_graph``, production's compiled graph, is made at first use (LangGraph's import).
    if name == "recall_graph":
        return recall_pipeline.graph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
