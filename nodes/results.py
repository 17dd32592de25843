"""Candidate records and the unified result format (DESIGN.md, Memory Fabric).

A candidate is a plain dict that travels through recall: the engram's fields, its cues,
its per-signal scores and, once ranked, ``score`` and ``components``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from smriti.stores.base import Cue, Engram


def engram_candidate(
    engram: Engram, cues: Sequence[Cue], hit: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A candidate dict for ``engram`` carrying the signals found for it so far."""
    hit = hit or {}
    return {
        "id": engram.id,
        "text": engram.content,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "importance": engram.importance,
        "access_count": engram.access_count,
        "created_at": engram.created_at,
        "last_accessed_at": engram.last_accessed_at,
        "decay_factor": engram.decay_factor,
        "embedding": engram.embedding,
        "source": engram.source,
        "tags": engram.tags,
        "cluster_id": engram.cluster_id,
        "entities": sorted(c.name for c in cues),
        "entity_types": {c.name: c.cue_type for c in cues},
        "similarity": float(hit.get("similarity", 0.0)),
        "text_score": float(hit.get("text_score", 0.0)),
        "cue_score": float(hit.get("cue_score", 0.0)),
        "matched_cues": list(hit.get("matched_cues", [])),
        "origins": list(hit.get("origins", [])),
        "hops": 0,
        "via": None,
    }


def format_item(candidate: Mapping[str, Any], explain: bool) -> dict[str, Any]:
    """One result: {id, text, score, source, timestamp, entities, graph_relations, memory_type,
    cluster_id, metadata} (+ ``components`` with ``explain``)."""
    item = {
        "id": candidate["id"],
        "text": candidate["text"],
        "score": round(float(candidate.get("score", 0.0)), 6),
        "source": candidate.get("source") or "memory",
        "timestamp": candidate["created_at"].isoformat(),
        "entities": list(candidate.get("entities", [])),
        "graph_relations": list(candidate.get("graph_relations", [])),
        "memory_type": candidate["memory_type"],
        "cluster_id": candidate["cluster_id"],
        "metadata": {
            "summary": candidate.get("summary", ""),
            "tags": candidate.get("tags", ""),
            "importance": candidate["importance"],
            "access_count": candidate["access_count"],
            "decay_factor": round(candidate["decay_factor"], 6),
            "last_accessed_at": candidate["last_accessed_at"].isoformat(),
            "retrieved_by": list(candidate.get("origins", [])),
            "hops": candidate.get("hops", 0),
            "via": candidate.get("via"),
            "matched_cues": list(candidate.get("matched_cues", [])),
            "cross_validated": bool(candidate.get("cross_validated", False)),
            "merged_ids": list(candidate.get("merged_ids", [])),
            "boosted": bool(candidate.get("boosted", False)),
        },
    }
    if explain:
        item["components"] = {
            "similarity": round(candidate.get("similarity", 0.0), 6),
            "text_score": round(candidate.get("text_score", 0.0), 6),
            "cue_score": round(candidate.get("cue_score", 0.0), 6),
            "relevance": round(candidate.get("relevance", 0.0), 6),
            # each branch's rank, as fused into relevance
            **{f"rank_{branch}": rank for branch, rank in candidate.get("ranks", {}).items()},
            **{k: round(v, 6) for k, v in candidate.get("components", {}).items()},
        }
    return item


def unified_result(
    query: str, mode: str, candidates: Sequence[Mapping[str, Any]], explain: bool
) -> dict[str, Any]:
    """{query, mode, total_results, sources, results}; ``sources`` counts results by retrieval path."""
    sources = Counter(origin for c in candidates for origin in (c.get("origins") or [mode]))
    return {
        "query": query,
        "mode": mode,
        "total_results": len(candidates),
        "sources": dict(sorted(sources.items())),
        "results": [format_item(c, explain) for c in candidates],
    }
