"""Store's encoding steps: validate, analyse the content, embed it, catch near-duplicates, write."""

from __future__ import annotations

import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.errors import InvalidInput
from smriti.nodes.state import MemoryContext, StoreState, traced
from smriti.nodes.textsim import siblings
from smriti.stores.base import Engram, StoreError
from smriti.validators import check_store, input_is_checked, merge_tags

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

# What a caller may give the store graph to check (validators.check_store's arguments).
STORE_ARGUMENTS = ("content", "importance", "tags", "source", "occurred_at", "supersedes")


@traced
def validate_store(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Check the memory before anything is written (``validators.check_store``), unless its
    caller already did (``validators.checked_input``: the MCP tools, the CLI, ``Memory``);
    ``supersedes`` is checked here in both cases, since its rule reads the store."""
    from smriti.nodes.supersede import check_supersedes

    request: dict[str, Any] = {}
    if not input_is_checked():
        raw = {key: state[key] for key in STORE_ARGUMENTS if key in state}  # type: ignore[literal-required]
        request = dict(check_store(max_chars=runtime.context.settings.max_content_chars, **raw))
    supersedes = check_supersedes(runtime.context.store, request.get("supersedes", state.get("supersedes")))
    return {**request, "supersedes": supersedes, "_notes": "input accepted"}


@traced
def analyze(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """The offline analysis (summary, memory_type, typed cues, relations): a store never waits
    for a model. With one configured, its analysis is queued (queue_analysis) and replaces
    this one when it lands (``nodes/enrich.py``)."""
    from smriti.providers.analysis import analyze_memory

    analysis, analyzer = analyze_memory(None, state["content"])
    data = analysis.model_dump()
    data["analyzer"] = analyzer
    return {
        "analysis": data,
        "_notes": (
            f"{analyzer}: {data['memory_type']}, {len(data['cues'])} cues, {len(data['relations'])} relations"
        ),
    }


@traced
def embed(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Embed the content. Without an embedding the memory could never be recalled, so this fails loudly."""
    try:
        vector = runtime.context.embedder.embed_documents([state["content"]])[0]
    except Exception as error:
        raise StoreError(
            f"could not embed the memory ({type(error).__name__}: {error}); nothing was stored"
        ) from error
    expected = runtime.context.settings.embedding_dims
    if len(vector) != expected:
        raise StoreError(f"the embedder returned {len(vector)} dimensions, EMBEDDING_DIMS is {expected}")
    embedding = [float(x) for x in vector]
    if not all(math.isfinite(x) for x in embedding):
        # A NaN or infinite vector scores NaN against every query: the memory could never be found.
        raise StoreError("the embedder returned NaN or infinite values; nothing was stored")
    return {"embedding": embedding, "_notes": f"{len(vector)} dimensions"}


@traced
def find_duplicate(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Find the nearest existing memories; a near-identical one is reinforced instead of copied."""
    context = runtime.context
    settings = context.settings
    similar = context.store.vector_search(state["embedding"], settings.associate_top_k + 1)
    nearest = [{"id": s.id, "score": s.score} for s in similar]
    close = [s for s in similar if s.score >= settings.store_dedup_threshold]
    # Near in meaning may still be another fact: "The Redis client was configured on Monday by
    # Noor" is not "The S3 client ..." (an embedding's cosine cannot tell them apart), so the
    # duplicate is the nearest close memory that names nothing this one does not (and back).
    found = context.store.get_engrams([s.id for s in close]) if close else []
    existing = next((e for e in found if not siblings(e.content, state["content"])), None)
    if existing is None:
        note = f"{len(close)} close, all naming other things: stored" if close else "no near-duplicate"
        return {"similar": nearest, "duplicate_of": None, "_candidates": nearest, "_notes": note}
    score = next(s.score for s in close if s.id == existing.id)
    tags = merge_tags(existing.tags, state.get("tags", ""))  # at most MAX_TAGS, however many merges
    with context.write_lock:
        context.store.update_engram(
            existing.id,
            access_count=existing.access_count + 1,
            last_accessed_at=context.clock(),
            decay_factor=min(1.0, existing.decay_factor + settings.reinforce_boost),
            importance=max(existing.importance, state.get("importance", 0.5)),
            tags=tags,
        )
    cues = context.store.cues_of([existing.id]).get(existing.id, [])
    return {
        "similar": nearest,
        "duplicate_of": existing.id,
        "id": existing.id,
        "memory_type": existing.memory_type,
        "cues": [{"name": c.name, "type": c.cue_type} for c in cues],
        "cluster_id": existing.cluster_id,
        "deduplicated": True,
        "_candidates": nearest,
        "_notes": f"near-duplicate of {existing.id} ({score:.3f}): reinforced, tags merged",
    }


def _memory_time(state: StoreState, context: MemoryContext) -> datetime:
    raw = state.get("created_at")
    if not raw:
        return context.clock()
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"created_at must be an ISO 8601 time, got {raw!r}") from None
    if moment.tzinfo is None:
        raise InvalidInput("created_at must include a time zone (e.g. 2024-05-08T13:56:00+00:00)")
    return moment


@traced
def write(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Write the new engram (content, offline analysis, embedding, its time) under the write lock."""
    context = runtime.context
    analysis = state["analysis"]
    moment = _memory_time(state, context)
    accessed = moment
    if state.get("occurred_at"):
        # The event's time is the memory's time; the memory itself is new, so it has not been
        # "accessed" since the event (else consolidation would decay it as years unused).
        moment = datetime.fromisoformat(state["occurred_at"])
    engram = Engram(
        content=state["content"],
        summary=analysis.get("summary", ""),
        memory_type=analysis.get("memory_type", "episodic"),
        importance=state.get("importance", 0.5),
        created_at=moment,
        last_accessed_at=accessed,
        embedding=state["embedding"],
        source=state.get("source", ""),
        tags=state.get("tags", ""),
    )
    with context.write_lock:
        context.store.create_engram(engram)
    return {
        "id": engram.id,
        "stored_at": engram.created_at.isoformat(),
        "memory_type": engram.memory_type,
        "deduplicated": False,
        "cluster_id": engram.cluster_id,
        "_notes": f"engram {engram.id}",
    }
