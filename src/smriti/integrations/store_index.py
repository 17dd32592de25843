"""The semantic index of :class:`~smriti.integrations.langgraph_store.SmritiStore`.

LangGraph's ``index`` configuration decides what is embedded and with what:

* ``embed``: a LangChain ``Embeddings`` object, a function (sync or async) from texts to
  vectors, or a ``"provider:model"`` string. ``openai:``, ``hashing:`` and ``local:`` are built by
  Smriti's own providers from the memory's settings (so keys and base URLs come from the same
  place as the memory's embedder, and ``hashing:`` works offline); any other provider goes
  through LangChain's ``init_embeddings`` (``pip install langchain``). Without ``embed`` (or
  without an ``index`` at all) the memory's own embedder is used.
* ``dims``: the vector size; every vector the model returns is checked against it.
* ``fields``: JSON paths (``"text"``, ``"nested.path"``, ``"list[*].x"``; ``"$"``, the default,
  is the whole value), overridden per item by ``put(..., index=[...])``; ``index=False`` stores
  no vector at all. Each text found is one vector, and an item's similarity to a query is the
  best of its vectors (max pooling, as the reference store does).

Vectors live in the memory's metadata, one key per item, as base64 float32 with the index
signature (dims, model, fields) they were made with, so a store reopened with another model
re-embeds instead of comparing vectors of two models.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

    from smriti.config import Settings

# Providers Smriti builds itself (providers/models.py), by EMBEDDING_PROVIDER name.
_OWN_PROVIDERS = ("openai", "hashing", "local")

IndexSpec = Literal[False] | list[str] | None


@dataclass(frozen=True)
class StoreIndex:
    """The resolved index: the public ``index_config``, the model and the tokenized paths."""

    config: dict[str, Any]
    embeddings: Embeddings
    fields: tuple[str, ...]
    dims: int
    signature: str

    @classmethod
    def build(cls, index: IndexConfig | None, embedder: Embeddings, settings: Settings) -> StoreIndex:
        """Resolve ``index`` (None: the memory's ``embedder`` over whole values)."""
        from smriti.providers.models import embedder_identity

        config: dict[str, Any] = dict(index or {})
        dims = int(config.get("dims") or settings.embedding_dims)
        embed = config.get("embed")
        embeddings = embedder if embed is None else resolve_embeddings(embed, dims, settings)
        fields = tuple(config.get("fields") or ["$"])
        for path in fields:
            if path != "$":
                tokenize_path(path)  # a malformed path fails here, not at the first put
        config.update({"dims": dims, "embed": embed if embed is not None else embedder})
        config.setdefault("fields", None)
        model = embed if isinstance(embed, str) else embedder_identity(embeddings)
        signature = json.dumps([dims, model, list(fields)])
        return cls(config=config, embeddings=embeddings, fields=fields, dims=dims, signature=signature)

    def texts(self, value: Mapping[str, Any], index: IndexSpec) -> list[tuple[str, str]]:
        """(path, text) pairs to embed for ``value``: the configured fields, or ``index``'s."""
        if index is False:
            return []
        paths = self.fields if index is None else tuple(index)
        found: list[tuple[str, str]] = []
        for path in paths:
            texts = get_text_at_path(value, path)
            if len(texts) == 1:
                found.append((path, texts[0]))
            else:
                found.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
        return [(path, text) for path, text in found if text]

    def checked(self, vectors: Sequence[Sequence[float]]) -> list[list[float]]:
        """The model's vectors, refused when their size is not the configured ``dims``."""
        out = [list(map(float, v)) for v in vectors]
        for vector in out:
            if len(vector) != self.dims:
                raise ValueError(
                    f"the store's index has dims={self.dims} but the embedding model returned "
                    f"{len(vector)}-dimensional vectors: set index['dims'] to {len(vector)}"
                )
        return out


def resolve_embeddings(embed: Any, dims: int, settings: Settings) -> Embeddings:
    """An ``Embeddings`` for the ``embed`` of an index configuration (module docstring)."""
    if isinstance(embed, str):
        provider, colon, model = embed.partition(":")
        if colon and provider in _OWN_PROVIDERS:
            from smriti.providers.models import build_embedder

            update: dict[str, Any] = {"embedding_provider": provider, "embedding_dims": dims}
            if provider == "openai":
                update["embedding_model"] = model
            elif provider == "local":
                update["local_embedding_model"] = model
            return build_embedder(settings.model_copy(update=update))
    if not isinstance(embed, str) and hasattr(embed, "embed_documents") and hasattr(embed, "embed_query"):
        return embed  # an Embeddings in all but name (duck-typed): used as it is
    return ensure_embeddings(embed)


async def aembed_documents(embeddings: Embeddings, texts: list[str]) -> list[list[float]]:
    """The model's async API, or its sync one in a worker thread when it has none."""
    if hasattr(embeddings, "aembed_documents"):
        return await embeddings.aembed_documents(texts)
    return await asyncio.to_thread(embeddings.embed_documents, texts)


async def aembed_query(embeddings: Embeddings, text: str) -> list[float]:
    """As :func:`aembed_documents`, for a query."""
    if hasattr(embeddings, "aembed_query"):
        return await embeddings.aembed_query(text)
    return await asyncio.to_thread(embeddings.embed_query, text)


def encode_vectors(signature: str, vectors: Mapping[str, Sequence[float]]) -> str:
    """The metadata text of one item's vectors (base64 float32, path -> vector)."""
    packed = {
        path: base64.b64encode(np.asarray(v, dtype=np.float32).tobytes()).decode("ascii")
        for path, v in vectors.items()
    }
    return json.dumps({"signature": signature, "vectors": packed})


def decode_vectors(raw: str, signature: str) -> np.ndarray | None:
    """The item's vectors as rows of a matrix; None when made by another index (or none)."""
    record = json.loads(raw)
    if record.get("signature") != signature or not record.get("vectors"):
        return None
    rows = [np.frombuffer(base64.b64decode(v), dtype=np.float32) for v in record["vectors"].values()]
    return np.vstack(rows)


def similarity(query: Sequence[float], vectors: np.ndarray) -> float:
    """Cosine similarity of ``query`` to the closest of ``vectors`` (0 for a zero vector)."""
    q = np.asarray(query, dtype=np.float64)
    matrix = vectors.astype(np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        cosines = np.where(norms > 0, matrix @ q / np.where(norms > 0, norms, 1.0), 0.0)
    return float(np.max(cosines))
