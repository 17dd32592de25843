"""Build the chat model and the embedder from settings, and guard the store's embedding identity.

Providers:
- chat: ``openai`` (any OpenAI-compatible endpoint: OpenAI, Ollama, vLLM, LM Studio) or none,
  in which case the heuristic analyser runs offline.
- embeddings: ``openai`` (same endpoints), ``local`` (sentence-transformers, from the local
  model cache only: nothing is downloaded at run time) or ``hashing`` (offline, lexical).
``auto`` picks openai when a key is set and the offline path otherwise, and says so on stderr.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from smriti.errors import EmbeddingMismatchError, ProviderError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from smriti.config import Settings
    from smriti.stores.base import GraphStore

log = logging.getLogger(__name__)


def build_chat_model(
    settings: Settings, max_retries: int | None = None, timeout: float | None = None
) -> BaseChatModel | None:
    """The configured chat model, or None for offline heuristic analysis.

    ``max_retries`` and ``timeout`` override LLM_MAX_RETRIES and LLM_TIMEOUT (the analysis
    queue retries by itself; recall's query parsing waits LLM_QUERY_TIMEOUT at most).
    """
    provider = settings.llm_provider
    if provider == "heuristic" or (provider == "auto" and settings.llm_api_key is None):
        return None  # build_context says so once (offline_notice)
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=settings.llm_model,
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key,
        timeout=settings.llm_timeout if timeout is None else timeout,
        max_retries=settings.llm_max_retries if max_retries is None else max_retries,
        temperature=0,
    )


def offline_notice(settings: Settings) -> str | None:
    """One line saying what runs offline for want of a key (None when nothing does, or when the
    offline choice was explicit): a command prints it once, not a line per model."""
    analysis = settings.llm_provider == "auto" and settings.llm_api_key is None
    embedding = settings.embedding_provider == "auto" and settings.effective_embedding_key is None
    lexical = "the hashing embedder (lexical, not semantic)"
    if analysis and embedding:
        return f"offline (no LLM_API_KEY): the heuristic cue extractor and {lexical}"
    if analysis:
        return "offline analysis (no LLM_API_KEY): the heuristic cue extractor"
    if embedding:
        return f"offline embeddings (no EMBEDDING_API_KEY or LLM_API_KEY): {lexical}"
    return None


def build_embedder(settings: Settings) -> Embeddings:
    """The configured embedder; raises ProviderError when it cannot be built offline."""
    provider = settings.embedding_provider
    if provider == "auto":
        provider = "openai" if settings.effective_embedding_key is not None else "hashing"
    if provider == "hashing":
        from smriti.providers.hashing import HashingEmbeddings

        return HashingEmbeddings(settings.embedding_dims)
    if provider == "local":
        return _local_embedder(settings)
    from langchain_openai import OpenAIEmbeddings

    options: dict[str, Any] = {}
    if settings.embedding_model.startswith("text-embedding-3"):
        options["dimensions"] = settings.embedding_dims  # only these models accept a dimension
    return OpenAIEmbeddings(
        model=settings.embedding_model,
        base_url=settings.embedding_base_url,
        api_key=settings.effective_embedding_key,
        timeout=settings.llm_timeout,
        max_retries=settings.llm_max_retries,
        # Token-length checks download a tiktoken vocabulary and only fit OpenAI models.
        check_embedding_ctx_length=False,
        **options,
    )


def _local_embedder(settings: Settings) -> Embeddings:
    """sentence-transformers from the local cache (HF_HUB_OFFLINE semantics: no download)."""
    try:
        from langchain_huggingface import HuggingFaceEmbeddings
    except ImportError:
        raise ProviderError(
            "EMBEDDING_PROVIDER=local needs sentence-transformers: pip install 'smriti-graph[local]'"
        ) from None
    try:
        embedder = HuggingFaceEmbeddings(
            model_name=settings.local_embedding_model,
            model_kwargs={"local_files_only": True},
            encode_kwargs={"normalize_embeddings": True},
        )
    except ImportError:
        raise ProviderError(
            "EMBEDDING_PROVIDER=local needs sentence-transformers: pip install 'smriti-graph[local]'"
        ) from None
    except Exception as error:
        raise ProviderError(
            f"EMBEDDING_PROVIDER=local: the model {settings.local_embedding_model!r} is not in the local "
            f"cache and is never downloaded at run time ({type(error).__name__}). Download it once with "
            "`huggingface-cli download` or use EMBEDDING_PROVIDER=hashing"
        ) from error
    dims = len(embedder.embed_query("dimension probe"))
    if dims != settings.embedding_dims:
        raise ProviderError(f"the local model makes {dims}-dimensional vectors; set EMBEDDING_DIMS={dims}")
    return embedder


def embedder_identity(embedder: Any) -> str:
    """A name for the embedding model, recorded in the store (``model`` or ``model_name``)."""
    for attribute in ("model", "model_name"):
        value = getattr(embedder, attribute, None)
        if isinstance(value, str) and value:
            return value
    return type(embedder).__name__


def check_embedding_identity(store: GraphStore, embedder: Any, settings: Settings) -> None:
    """Record the embedding model in a new store; refuse to mix models in an existing one.

    Vectors of two models are not comparable, so recall would silently return noise.
    """
    name = embedder_identity(embedder)
    recorded = store.get_meta("embedding_model")
    if recorded is None or store.count_engrams() == 0:
        store.set_meta("embedding_model", name)
        return
    if recorded != name:
        raise EmbeddingMismatchError(
            f"this memory store was embedded with {recorded!r}, but the configured embedder is {name!r}. "
            "Mixing models makes recall meaningless. Either configure the original model again, or "
            "re-embed: `smriti export memories.jsonl`, point STORAGE_LOCATION at a new folder, then "
            "`smriti import memories.jsonl --reembed`."
        )
