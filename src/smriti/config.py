"""Settings: every environment variable Smriti reads, validated once at start.

Names and defaults follow the original Smriti (Go) server so an existing MCP client
configuration keeps working; the Memory Fabric variables and the scoring knobs of
DESIGN.md are added. Nothing reads the environment at import time: call
:func:`load_settings` (or build :class:`Settings` yourself in library use).
"""

from __future__ import annotations

import getpass
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from smriti.errors import SettingsError, UnsafeUserError

# A user name becomes a folder, a database or a graph name: keep it to a conservative
# alphabet so it can never escape its folder or name somebody else's graph.
_USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")

# What the SQLite store's HNSW graph keeps of each vector. i8, because its candidates are
# re-scored from the exact embeddings anyway, and measured against f32 it lost nothing and cost
# far less: 100k x 1,536 built in 55 s against 281 s, recall@10 0.967 against 0.962, a query
# 2.7 against 4.1 ms, 262 against 702 MB served; 14k MiniLM vectors 0.9987 against 0.9983
# (bench/RESULTS.md, "1M memories" and "Stop 31").
DEFAULT_VECTOR_INDEX_DTYPE: Literal["f32", "f16", "i8"] = "i8"


def validate_user_name(user: str) -> str:
    """Return ``user`` if it is safe as a folder, database and graph name.

    Refuses empty names, absolute paths, path separators, ``..`` and anything outside
    ``[A-Za-z0-9._-]`` (at most 64 characters, first character alphanumeric).

    Raises:
        UnsafeUserError: naming the problem.
    """
    if not user or not user.strip():
        raise UnsafeUserError("user name is empty (set ACCESSING_USER)")
    if "/" in user or "\\" in user or user.startswith("~"):
        raise UnsafeUserError(f"user name {user!r} contains a path separator")
    if ".." in user:
        raise UnsafeUserError(f"user name {user!r} contains '..'")
    if not _USER_NAME.fullmatch(user):  # why fullmatch: "$" also matches before a final newline
        raise UnsafeUserError(
            f"user name {user!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return user


def _default_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry (some containers): still start, as a named default
        return "default"


class Settings(BaseSettings):
    """All configuration, from environment variables (case-insensitive names)."""

    model_config = SettingsConfigDict(
        env_prefix="",
        case_sensitive=False,
        extra="ignore",
        validate_default=True,
        populate_by_name=True,
    )

    # --- core ---------------------------------------------------------------------------
    accessing_user: str = Field(default_factory=_default_user, description="User whose memory is opened")
    storage_location: Path = Field(default=Path("~/.smriti"), description="Root folder of embedded stores")
    db_type: Literal["auto", "sqlite", "kuzu", "ladybug", "neo4j", "falkordb"] = Field(
        default="auto",
        description="auto: sqlite, or kuzu for a user folder that holds only a Kuzu store (memory.kuzu)",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    min_free_disk_mb: float = Field(
        default=64.0,
        ge=0,
        description="an embedded store refuses writes while less is free on its disk (0: never checks)",
    )

    # --- shared local server (stdio clients and the CLI share one process per user) ---------
    # SMRITI_SHARED, not SHARED: a bare SHARED in someone's environment means something else.
    shared: bool = Field(
        default=True,
        validation_alias=AliasChoices("smriti_shared", "shared"),
        description="stdio: relay to the user's shared server (started on demand); false: serve in-process",
    )
    shared_idle_timeout: float = Field(
        default=600.0, gt=0, description="seconds with no request in flight before the shared server exits"
    )

    # --- models ---------------------------------------------------------------------------
    llm_provider: Literal["auto", "openai", "heuristic"] = Field(
        default="auto", description="auto: openai when LLM_API_KEY is set, else the offline heuristic"
    )
    llm_base_url: str = "https://api.openai.com/v1"
    llm_api_key: SecretStr | None = None
    llm_model: str = "gpt-4o-mini"
    llm_timeout: float = Field(default=30.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10)
    # Recall is interactive: its query parsing waits at most this long per try, then parses offline.
    llm_query_timeout: float = Field(default=5.0, gt=0)
    # The LLM analysis queue (stores/queue.py, nodes/enrich.py): a store answers after the
    # offline analysis; the LLM's runs in the background, retried, then parked.
    analysis_max_attempts: int = Field(default=5, ge=1, le=100)
    analysis_backoff_seconds: float = Field(default=5.0, gt=0)
    analysis_backoff_max_seconds: float = Field(default=600.0, gt=0)
    analysis_rate_per_minute: float = Field(default=60.0, ge=0)  # 0: no limit
    analysis_worker: bool = True  # the server drains the queue in a background thread

    embedding_provider: Literal["auto", "openai", "minilm", "local", "hashing"] = Field(
        default="auto",
        description=(
            "auto: openai when an embedding key is set; else the local MiniLM embedder where it is "
            "installed (a new store) and the hashing one otherwise; an existing store keeps its embedder"
        ),
    )
    embedding_base_url: str = "https://api.openai.com/v1"
    embedding_api_key: SecretStr | None = None
    embedding_model: str = "text-embedding-3-small"
    embedding_dims: int = Field(default=1536, ge=8, le=8192)
    vector_index_dtype: Literal["f32", "f16", "i8"] = Field(
        default=DEFAULT_VECTOR_INDEX_DTYPE,
        description=(
            "what the SQLite store's HNSW graph (past 20k memories) keeps of each vector: i8 a "
            "quarter of the memory (the default), f16 half, f32 as stored; quantised graphs find "
            "candidates, which are re-scored from the exact embeddings in the database"
        ),
    )
    local_embedding_model: str = "sentence-transformers/all-MiniLM-L6-v2"

    # --- reranker (providers/rerank.py): off by default -----------------------------------
    reranker: Literal["none", "http", "cross-encoder"] = Field(
        default="none", description="rerank recall's top candidates with a cross-encoder"
    )
    rerank_url: str = Field(default="", description="RERANKER=http: the rerank endpoint")
    rerank_api: Literal["cohere", "tei"] = Field(
        default="cohere", description="request shape: cohere (also Jina) or tei (text-embeddings-inference)"
    )
    rerank_model: str = "cross-encoder/ms-marco-MiniLM-L-6-v2"
    rerank_api_key: SecretStr | None = None
    rerank_timeout: float = Field(default=5.0, gt=0)
    rerank_top_n: int = Field(default=20, ge=1, le=200, description="candidates the reranker reads")
    rerank_weight: float = Field(
        default=0.7, ge=0, le=1, description="share of relevance the reranker's score sets"
    )

    # --- backups --------------------------------------------------------------------------
    backup_type: Literal["none", "github", "s3"] = "none"
    backup_sync_interval: int = Field(default=60, ge=0)
    # A sync gives up after this long, retries included (a remote that never answers must not
    # hold the server); the sync at shutdown gets the shorter budget.
    backup_sync_timeout: float = Field(default=60.0, gt=0)
    backup_shutdown_timeout: float = Field(default=10.0, gt=0)
    backup_restore_on_start: bool = Field(
        default=False, description="restore the latest backup at start when the local memory is empty"
    )
    git_base_url: str = ""
    s3_endpoint: str = ""
    s3_region: str = ""
    s3_access_key: SecretStr | None = None
    s3_secret_key: SecretStr | None = None
    s3_bucket: str = "smriti-backups"

    # --- server backends ------------------------------------------------------------------
    # `smriti context`: the whole block a prompt hook adds stays within this many characters
    # (about 500 tokens), most relevant memories first.
    context_budget_chars: int = Field(default=2000, ge=100)

    neo4j_uri: str = ""
    neo4j_username: str = ""
    neo4j_password: SecretStr | None = None
    # The specification requires NEO4J_USERNAME and NEO4J_PASSWORD; a server run without
    # authentication (dbms.security.auth_enabled=false) must be declared with NEO4J_AUTH=none.
    neo4j_auth: Literal["basic", "none"] = "basic"
    neo4j_database: str = "neo4j"
    neo4j_isolation: Literal["tenant", "database"] = "tenant"
    falkor_addr: str = "localhost:6379"
    falkor_password: SecretStr | None = None
    falkor_graph: str = "smriti"
    falkor_isolation: Literal["tenant", "graph"] = "tenant"

    # --- streamable HTTP authentication (see server/auth.py) ---------------------------------
    smriti_tokens_file: Path | None = Field(
        default=None, description="bearer tokens of the HTTP server (default STORAGE_LOCATION/tokens.json)"
    )
    smriti_tokens: SecretStr | None = Field(
        default=None, description="more tokens from the environment: user:sha256hex,user2:sha256hex"
    )
    smriti_auth_issuer_url: str = Field(
        default="", description="an external OAuth authorization server whose JWT access tokens are accepted"
    )
    smriti_auth_jwks_url: str = Field(
        default="", description="its JWKS: an https URL or a local file (default: from the issuer's metadata)"
    )
    smriti_auth_audience: str = Field(
        default="", description="the audience its tokens must carry (default: SMRITI_RESOURCE_URL)"
    )
    smriti_auth_user_claim: str = Field(default="sub", description="the claim naming the Smriti user")
    smriti_resource_url: str = Field(
        default="", description="the public URL of the MCP endpoint (default http://HOST:PORT/mcp)"
    )
    # Each open memory holds a connection, a vector cache and a worker (server/users.py).
    user_idle_timeout: float = Field(
        default=900.0,
        ge=0,
        description="multi-user HTTP: seconds idle before a user's memory is closed (0: never)",
    )
    max_open_users: int = Field(
        default=64, ge=0, description="multi-user HTTP: most users' memories open at once (0: no cap)"
    )
    # Set by `smriti-mcp --workers N` for its worker processes: SQLite is then opened shared
    # (stores/sqlite/changes.py) and Kuzu/LadybugDB, which one process alone may open, refused.
    http_workers: int = Field(
        default=1, ge=1, le=64, description="streamable-http: server processes serving the same memories"
    )
    # Idle sockets cost a file descriptor and memory each; uvicorn alone never times out a
    # connection that has not sent a request (server/http_limits.py).
    http_keep_alive_timeout: float = Field(
        default=5.0,
        gt=0,
        description="HTTP (streamable-http and the shared server): seconds an idle connection stays open",
    )
    http_max_connections: int = Field(
        default=1000,
        ge=0,
        description="HTTP: most connections and requests at once; at it a new connection closes the one "
        "waiting longest with no request in progress, and past it requests get 503 (0: no cap)",
    )
    # --- slow HTTP clients (issue 37): uvicorn has no timer on a request still arriving -------
    http_header_timeout: float = Field(
        default=10.0,
        gt=0,
        description="HTTP: seconds a request's headers may take from their first byte (then closed)",
    )
    http_body_timeout: float = Field(
        default=30.0,
        gt=0,
        description="HTTP: seconds a request body may pause while the server waits for it (then closed)",
    )

    # --- consolidation --------------------------------------------------------------------
    consolidation_interval: int = Field(default=3600, ge=0)
    decay_half_life_days: float = Field(default=30.0, gt=0, description="decay_factor halves in this time")
    prune_threshold: float = Field(default=0.05, ge=0, le=1)
    important_threshold: float = Field(default=0.8, ge=0, le=1, description="never pruned at or above")
    strengthen_min_access: int = Field(default=5, ge=1)
    strengthen_boost: float = Field(default=0.1, ge=0, le=1)
    index_threshold: int = Field(default=50, ge=0, description="engrams before HNSW/FTS indexes are built")
    leiden_retune_growth: float = Field(default=0.10, ge=0)

    # --- recall and scoring ---------------------------------------------------------------
    scoring_profile: Literal["composite", "fabric"] = "composite"
    score_weight_similarity: float = Field(default=0.4, ge=0)
    score_weight_recency: float = Field(default=0.2, ge=0)
    score_weight_importance: float = Field(default=0.2, ge=0)
    score_weight_decay: float = Field(default=0.2, ge=0)
    fabric_weight_recency: float = Field(default=0.3, ge=0)
    fabric_weight_relevance: float = Field(default=0.5, ge=0)
    fabric_weight_authority: float = Field(default=0.2, ge=0)
    recency_half_life_days: float = Field(default=7.0, gt=0)
    vector_min_similarity: float = Field(
        default=0.0, ge=-1, lt=1, description="vector hits at or below this cosine are not candidates"
    )
    vector_relative_floor: float = Field(
        default=0.0, ge=0, lt=1, description="recall admits vector hits above this share of the best cosine"
    )
    fusion_weight_similarity: float = Field(
        default=0.3, ge=0, description="rank-fusion weight of vector search"
    )
    fusion_weight_text: float = Field(default=0.5, ge=0, description="rank-fusion weight of full-text search")
    fusion_weight_cue: float = Field(default=0.2, ge=0, description="rank-fusion weight of cue traversal")
    fusion_weight_graph: float = Field(
        default=0.3, ge=0, description="rank-fusion weight of spreading activation"
    )
    fusion_k: int = Field(default=5, ge=1, description="rank-fusion constant: weight / (k + rank)")
    # Cue aliases (stores/aliases.py): stored cues whose names mean nearly what a query's cue
    # means reach the memories they encode as if the query had named them (HippoRAG 2's synonym
    # edges). Off by default: +1.3 R@5 / +0.6 R@10 on held-out LoCoMo, below the 2 points a
    # default stage must add (bench/RESULTS.md, "Recognising the query"); 0.6 when on, chosen on
    # LoCoMo conv-26/30.
    cue_alias_similarity: float = Field(
        default=0.0, ge=0, le=1, description="cosine of cue-name embeddings making an alias (0 = off; 0.6)"
    )
    cue_alias_max: int = Field(default=3, ge=0, description="aliases taken per query cue, at most")
    cue_alias_refresh_seconds: float = Field(
        default=300.0, ge=0, description="how old the in-process cue vectors may grow before a reload"
    )
    cue_embed_batch: int = Field(
        default=5000, ge=0, description="cue names consolidation embeds per run with aliases on, at most"
    )
    query_hub_names: bool = Field(
        default=True, description="leave hub names (a speaker, the user) out of the query's embedding"
    )
    fusion_score_share: float = Field(
        default=0.3, ge=0, le=1, description="share of relevance from branch scores rather than ranks"
    )
    # Off by default: on LoCoMo it lost R@5 (bench/RESULTS.md, ablation) and costs a store read
    # of up to ACTIVATION_MAX_ENGRAMS engrams per recall; see README, "Associative recall".
    graph_activation: bool = Field(default=False, description="spreading activation (PPR) as a recall branch")
    activation_damping: float = Field(
        default=0.5, gt=0, lt=1, description="PPR: probability of following an edge"
    )
    activation_seeds: int = Field(default=10, ge=1, description="best direct hits the activation restarts at")
    activation_max_engrams: int = Field(
        default=200, ge=0, description="engrams reached through cues, at most"
    )
    activation_new: int = Field(
        default=30, ge=0, description="engrams the activation adds as candidates, at most"
    )
    activation_max_cue_share: float = Field(
        default=0.05, gt=0, le=1, description="cues encoding more than this share of memories do not spread"
    )
    activation_association_weight: float = Field(
        default=1.0, ge=0, description="weight of AssociatedWith edges against EncodedBy edges"
    )
    context_weight: float = Field(
        default=1.6,
        ge=0,
        description="conversation context: share of relevance a turn passes to its neighbours",
    )
    context_backward: float = Field(
        default=0.7,
        ge=0,
        description="conversation context passed to the turn before a seed, against 1 for the turn after it",
    )
    context_additive: bool = Field(default=False, description="context adds to a turn's own relevance")
    context_seeds: int = Field(default=3, ge=0, description="best candidates whose neighbours are raised")
    # Episodes (nodes/associate.py): the memories of one source on one day are an episode; a
    # candidate's relevance rises with the evidence its episode holds, and the final cut keeps
    # at most MAX_PER_EPISODE results of one episode before the rest of the memory has its turn.
    episode_weight: float = Field(
        default=0.0, ge=0, description="how much a candidate's episode's evidence raises its relevance"
    )
    episode_evidence: int = Field(
        default=3, ge=1, description="best candidates of an episode whose relevance counts as its evidence"
    )
    max_per_episode: int = Field(
        default=0,
        ge=0,
        description="results of one episode before others have their turn (0: no cap)",
    )
    # Query focus (nodes/refine.py): factors on relevance from what the parsed query names.
    entity_hint_weight: float = Field(
        default=0.2, ge=0, le=1, description="share of relevance that rests on the query's entities"
    )
    subject_weight: float = Field(
        default=0.33,
        ge=0,
        le=1,
        description="relevance lost by a memory about another entity than the one the query names",
    )
    intent_type_weight: float = Field(
        default=0.1, ge=0, le=1, description="relevance lost by a memory type that does not suit the intent"
    )
    time_window_weight: float = Field(
        default=0.5, ge=0, le=1, description="relevance lost outside the time window the query names"
    )
    # Memory Fabric traversal entity -> relation -> entity (nodes/relations.py).
    # Off by default, as multi-hop below: neither moved recall by a tenth of a point on LoCoMo
    # (tuning and held-out conversations) or HotpotQA (bench/RESULTS.md, "The graph's stages").
    relation_traversal: bool = Field(
        default=False, description="follow RelatesTo from the query's entities (Memory Fabric traversal)"
    )
    relation_depth: int = Field(default=2, ge=0, le=4, description="relations followed from a query entity")
    relation_seeds: int = Field(
        default=8, ge=1, description="query entities (and frontier entities) per depth"
    )
    relation_max_edges: int = Field(
        default=30, ge=1, description="RelatesTo edges read per depth, newest first"
    )
    relation_new: int = Field(
        default=10, ge=0, description="memories the traversal adds as candidates, at most"
    )
    relation_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="a traversal candidate's relevance is at least best direct relevance * weight ** depth",
    )
    # Bridge (nodes/relations.py): the best candidates name entities; the memories about those
    # entities (their subject) are raised by the naming candidate's relevance.
    bridge_weight: float = Field(
        default=0.5,
        ge=0,
        description="share of a candidate's relevance passed to memories about what it names",
    )
    bridge_seeds: int = Field(
        default=3, ge=0, description="best candidates whose named entities are followed"
    )
    bridge_max_links: int = Field(
        default=20, ge=1, description="entities linked to more memories than this are not followed"
    )
    hop_penalty: float = Field(default=0.7, gt=0, le=1, description="score factor per hop of expansion")
    max_hops: int = Field(default=0, ge=0, le=5, description="multi-hop over AssociatedWith (0: off)")
    cross_cluster_penalty: float = Field(default=0.5, gt=0, le=1)
    reinforce_boost: float = Field(default=0.05, ge=0, le=1)
    associate_top_k: int = Field(default=5, ge=0)
    associate_min_similarity: float = Field(default=0.3, ge=-1, le=1)
    store_dedup_threshold: float = Field(default=0.95, gt=0, le=1)
    max_content_chars: int = Field(default=20_000, ge=1)

    memory_fabric_dedup_threshold: float = Field(default=0.85, gt=0, le=1)
    memory_fabric_boost_factor: float = Field(default=1.2, ge=1)
    memory_fabric_max_results: int = Field(default=20, ge=1, le=1000)

    # -------------------------------------------------------------------------------------
    @field_validator("accessing_user")
    @classmethod
    def _user_not_blank(cls, value: str) -> str:
        # why no strip: " bob" silently opening bob's memory is worse than a clear refusal
        if not value.strip():
            raise ValueError("must not be empty")
        if value != value.strip():
            raise ValueError(f"{value!r} has leading or trailing white space")
        return value

    # --- paths: made absolute where they are read (issue 37) --------------------------------
    # A relative STORAGE_LOCATION was resolved once by the relay (against the client's working
    # directory) and again by the shared server it started inside the user folder: a nested
    # store and socket. Every path setting is absolute from here on, and :func:`path_environment`
    # hands the absolute values to the processes Smriti starts.
    @field_validator("storage_location", "smriti_tokens_file")
    @classmethod
    def _absolute(cls, value: Path | None) -> Path | None:
        # abspath, not resolve(): ".." is folded but a symlinked folder keeps the name it was given
        return None if value is None else Path(os.path.abspath(value.expanduser()))

    @field_validator("*", mode="after")
    @classmethod
    def _finite(cls, value: object) -> object:
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @model_validator(mode="after")
    def _requirements_of_choices(self) -> Settings:
        missing: list[str] = []
        if self.db_type == "neo4j" and not self.neo4j_uri:
            missing.append("NEO4J_URI (DB_TYPE=neo4j)")
        if self.db_type == "neo4j" and self.neo4j_auth == "basic":
            if not self.neo4j_username:
                missing.append("NEO4J_USERNAME (DB_TYPE=neo4j; NEO4J_AUTH=none for a server without auth)")
            if self.neo4j_password is None:
                missing.append("NEO4J_PASSWORD (DB_TYPE=neo4j; NEO4J_AUTH=none for a server without auth)")
        if self.backup_type == "github" and not self.git_base_url:
            missing.append("GIT_BASE_URL (BACKUP_TYPE=github)")
        if self.backup_type == "s3":
            for name in ("s3_region", "s3_access_key", "s3_secret_key"):
                if not getattr(self, name):
                    missing.append(f"{name.upper()} (BACKUP_TYPE=s3)")
        if self.llm_provider == "openai" and self.llm_api_key is None:
            missing.append("LLM_API_KEY (LLM_PROVIDER=openai)")
        if self.embedding_provider == "openai" and self.effective_embedding_key is None:
            missing.append("EMBEDDING_API_KEY or LLM_API_KEY (EMBEDDING_PROVIDER=openai)")
        if missing:
            raise ValueError("missing required setting(s): " + ", ".join(missing))
        return self

    @property
    def effective_embedding_key(self) -> SecretStr | None:
        """EMBEDDING_API_KEY, falling back to LLM_API_KEY as the original server did."""
        return self.embedding_api_key or self.llm_api_key

    @property
    def tokens_file(self) -> Path:
        """SMRITI_TOKENS_FILE, or ``tokens.json`` under STORAGE_LOCATION."""
        return self.smriti_tokens_file or self.storage_location / "tokens.json"

    @property
    def user_dir(self) -> Path:
        """Folder of the accessing user's embedded store (validated by the store)."""
        return self.storage_location / self.accessing_user


def path_environment(settings: Settings, environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with every path setting of ``settings`` given as its absolute value, for a
    process that starts elsewhere (the shared server starts in the user folder): it reads the
    same places as this one. Variants of a variable's name in another case are dropped, since
    the settings read names case-insensitively."""
    paths = {
        _env_name(name).upper(): str(value)
        for name in type(settings).model_fields
        if isinstance(value := getattr(settings, name), Path)
    }
    child = {key: value for key, value in environ.items() if key.upper() not in paths}
    return {**child, **paths}


# Variables whose names differ from the field are listed here, for
# the error message, which must name the environment variable, not the Python field.
_ENV_NAME_OVERRIDES: dict[str, str] = {"shared": "SMRITI_SHARED", "smriti_shared": "SMRITI_SHARED"}


def _env_name(field: str) -> str:
    return _ENV_NAME_OVERRIDES.get(field, field.upper())


def format_validation_error(error: ValidationError) -> str:
    """One readable line per problem, naming the environment variable, never its secret value."""
    lines = []
    for item in error.errors():
        location = ".".join(str(part) for part in item["loc"] if part != "__root__")
        name = _env_name(location) if location else "configuration"
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{name}: {message}")
    return "invalid configuration:\n  " + "\n  ".join(lines)


def load_settings(**overrides: object) -> Settings:
    """Read and validate the environment once.

    Raises:
        SettingsError: with one line per bad variable, naming it.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as error:
        raise SettingsError(format_validation_error(error)) from None


__all__ = ["Settings", "SettingsError", "load_settings"]
