"""Settings sections: the server's processes and connections, HTTP authentication, backups."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator

from smriti.config.section import Section, absolute_path


class ServerSettings(Section):
    """The shared local server that stdio clients and the CLI attach to, and the streamable-HTTP
    server's users, workers and connections."""

    slug = "server"
    title = "Server"

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        default="INFO", description="what the server logs on stderr (stdout is the MCP channel)"
    )
    # SMRITI_SHARED, not SHARED: a bare SHARED in someone's environment means something else.
    shared: bool = Field(
        default=True,
        validation_alias=AliasChoices("smriti_shared", "shared"),
        description=(
            "stdio: relay to the user's shared server (started on demand), so every client sees one "
            "memory; false: serve in-process"
        ),
    )
    shared_idle_timeout: float = Field(
        default=600.0, gt=0, description="seconds with no request in flight before the shared server exits"
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
    # Slow clients (issue 37): uvicorn has no timer on a request still arriving (server/http_limits.py).
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


class AuthSettings(Section):
    """Who may use the streamable-HTTP server (server/auth.py): bearer tokens mapped to users, or
    the JWT access tokens of an external OAuth authorization server."""

    slug = "auth"
    title = "HTTP authentication"

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
    smriti_auth_user_claim: str = Field(
        default="sub", description="the claim naming the Smriti user (sub: the subject, every issuer has it)"
    )
    smriti_resource_url: str = Field(
        default="", description="the public URL of the MCP endpoint (default http://HOST:PORT/mcp)"
    )

    @field_validator("smriti_tokens_file")
    @classmethod
    def _absolute_tokens_file(cls, value: Path | None) -> Path | None:
        return None if value is None else absolute_path(value)


class BackupSettings(Section):
    """Copies of each user's memory in a git repository or an S3 bucket (stores/backup/)."""

    slug = "backup"
    title = "Backups"

    backup_type: Literal["none", "github", "s3"] = Field(
        default="none",
        description="where backups go: a git remote (github) or S3; none, as nothing is set up",
    )
    backup_sync_interval: int = Field(
        default=60, ge=0, description="seconds between the server's syncs (0: only at shutdown)"
    )
    # A sync gives up after this long, retries included (a remote that never answers must not
    # hold the server); the sync at shutdown gets the shorter budget.
    backup_sync_timeout: float = Field(
        default=60.0,
        gt=0,
        description="seconds a sync may take, retries included, so a dead remote never holds the server",
    )
    backup_shutdown_timeout: float = Field(
        default=10.0, gt=0, description="seconds the sync at shutdown may take (a client waits for the exit)"
    )
    backup_restore_on_start: bool = Field(
        default=False, description="restore the latest backup at start when the local memory is empty"
    )
    git_base_url: str = Field(
        default="",
        description=(
            "BACKUP_TYPE=github: a git URL or folder; each user's repository is {base}/{user}-smriti.git"
        ),
    )
    s3_endpoint: str = Field(default="", description="BACKUP_TYPE=s3: an S3-compatible endpoint (empty: AWS)")
    s3_region: str = Field(default="", description="BACKUP_TYPE=s3: the bucket's region")
    s3_access_key: SecretStr | None = Field(default=None, description="BACKUP_TYPE=s3: the access key id")
    s3_secret_key: SecretStr | None = Field(default=None, description="BACKUP_TYPE=s3: the secret access key")
    s3_bucket: str = Field(default="smriti-backups", description="BACKUP_TYPE=s3: the bucket")
