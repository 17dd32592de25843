"""The recall graph (EcphoryRAG with Memory Fabric stages).

```
validate ─┬─ list ──> list_recent ──────────────────────────────────────────────> format
          ├─ search > vector_only > gather ─────────> current_only > score > ... > format
          └─ recall > parse_query > recognise ┬ cue_traverse ─┐
                                              ├ vector_search ┼> gather > activate
                                              └ fulltext ─────┘
    activate > conversation_context
    conversation_context > multi_hop > episode_context > relation_traverse > bridge > focus
    focus > rerank > current_only
    current_only > seed_cluster > shortlist > dedupe > cross_reference > score
    score > demote_superseded > reinforce > format
```
(search mode: gather > current_only > score.)
The three direct branches run in parallel and join before expansion. Input is
:class:`RecallInput`, output :class:`RecallOutput` (``result`` in the unified format and
the ``trace``).

Follow one recall by reading these modules top to bottom, in this order: each holds a run of
consecutive steps, so no module is opened twice (``tests/test_recall_layout.py`` checks it).

1. ``nodes/state.py``: the RecallState channels, the typed :class:`Candidate`, the
   MemoryContext (with its scoring profile) and the trace decorator.
2. ``nodes/search.py``: validate (``validators.check_recall``, unless the caller checked the
   request where it entered), list_recent, parse_query, recognise (the query's cues in the graph:
   idf, hubs, aliases from ``stores/aliases.py``), cue_traverse, vector_search (also
   vector_only), fulltext_search, gather (rank fusion into candidates; the formulas of fusion
   and of the final score are in ``nodes/scoring.py``, the helpers that load and score
   candidates for every step that adds some in ``nodes/candidates.py``).
3. ``nodes/associate.py``: activate (spreading activation, off by default; its engine is
   ``nodes/pagerank.py``), conversation_context, multi_hop.
4. ``nodes/relations.py``: relation_traverse (the Memory Fabric traversal entity -> relation ->
   entity, with paths), bridge (from the entities the best candidates name to the memories about
   them).
5. ``nodes/refine.py``: focus (entity hints, intent, time window), rerank (the optional
   cross-encoder), current_only (superseded memories hidden, or kept with
   ``include_superseded``), seed_cluster, shortlist (the profile's bounds), dedupe,
   cross_reference.
6. ``nodes/rank.py``: score (the profile's score), demote_superseded (ranked below current
   facts), reinforce, format (the unified result).
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
    vector_search,
)
from smriti.nodes.state import MemoryContext, RecallInput, RecallOutput, RecallState
from smriti.pipelines.pipeline import END, START, Pipeline

DIRECT_BRANCHES = ["cue_traverse", "vector_search", "fulltext_search"]


def _route_mode(state: RecallState) -> str:
    return {"list": "list_recent", "search": "vector_only"}.get(state["mode"], "parse_query")


def _after_gather(state: RecallState) -> str:
    return "current_only" if state["mode"] == "search" else "activate"


def _after_current_only(state: RecallState) -> str:
    return "score" if state["mode"] == "search" else "seed_cluster"


def build_recall_pipeline(*, reinforce: bool = True) -> Pipeline:
    """The recall pipeline. ``reinforce=False`` leaves out the reinforce step, for callers that
    keep only some of the results and reinforce those themselves (the LangGraph store pages and
    filters them)."""
    builder = Pipeline(
        "smriti_recall",
        RecallState,
        context_schema=MemoryContext,
        input_schema=RecallInput,
        output_schema=RecallOutput,
    )
    builder.add_node("validate", validate_recall)
    builder.add_node("list_recent", list_recent)
    builder.add_node("vector_only", vector_search)
    builder.add_node("parse_query", extract_query_cues)
    builder.add_node("recognise", recognise)
    builder.add_node("cue_traverse", cue_traverse)
    builder.add_node("vector_search", vector_search)
    builder.add_node("fulltext_search", fulltext_search)
    builder.add_node("gather", gather)
    builder.add_node("activate", activate)
    builder.add_node("conversation_context", conversation_context)
    builder.add_node("multi_hop", multi_hop)
    builder.add_node("episode_context", episode_context)
    builder.add_node("relation_traverse", relation_traverse)
    builder.add_node("bridge", bridge)
    builder.add_node("focus", focus)
    builder.add_node("seed_cluster", find_seed_cluster)
    builder.add_node("shortlist", shortlist_candidates)
    builder.add_node("dedupe", merge_duplicates)
    builder.add_node("cross_reference", cross_reference)
    builder.add_node("rerank", rerank)
    builder.add_node("current_only", current_only)
    builder.add_node("score", score)
    builder.add_node("demote_superseded", demote_superseded)
    if reinforce:
        builder.add_node("reinforce", reinforce_results)
    builder.add_node("format", format_result)

    builder.add_edge(START, "validate")
    builder.add_conditional_edges("validate", _route_mode, ["list_recent", "vector_only", "parse_query"])
    builder.add_edge("list_recent", "format")
    builder.add_edge("vector_only", "gather")
    builder.add_edge("parse_query", "recognise")
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
    builder.add_conditional_edges("current_only", _after_current_only, ["seed_cluster", "score"])
    builder.add_edge("seed_cluster", "shortlist")
    builder.add_edge("shortlist", "dedupe")
    builder.add_edge("dedupe", "cross_reference")
    builder.add_edge("cross_reference", "score")
    builder.add_edge("score", "demote_superseded")
    if reinforce:
        builder.add_edge("demote_superseded", "reinforce")
        builder.add_edge("reinforce", "format")
    else:
        builder.add_edge("demote_superseded", "format")
    builder.add_edge("format", END)
    return builder


def build_recall_graph(
    checkpointer: Any = None, interrupt_before: list[str] | None = None, *, reinforce: bool = True
) -> Any:
    """The recall pipeline compiled into a LangGraph graph (imports LangGraph); pass a
    checkpointer and ``interrupt_before`` to step through it."""
    return build_recall_pipeline(reinforce=reinforce).compile(checkpointer, interrupt_before)


recall_pipeline = build_recall_pipeline()


def __getattr__(name: str) -> Any:
    # ``recall_graph``, the compiled graph, is made at first use: LangGraph's import is ~0.8 s.
    if name == "recall_graph":
        return recall_pipeline.graph
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
