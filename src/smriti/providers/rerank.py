"""An optional reranker: a cross-encoder reads the query and each top candidate together.

Off by default (``RERANKER=none``). Two ways to get one:

* ``RERANKER=http``: a rerank endpoint at ``RERANK_URL``. ``RERANK_API=cohere`` (also Jina and
  most hosted rerankers) posts ``{model, query, documents, top_n}`` and reads
  ``{"results": [{"index", "relevance_score"}]}``; ``RERANK_API=tei`` (Hugging Face
  text-embeddings-inference ``/rerank``) posts ``{query, texts}`` and reads ``[{"index", "score"}]``.
* ``RERANKER=cross-encoder``: sentence-transformers' ``CrossEncoder`` with ``RERANK_MODEL``
  from the local model cache only (nothing is downloaded at run time, as with the local embedder).

A reranker that fails at recall time (endpoint down, timeout) is skipped for that recall with
a warning and a trace note: recall answers with the pipeline's own ranking, never an error.
Scores are mapped to (0, 1) with a logistic function when they are logits (cross-encoders
return those), so they blend with the pipeline's relevance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from smriti.errors import ProviderError

if TYPE_CHECKING:
    from smriti.config import Settings


class Reranker(Protocol):
    name: str

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        """A relevance in [0, 1] for each document, in the documents' order."""
        ...


def squash(value: float) -> float:
    """Scores already in [0, 1] stay; logits go through the logistic function."""
    if 0.0 <= value <= 1.0:
        return value
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, value))))


def scores_by_index(pairs: Sequence[tuple[int, float]], count: int) -> list[float]:
    """Scores in the documents' order; a document the endpoint left out scores 0."""
    out = [0.0] * count
    for index, value in pairs:
        if not 0 <= index < count:
            raise ProviderError(f"the rerank endpoint returned index {index} for {count} documents")
        out[index] = squash(float(value))
    return out


class HttpReranker:
    """A rerank endpoint (Cohere/Jina or TEI request shapes; see the module)."""

    def __init__(self, url: str, api: str, model: str, api_key: str | None, timeout: float) -> None:
        self.url, self.api, self.model, self.timeout = url, api, model, timeout
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.name = f"http:{api}"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        import httpx

        if self.api == "tei":
            body: dict[str, Any] = {"query": query, "texts": list(documents), "raw_scores": False}
        else:
            body = {
                "model": self.model,
                "query": query,
                "documents": list(documents),
                "top_n": len(documents),
            }
        try:
            response = httpx.post(self.url, json=body, headers=self.headers, timeout=self.timeout)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise ProviderError(f"rerank endpoint {self.url}: {type(error).__name__}: {error}") from error
        try:
            if self.api == "tei":
                pairs = [(int(item["index"]), float(item["score"])) for item in data]
            else:
                pairs = [(int(item["index"]), float(item["relevance_score"])) for item in data["results"]]
        except (KeyError, TypeError, ValueError) as error:
            raise ProviderError(f"rerank endpoint {self.url}: unexpected answer ({error!r})") from error
        return scores_by_index(pairs, len(documents))


class CrossEncoderReranker:
    """sentence-transformers' CrossEncoder, loaded from the local cache only."""

    def __init__(self, model: str) -> None:
        try:
            from sentence_transformers import CrossEncoder  # pyright: ignore[reportMissingImports]  ([local], not in [all])
        except ImportError:
            raise ProviderError(
                "RERANKER=cross-encoder needs sentence-transformers: pip install 'smriti-graph[local]' "
                "(or use RERANKER=http with a rerank endpoint)"
            ) from None
        try:
            self.model = CrossEncoder(model, local_files_only=True)
        except Exception as error:
            raise ProviderError(
                f"RERANKER=cross-encoder: the model {model!r} is not in the local cache and is never "
                f"downloaded at run time ({type(error).__name__}). Download it once with "
                "`huggingface-cli download` or use RERANKER=http"
            ) from error
        self.name = f"cross-encoder:{model}"

    def score(self, query: str, documents: Sequence[str]) -> list[float]:
        raw = self.model.predict([(query, doc) for doc in documents])
        return [squash(float(value)) for value in raw]


def build_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, None when off; raises ProviderError when it cannot be built."""
    if settings.reranker == "none":
        return None
    if settings.reranker == "cross-encoder":
        return CrossEncoderReranker(settings.rerank_model)
    if not settings.rerank_url:
        raise ProviderError("RERANKER=http needs RERANK_URL (the rerank endpoint)")
    key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
    return HttpReranker(
        settings.rerank_url, settings.rerank_api, settings.rerank_model, key, settings.rerank_timeout
    )
