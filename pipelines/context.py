"""MemoryContext: the dependencies every node reads from ``runtime.context``.

Nothing here is global: a context is built once (by the server's lifespan, the CLI, a
notebook or a test) and passed to each graph run as ``context=``. Tests swap in fake
models and a frozen clock by building the dataclass themselves.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.stores.base import utcnow

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from smriti.config import Settings
    from smriti.stores.base import GraphStore


@dataclass
class MemoryContext:
    """Everything a pipeline run needs.

    Attributes:
        store: the accessing user's graph store.
        embedder: any LangChain ``Embeddings``.
        llm: a LangChain chat model, or None to use the offline heuristic analysis.
        settings: validated settings (weights, thresholds).
        clock: returns "now" (UTC); tests and benchmarks replace it.
        write_lock: serialises writes; embedded databases allow one writer at a time.
        cache: per-context scratch space (the Leiden engine keeps its resolution cache here too).
    """

    store: GraphStore
    embedder: Embeddings
    settings: Settings
    llm: BaseChatModel | None = None
    clock: Callable[[], datetime] = utcnow
    write_lock: threading.RLock = field(default_factory=threading.RLock)
    cache: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        self.store.close()


def build_context(
    settings: Settings,
    *,
    user: str | None = None,
    llm: BaseChatModel | None = None,
    embedder: Embeddings | None = None,
) -> MemoryContext:
    """Open the user's store and build the models from settings (injected ones win).

    The store records which embedding model and dimension wrote it and refuses another.
    """
    from smriti.providers.models import build_chat_model, build_embedder
    from smriti.stores import make_store

    chat = llm if llm is not None else build_chat_model(settings)
    embeddings = embedder if embedder is not None else build_embedder(settings)
    store = make_store(settings, user)
    try:
        from smriti.providers.models import check_embedding_identity

        check_embedding_identity(store, embeddings, settings)
    except Exception:
        store.close()
        raise
    return MemoryContext(store=store, embedder=embeddings, llm=chat, settings=settings)
