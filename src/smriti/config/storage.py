"""Settings sections: where memories live (the user, the folder, the engine) and the servers
of the Neo4j and FalkorDB backends."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator

from smriti.config.section import Section, absolute_path

# The user-name rule and the default user live in errors.py (stdlib only): the stdio relay
# needs them without importing pydantic (smriti.config re-exports them).
from smriti.errors import default_user

# What the SQLite store's HNSW graph keeps of each vector. i8, because its candidates are
# re-scored from the exact embeddings anyway, and measured against f32 it lost nothing and cost
# far less: 100k x 1,536 built in 55 s against 281 s, recall@10 0.967 against 0.962, a query
# 2.7 against 4.1 ms, 262 against 702 MB served; 14k MiniLM vectors 0.9987 against 0.9983
# (bench/RESULTS.md, "1M memories" and "Stop 31").
DEFAULT_VECTOR_INDEX_DTYPE: Literal["f32", "f16", "i8"] = "i8"


class StorageSettings(Section):
    """Whose memory is opened, where it lives and which engine holds it."""

    slug = "storage"
    title = "Storage"

    accessing_user: str = Field(
        default_factory=default_user,
        description=(
            "user whose memory is opened on stdio and with --no-auth (over HTTP with tokens, each "
            "token's user): its folder STORAGE_LOCATION/{user}/, its FalkorDB graph or Neo4j "
            "database. 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (no "
            "path separator, '..', space or quote: refused at start). Default the login name "
            "(the first of LOGNAME, USER, LNAME, USERNAME set, else the account's name; 'default' when "
            "there is none, as in a container run with an unknown --user), so each person gets their own"
        ),
        json_schema_extra={"default_text": "the login name"},
    )
    storage_location: Path = Field(
        default=Path("~/.smriti"),
        description="root folder of the embedded stores, one folder per user (the original server's place)",
    )
    db_type: Literal["auto", "sqlite", "kuzu", "ladybug", "neo4j", "falkordb"] = Field(
        default="auto",
        description=(
            "the engine. auto: SQLite for a new user, and an existing Kuzu or LadybugDB store "
            "(memory.kuzu, memory.lbug) is opened, never ignored"
        ),
    )
    min_free_disk_mb: float = Field(
        default=64.0,
        ge=0,
        description=(
            "an embedded store refuses writes while less is free on its disk, so a full disk "
            "never leaves a half-written memory (0: never checks)"
        ),
    )
    vector_index_dtype: Literal["f32", "f16", "i8"] = Field(
        default=DEFAULT_VECTOR_INDEX_DTYPE,
        description=(
            "what the SQLite store's HNSW graph (past 20k memories) keeps of each vector: i8 a "
            "quarter of the memory (the default: it lost no recall against f32, measured), f16 "
            "half, f32 as stored; candidates are re-scored from the exact embeddings"
        ),
    )

    @field_validator("accessing_user")
    @classmethod
    def _user_not_blank(cls, value: str) -> str:
        # why no strip: " bob" silently opening bob's memory is worse than a clear refusal
        if not value.strip():
            raise ValueError("must not be empty")
        if value != value.strip():
            raise ValueError(f"{value!r} has leading or trailing white space")
        return value

    @field_validator("storage_location")
    @classmethod
    def _absolute_storage(cls, value: Path) -> Path:
        return absolute_path(value)


class BackendSettings(Section):
    """The server engines: Neo4j 5 over Bolt and FalkorDB over the Redis protocol (DB_TYPE)."""

    slug = "backends"
    title = "Neo4j and FalkorDB"

    neo4j_uri: str = Field(default="", description="DB_TYPE=neo4j: the server, e.g. bolt://localhost:7687")
    neo4j_username: str = Field(default="", description="DB_TYPE=neo4j: the user Smriti logs in as")
    neo4j_password: SecretStr | None = Field(default=None, description="DB_TYPE=neo4j: that user's password")
    # The specification requires NEO4J_USERNAME and NEO4J_PASSWORD; a server run without
    # authentication (dbms.security.auth_enabled=false) must be declared with NEO4J_AUTH=none.
    neo4j_auth: Literal["basic", "none"] = Field(
        default="basic",
        description=(
            "none declares a server without authentication; basic (the default) requires "
            "NEO4J_USERNAME and NEO4J_PASSWORD, so a forgotten password is an error, not a guess"
        ),
    )
    neo4j_database: str = Field(
        default="neo4j",
        description="NEO4J_ISOLATION=tenant: the database every user shares (Neo4j's default)",
    )
    neo4j_isolation: Literal["tenant", "database"] = Field(
        default="tenant",
        description=(
            "tenant: one database, a user property filtered on every query (works on Community "
            "edition); database: a database per user (Enterprise)"
        ),
    )
    falkor_addr: str = Field(
        default="localhost:6379",
        description="DB_TYPE=falkordb: host:port (Redis's port), or a cluster's nodes comma-separated",
    )
    falkor_password: SecretStr | None = Field(
        default=None, description="DB_TYPE=falkordb: the server's password"
    )
    falkor_graph: str = Field(
        default="smriti", description="FALKOR_ISOLATION=tenant: the graph every user shares"
    )
    falkor_isolation: Literal["tenant", "graph"] = Field(
        default="tenant",
        description=(
            "tenant: one graph, a user property on every query; graph: a graph per user ({user}_smriti)"
        ),
    )
    # --- FalkorDB durability and cluster (issue 37; docs/cluster.md) ---
    falkor_wait_replicas: int = Field(
        default=0,
        ge=0,
        description="a store is acknowledged once this many replicas hold it (Redis WAIT; 0: primary only)",
    )
    falkor_wait_ms: int = Field(
        default=1000, ge=1, description="how long a store waits for FALKOR_WAIT_REPLICAS before it fails"
    )
    falkor_failover_seconds: float = Field(
        default=10.0,
        ge=0,
        description=(
            "FalkorDB: how long a call (a store: its reads and its write batch together) retries while "
            "the server restarts or its cluster shard fails over (0: no retry)"
        ),
    )
