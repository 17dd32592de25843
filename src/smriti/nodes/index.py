"""Consolidation's last step: make sure the search indexes exist once the store is big enough."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from smriti.nodes.state import ConsolidateState, MemoryContext, traced

if TYPE_CHECKING:
    from langgraph.runtime import Runtime


def remember_index_state(context: MemoryContext, indexes: dict[str, bool]) -> bool:
    """Note in the context whether every index the store reported is built (the store
    pipeline's lazy index check then skips the store call); returns that."""
    ready = bool(indexes) and all(indexes.values())
    context.cache.indexes_ready = ready
    return ready


@traced
def manage_indexes(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Build the HNSW vector and full-text indexes once engrams exceed INDEX_THRESHOLD; report their state.

    Always asks the store (unlike the store pipeline's cached check): consolidation is rare,
    and an index dropped behind our back (a re-embedding, say) is noticed and rebuilt here.
    """
    context = runtime.context
    threshold = context.settings.index_threshold
    with context.write_lock:
        indexes = dict(context.store.ensure_indexes(threshold))
    remember_index_state(context, indexes)
    built = ", ".join(f"{name}={'yes' if ready else 'no'}" for name, ready in indexes.items()) or "none"
    return {"report": {"indexes": indexes}, "_notes": f"threshold {threshold}: {built}"}


# Cue names embedded per call of the embedder, and per write.
CUE_EMBED_CHUNK = 256


@traced
def embed_cues(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Embed the names of cues that have no embedding yet, at most CUE_EMBED_BATCH per run, when
    cue aliases are on (CUE_ALIAS_SIMILARITY > 0; off by default).

    The store pipeline does not embed cue names: that would cost a store one more embedding
    call (an HTTP round trip, or ~40 ms of the local MiniLM) for cues that are mostly known
    already. Cue embeddings serve alias matching at recall (``stores/aliases.py``), where a
    cue consolidation has not reached yet is still matched exactly. A failing embedder is
    reported, not raised: the rest of consolidation has already run, and the next run retries.
    """
    context = runtime.context
    if context.settings.cue_alias_similarity <= 0:
        return {"report": {"cue_embeddings": {"embedded": 0, "more": False}}, "_notes": "cue aliases off"}
    budget = context.settings.cue_embed_batch
    embedded = 0
    while embedded < budget:
        cues = context.store.cues_without_embedding(min(CUE_EMBED_CHUNK, budget - embedded))
        if not cues:
            break
        try:
            vectors = context.embedder.embed_documents([cue.name for cue in cues])
        except Exception as error:  # the endpoint's failure, whatever its type
            note = f"embedding cue names failed ({type(error).__name__}: {error}); {embedded} embedded"
            return {"report": {"cue_embeddings": {"embedded": embedded, "error": note}}, "_notes": note}
        with context.write_lock:
            context.store.set_cue_embeddings(
                {cue.id: [float(x) for x in vector] for cue, vector in zip(cues, vectors, strict=True)}
            )
        embedded += len(cues)
    if embedded and (index := context.cache.aliases) is not None:
        index.invalidate()
    left = bool(context.store.cues_without_embedding(1)) if embedded >= budget else False
    note = f"{embedded} cue name(s) embedded" + ("; more next run" if left else "")
    return {"report": {"cue_embeddings": {"embedded": embedded, "more": left}}, "_notes": note}
