"""TypedDict states of the three graphs, with separate input and output schemas.

Every node appends one :class:`TraceEntry` to ``trace`` (an ``operator.add`` channel), so
a finished run, a streamed run or an interrupted one can be inspected step by step.
Channels written by parallel branches of the recall graph use merging reducers.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, TypedDict


class TraceEntry(TypedDict):
    node: str
    ms: float
    candidates: list[dict[str, Any]]  # [{"id": ..., "score": ...}], best first, capped
    notes: str


def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for channels that parallel branches fill in side by side."""
    merged = dict(left or {})
    merged.update(right or {})
    return merged


def merge_hits(
    left: dict[str, dict[str, Any]] | None, right: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Reducer for recall hits: branches may find the same engram, so merge per id.

    Scores are kept per signal (each branch writes its own keys); ``origins`` lists are joined.
    """
    merged = {key: dict(value) for key, value in (left or {}).items()}
    for engram_id, hit in (right or {}).items():
        current = merged.setdefault(engram_id, {})
        origins = list(current.get("origins", []))
        for key, value in hit.items():
            if key == "origins":
                origins.extend(o for o in value if o not in origins)
            else:
                current[key] = value
        current["origins"] = origins
    return merged


# ----------------------------------------------------------------------------- store
class StoreInput(TypedDict):
    content: str
    importance: NotRequired[float]
    tags: NotRequired[str]
    source: NotRequired[str]
    created_at: NotRequired[str]  # ISO time of the memory (imports, benchmarks); default now


class StoreOutput(TypedDict):
    id: str
    memory_type: str
    cues: list[dict[str, str]]  # [{"name", "type"}]
    cluster_id: int
    deduplicated: bool
    trace: list[TraceEntry]


class StoreState(StoreInput, total=False):
    analysis: dict[str, Any]  # summary, memory_type, cues, relations, analyzer
    embedding: list[float]
    duplicate_of: str | None
    similar: list[dict[str, Any]]  # [{"id", "score"}] nearest existing engrams
    id: str
    links: dict[str, float]  # associated engram id -> strength, as written by associate
    memory_type: str
    cues: list[dict[str, str]]
    cluster_id: int
    deduplicated: bool
    trace: Annotated[list[TraceEntry], operator.add]


# ----------------------------------------------------------------------------- recall
class RecallInput(TypedDict):
    query: NotRequired[str]
    limit: NotRequired[int]
    mode: NotRequired[str]  # recall | search | list
    memory_type: NotRequired[str | None]
    explain: NotRequired[bool]


class RecallOutput(TypedDict):
    result: dict[str, Any]  # the unified result format (DESIGN.md)
    trace: list[TraceEntry]


class RecallState(RecallInput, total=False):
    parsed: dict[str, Any]  # cues, entity_hints, intent, keywords
    query_embedding: list[float]
    # id -> {"similarity", "cue_score", "matched_cues", "text_score", "origins"}: the branches
    # (cue traversal, vector, full text) write side by side and are merged per id.
    hits: Annotated[dict[str, dict[str, Any]], merge_hits]
    candidates: list[dict[str, Any]]  # scored candidate dicts after expansion
    branch_scores: dict[str, list[float]]  # per signal, the direct hits' scores best first (rank fusion)
    seed_cluster: int
    results: list[dict[str, Any]]
    result: dict[str, Any]
    trace: Annotated[list[TraceEntry], operator.add]


# ----------------------------------------------------------------------------- consolidate
class ConsolidateInput(TypedDict):
    now: NotRequired[str]  # ISO time to consolidate at (simulations); default the context clock


class ConsolidateOutput(TypedDict):
    report: dict[str, Any]
    trace: list[TraceEntry]


class ConsolidateState(ConsolidateInput, total=False):
    report: Annotated[dict[str, Any], merge_dicts]
    trace: Annotated[list[TraceEntry], operator.add]
