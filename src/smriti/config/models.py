"""Settings sections: the chat and embedding models, the LLM analysis queue, the reranker."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from smriti.config.section import Section


class ModelSettings(Section):
    """The chat model (analysis, query parsing) and the embedding model: any OpenAI-compatible
    endpoint (OpenAI, Ollama, vLLM, LM Studio). With no key Smriti runs offline."""

    slug = "models"
    title = "Models"

    llm_provider: Literal["auto", "openai", "heuristic"] = Field(
        default="auto", description="auto: openai when LLM_API_KEY is set, else the offline heuristic"
    )
    llm_base_url: str = Field(
        default="https://api.openai.com/v1",
        description="the chat endpoint; any OpenAI-compatible server (Ollama: http://localhost:11434/v1)",
    )
    llm_api_key: SecretStr | None = Field(
        default=None, description="the chat endpoint's key; unset: no LLM, the offline heuristic analysis"
    )
    llm_model: str = Field(
        default="gpt-4o-mini",
        description="the chat model (the original server's: cheap, and enough for analysis)",
    )
    llm_timeout: float = Field(
        default=30.0, gt=0, description="seconds per call of the background analysis (nobody waits for it)"
    )
    llm_max_retries: int = Field(
        default=2, ge=0, le=10, description="retries of a failed chat call by the client, before giving up"
    )
    llm_query_timeout: float = Field(
        default=5.0,
        gt=0,
        description=(
            "recall's query parsing waits at most this long per try, then parses offline (recall is "
            "interactive)"
        ),
    )
    embedding_provider: Literal["auto", "openai", "minilm", "local", "hashing"] = Field(
        default="auto",
        description=(
            "auto: openai when an embedding key is set; else the local MiniLM embedder where it is "
            "installed (a new store) and the hashing one otherwise; an existing store keeps its embedder"
        ),
    )
    embedding_base_url: str = Field(
        default="https://api.openai.com/v1", description="the embedding endpoint (OpenAI-compatible)"
    )
    embedding_api_key: SecretStr | None = Field(
        default=None, description="the embedding endpoint's key; unset: LLM_API_KEY (as the original server)"
    )
    embedding_model: str = Field(
        default="text-embedding-3-small", description="the embedding model (the original server's)"
    )
    embedding_dims: int = Field(
        default=1536,
        ge=8,
        le=8192,
        description="its dimension (text-embedding-3-small's); a store records it and refuses another",
    )
    local_embedding_model: str = Field(
        default="sentence-transformers/all-MiniLM-L6-v2",
        description="EMBEDDING_PROVIDER=local: a sentence-transformers model (small, and runs on a CPU)",
    )


class AnalysisSettings(Section):
    """The LLM analysis queue (stores/queue.py): a store answers after the offline analysis; the
    LLM's analysis runs later in the background, retried with backoff, then parked."""

    slug = "analysis"
    title = "LLM analysis queue"

    analysis_worker: bool = Field(
        default=True,
        description="the server drains the queue in a background thread (false: `smriti enrich` does)",
    )
    analysis_max_attempts: int = Field(
        default=5, ge=1, le=100, description="tries of one memory's analysis before it is parked as failed"
    )
    analysis_backoff_seconds: float = Field(
        default=5.0, gt=0, description="wait after a first failure; doubles with each further one"
    )
    analysis_backoff_max_seconds: float = Field(
        default=600.0,
        gt=0,
        description="the longest wait between tries, so an outage is retried within minutes",
    )
    analysis_rate_per_minute: float = Field(
        default=60.0,
        ge=0,
        description="most LLM calls per minute, to keep within a provider's rate limit (0: no limit)",
    )


class RerankerSettings(Section):
    """An optional cross-encoder that re-reads recall's best candidates (providers/rerank.py).
    Off by default: it needs a model or an endpoint, and costs a call per recall."""

    slug = "reranker"
    title = "Reranker"

    reranker: Literal["none", "http", "cross-encoder"] = Field(
        default="none",
        description="rerank recall's top candidates: an endpoint (http) or a local cross-encoder",
    )
    rerank_url: str = Field(default="", description="RERANKER=http: the rerank endpoint")
    rerank_api: Literal["cohere", "tei"] = Field(
        default="cohere", description="request shape: cohere (also Jina) or tei (text-embeddings-inference)"
    )
    rerank_model: str = Field(
        default="cross-encoder/ms-marco-MiniLM-L-6-v2",
        description=(
            "the model (a local cross-encoder, or the name the endpoint expects); small enough for a CPU"
        ),
    )
    rerank_api_key: SecretStr | None = Field(default=None, description="RERANKER=http: the endpoint's key")
    rerank_timeout: float = Field(
        default=5.0, gt=0, description="seconds a rerank call may take; past it recall keeps its own order"
    )
    rerank_top_n: int = Field(default=20, ge=1, le=200, description="candidates the reranker reads")
    rerank_weight: float = Field(
        default=0.7, ge=0, le=1, description="share of relevance the reranker's score sets"
    )
