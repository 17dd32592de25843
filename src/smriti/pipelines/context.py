"""Wiring a MemoryContext from settings: the user's store and the models.

:class:`MemoryContext` itself lives in ``nodes/state.py`` (the layer every node imports);
it is re-exported here because callers build contexts through this module.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from smriti.nodes.state import MemoryContext

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from smriti.config import Settings

__all__ = ["MemoryContext", "build_context"]


logger = logging.getLogger("smriti.providers.models")  # where the notice was logged before


def build_context(
    settings: Settings,
    *,
    user: str | None = None,
    llm: BaseChatModel | None = None,
    embedder: Embeddings | None = None,
) -> MemoryContext:
    """Open the user's store and build the models from settings (injected ones win).

    The store records which embedding model and dimension wrote it and refuses another; with
    ``EMBEDDING_PROVIDER=auto`` and no key an existing store therefore keeps the embedder it was
    made with and a new one gets the local MiniLM embedder where installed
    (:func:`smriti.providers.models.resolve_embedding`). The context's settings carry the
    resolved provider and dimension.

    Args:
        settings: validated settings.
        user: whose memory to open; default ACCESSING_USER.
        llm: a chat model to use instead of the configured one.
        embedder: an embeddings model to use instead of the configured one.
    """
    from smriti.providers.models import (
        build_chat_model,
        build_embedder,
        check_embedding_identity,
        check_recorded_embedding,
        offline_notice,
        resolve_embedding,
    )
    from smriti.providers.rerank import build_reranker
    from smriti.stores import make_store, recorded_embedding

    choice = recorded = None
    given = settings
    if embedder is None:
        # Before anything is built: the store's record decides the embedder and its dimension.
        recorded = recorded_embedding(settings, user)
        choice = resolve_embedding(settings, recorded)
        settings = choice.settings
    # ``llm`` answers recall's query parsing, interactively: LLM_QUERY_TIMEOUT per try. The
    # analysis queue's model takes LLM_TIMEOUT and one try per call (the queue retries itself,
    # with backoff and Retry-After).
    chat = llm if llm is not None else build_chat_model(settings, timeout=settings.llm_query_timeout)
    analyst = None if llm is not None or chat is None else build_chat_model(settings, max_retries=0)
    embeddings = embedder if embedder is not None else build_embedder(settings)
    reranker = build_reranker(settings)  # before the store opens: a bad setting leaves nothing open
    if llm is None and embedder is None and (notice := offline_notice(settings, choice)):
        logger.warning(notice)
    if choice is not None:  # refused from the record, before the store opens (and migrates)
        check_recorded_embedding(recorded, embeddings, settings, given, choice.offline)
    store = make_store(settings, user)
    try:
        fallback = choice.offline if choice is not None else None
        check_embedding_identity(store, embeddings, settings, fallback)
    except Exception:
        store.close()
        raise
    return MemoryContext(
        store=store, embedder=embeddings, llm=chat, analyst=analyst, settings=settings, reranker=reranker
    )
