"""Consolidation's first step: repair memories that older versions left half written.

Before stores were atomic, a process killed during a store could leave an engram without its
cue links (2 in 50 kill cycles of the hardening campaign): found by vector and text search,
never through the graph, and nothing repaired it. This step finds engrams linked to no cue
and links them as the store pipeline would have, from the offline heuristic analysis of their
content (no model call: repair must work offline and cost little): cues and tags, CoOccurs
between the leading cues, RelatesTo facts.

An engram whose content and tags yield no cue at all cannot be repaired; it is counted as
``unrepairable`` and looked at again on the next run (cheap: one query finds them).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from smriti.nodes.link import write_links
from smriti.nodes.state import ConsolidateState, MemoryContext, traced
from smriti.providers.heuristic import analyze_offline

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

logger = logging.getLogger(__name__)


@traced
def repair(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Link the cues of engrams that have none, from the offline analysis of their content."""
    context = runtime.context
    store = context.store
    repaired: list[str] = []
    unrepairable = 0
    for engram_id in store.uncued_engram_ids():
        # Under the write lock, in one transaction, and checked again: on a store without
        # transactions an engram being stored right now has no cues yet, and its store holds the
        # lock until they are linked (nothing to repair then).
        with context.write_lock, store.transaction():
            if store.cues_of([engram_id]).get(engram_id):
                continue
            engram = store.get_engram(engram_id)
            if engram is None:  # forgotten meanwhile
                continue
            cues, _ = write_links(store, engram_id, analyze_offline(engram.content).model_dump(), engram.tags)
        if cues:
            repaired.append(engram_id)
        else:
            unrepairable += 1
    if repaired:
        logger.info("repaired %d memories of %s that had no cues", len(repaired), store.user)
    return {
        "report": {"repaired": len(repaired), "unrepairable": unrepairable},
        "_candidates": [{"id": engram_id, "score": 1.0} for engram_id in repaired],
        "_notes": f"{len(repaired)} re-linked to their cues, {unrepairable} without any cue",
    }
