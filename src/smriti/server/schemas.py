"""What the MCP tools return (output schemas) and what they tell the calling model.

The TypedDicts become each tool's ``outputSchema`` (the SDK derives it from the return
annotation) and validate ``structured_content``; the descriptions are written for the
model that decides when to remember, recall or forget.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from smriti.validators import MAX_QUERY_CHARS, MAX_SOURCE_CHARS, MAX_TAG_CHARS, MAX_TAGS

Action = Literal["forget", "sync", "consolidate", "stats"]


# ----------------------------------------------------------------------------- output schemas
class Cue(TypedDict):
    name: str
    type: str


class StoreResult(TypedDict):
    """What ``smriti_store`` did: the engram's id, its type, cues and cluster."""

    id: str
    memory_type: str
    cues: list[Cue]
    cluster_id: int
    deduplicated: bool
    superseded: list[str]  # older memories this one corrects (marked superseded_by it)
    analysis_queued: bool  # the LLM's analysis runs in the background and replaces the cues
    trace: NotRequired[list[TraceStep]]  # with explain: what each store step did


class TraceStep(TypedDict):
    node: str
    ms: float
    candidates: list[dict[str, Any]]
    notes: str


class RecallItem(TypedDict):
    id: str
    text: str
    score: float
    source: str
    timestamp: str
    entities: list[str]
    graph_relations: list[dict[str, Any]]
    memory_type: str
    cluster_id: int
    metadata: dict[str, Any]
    superseded_by: NotRequired[str]  # the newer memory that corrects this one (include_superseded)
    components: NotRequired[dict[str, float]]


class ParsedQuery(TypedDict):
    """How recall read the query (Memory Fabric step 1)."""

    query: str  # the cleaned query: its words without stop words
    entity_hints: list[str]  # the entities it names
    intent: str  # decision, procedure, event, person, fact or general


class RecallResult(TypedDict):
    """The unified Memory Fabric result format (+ ``trace`` with ``explain``)."""

    query: str
    mode: NotRequired[str]
    total_results: int
    sources: dict[str, int]  # results by their source, each once
    retrieval_paths: dict[str, int]  # results found by each retrieval path (cue, fulltext, vector, ...)
    parsed: NotRequired[ParsedQuery]  # mode recall: the parsed query
    results: list[RecallItem]
    trace: NotRequired[list[TraceStep]]


class ManageResult(TypedDict):
    """What ``smriti_manage`` did: a one-line ``message`` and the details."""

    action: str
    message: str
    details: dict[str, Any]
    trace: NotRequired[list[TraceStep]]  # consolidate with explain: what each step did


# ----------------------------------------------------------------------------- descriptions
INSTRUCTIONS = """Smriti is your long-term memory across conversations: a graph of memories
linked by the people, projects, tools and ideas they mention. Recall before answering
questions that may depend on earlier sessions (preferences, decisions, facts about the user
or project); store durable facts, decisions and lessons as they come up; forget what the
user asks you to forget or what turns out to be wrong."""

STORE_DESCRIPTION = f"""Remember something for future conversations ("remember this").

Use it for durable information: facts about the user or project, preferences, decisions and
their reasons, how-tos that worked, lessons from mistakes. Write one self-contained memory
per call in plain sentences (name the people, tools and projects involved; avoid "it"/"this"),
not a transcript. Do not store secrets or throwaway chatter.

Args:
  content: the memory text (required, non-empty; at most the schema's maxLength characters,
    MAX_CONTENT_CHARS on the server, 20,000 by default).
  importance: 0.0-1.0, how much it matters later (default 0.5; use 0.8+ for things that must
    never be lost, such as explicit user instructions; important memories are never pruned).
  tags: optional comma-separated labels, e.g. "project-x,database" (at most {MAX_TAGS} tags of at
    most {MAX_TAG_CHARS} characters each).
  source: optional origin label, e.g. "meeting-notes" or "user" (at most {MAX_SOURCE_CHARS} characters).
  supersedes: optional id of an older memory this one corrects (e.g. a changed preference);
    the older one is kept but marked superseded, and recall returns the new one. Corrections
    of the same subject and relation are also detected on their own.

Returns the memory id, its detected type (episodic, semantic or procedural), the cues
(entities and keywords) it was linked through, its topic cluster, and whether it merged
into an almost identical existing memory (deduplicated) instead of creating a copy, the
older memories it superseded, and whether a model's analysis of it is queued."""

RECALL_DESCRIPTION = f"""Look up what you remember ("what do I know about X?").

Call it at the start of a task and whenever earlier context could matter, before asking the
user to repeat themselves.

Modes:
  recall (default): the deep associative search. Entities and keywords in the query act as
    cues, the memories they encode are found through the graph, combined with semantic
    similarity, expanded over associated memories (multi-hop) and ranked by relevance,
    recency, importance and strength. Best for natural-language questions.
  search: fast semantic (vector) similarity only; shallower.
  list: no search; the most recently used memories (query is ignored; an empty query in any
    mode also lists).

Args:
  query: natural-language question or keywords (at most {MAX_QUERY_CHARS:,} characters).
  limit: maximum results (1 to the server's MEMORY_FABRIC_MAX_RESULTS, default 5).
  mode: recall, search or list.
  memory_type: optional filter: episodic (events), semantic (facts) or procedural (how-tos).
  explain: true adds the per-step trace and each score's components (for debugging).
  include_superseded: true also returns memories corrected by a newer one, ranked below it
    and marked with superseded_by (default: only current facts).

Returns {{query, total_results, sources (results by source), retrieval_paths, parsed (mode
recall: the cleaned query, entity_hints, intent), results: [{{id, text, score, source,
timestamp, entities, graph_relations (the memory's own facts, the relation paths that led
to it, the memory that named what it is about, facts about its shared entities), memory_type,
cluster_id, metadata}}]}}. Recalled memories are reinforced, so useful memories stay strong."""

MANAGE_DESCRIPTION = """Maintenance operations on the memory.

Actions:
  forget: permanently delete one memory; memory_id is required (take it from a recall
    result; its first characters, at least 4, do when no other id starts with them). Use it
    when the user asks you to forget something or a memory is wrong
    (store the corrected version separately).
  sync: push the memory database to the configured backup now (fails when BACKUP_TYPE=none).
  consolidate: run maintenance now (decay, prune weak memories, strengthen frequently used
    ones, recluster topics, build indexes); it also runs periodically on its own.
  stats: counts of memories, cues, associations and clusters, index state, models in use,
    backup status and the LLM analysis queue (pending, failed with their errors).

Returns {action, message, details}."""
