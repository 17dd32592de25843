"""Recall's first stages: parse the query into cues, then traverse EncodedBy from those cues."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from smriti.nodes.scoring import cue_score, idf
from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState


def candidate_pool(limit: int) -> int:
    """How many hits each direct branch returns: generous, since fusion and hops re-rank them."""
    return max(4 * limit, 50)


@traced("parse_query")
def parse_query(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    from smriti.providers.analysis import parse_query as parse

    parsed = parse(runtime.context.llm, state["query"])
    data = parsed.model_dump()
    return {
        "parsed": data,
        "_notes": f"cues={data['cues']} entity_hints={data['entity_hints']} intent={data['intent']}",
    }


@traced("cue_traverse")
def cue_traverse(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Engrams encoded by the query's cues, scored by the idf-weighted share of cues matched."""
    store = runtime.context.store
    cues = list(dict.fromkeys(state.get("parsed", {}).get("cues", [])))
    if not cues:
        return {"_notes": "no cues in the query"}
    found = store.cue_engram_counts(cues)
    total = max(store.count_engrams(), 1)
    weights = {name: idf(found.get(name, 0), total) for name in cues}
    hits = store.engrams_by_cues(cues, candidate_pool(state["limit"]))
    scored = {
        hit.engram_id: {
            "cue_score": cue_score(hit.cues, cues, weights),
            "matched_cues": list(hit.cues),
            "origins": ["cue"],
        }
        for hit in hits
    }
    ranked = sorted(scored.items(), key=lambda kv: (-kv[1]["cue_score"], kv[0]))
    return {
        "hits": scored,
        "_candidates": [{"id": i, "score": h["cue_score"]} for i, h in ranked],
        "_notes": f"{len(found)} of {len(cues)} cues known; {len(hits)} engrams reached",
    }
