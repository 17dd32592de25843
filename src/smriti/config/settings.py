"""The one :class:`Settings` object: every section's fields, read from the environment once.

How the settings are grouped, and why this way: each concern is a section class (a pydantic
``BaseModel`` under ``smriti/config/``: storage, models, server, recall, ...) whose fields carry
their ``description``, and :class:`Settings` inherits them all. Inheritance, not nesting,
because many modules read flat attributes (``settings.recall_limit``) and environment variables
keep their flat names (``MAX_HOPS``, not ``STAGES__MAX_HOPS``): the sections only decide how the
settings are documented (``docs/settings.md``, generated) and shown (``smriti config``). A field
belongs to the section class that declares it (:data:`SECTIONS`, in the order shown).

Names and defaults follow the original Smriti (Go) server so an existing MCP client
configuration keeps working; the Memory Fabric variables and the scoring knobs (docs/recall.md) are
added. Nothing reads the environment at import time: call :func:`load_settings` (or build
:class:`Settings` yourself in library use).
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import AliasChoices, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from smriti.config.lifecycle import ConsolidationSettings, StoreSettings
from smriti.config.models import AnalysisSettings, ModelSettings, RerankerSettings
from smriti.config.recall import FocusSettings, RecallSettings, ScoringSettings, StageSettings
from smriti.config.section import Section
from smriti.config.server import AuthSettings, BackupSettings, ServerSettings
from smriti.config.storage import BackendSettings, StorageSettings
from smriti.errors import SettingsError

# The sections in the order ``smriti config`` and docs/settings.md show them.
SECTIONS: tuple[type[Section], ...] = (
    StorageSettings,
    ModelSettings,
    AnalysisSettings,
    StoreSettings,
    RecallSettings,
    FocusSettings,
    ScoringSettings,
    StageSettings,
    RerankerSettings,
    ConsolidationSettings,
    ServerSettings,
    AuthSettings,
    BackupSettings,
    BackendSettings,
)


# Bases in reverse so that pydantic, which collects fields from the last base first, keeps the
# fields in the order of SECTIONS.
class Settings(
    BackendSettings,
    BackupSettings,
    AuthSettings,
    ServerSettings,
    ConsolidationSettings,
    RerankerSettings,
    StageSettings,
    ScoringSettings,
    FocusSettings,
    RecallSettings,
    StoreSettings,
    AnalysisSettings,
    ModelSettings,
    StorageSettings,
    BaseSettings,
):
    """All configuration, from environment variables (case-insensitive names); its fields are
    declared by the section classes of :data:`SECTIONS`."""

    model_config = SettingsConfigDict(
        env_prefix="",
        case_sensitive=False,
        extra="ignore",
        validate_default=True,
        populate_by_name=True,
    )

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


def env_names(field: str) -> list[str]:
    """The environment variables that set ``field``, the preferred one first (SMRITI_SHARED, then
    SHARED): the field's alias choices where it has them, else its own name in capitals."""
    alias = Settings.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice).upper() for choice in alias.choices]
    return [(alias if isinstance(alias, str) else field).upper()]


def setting_env_names() -> list[str]:
    """The environment variables (lower case) that change what a server does: every setting's
    names but those that only say how a client attaches (SMRITI_SHARED, LOG_LEVEL).

    The shared server publishes them so a stdio relay, which reads no settings (it must not
    import pydantic), can digest its own environment the same way
    (:func:`smriti.server.shared.client.environment_digest`).
    """
    names: set[str] = set()
    for field in Settings.model_fields:
        if field in ("shared", "log_level"):
            continue
        names.add(field)
        names.update(name.lower() for name in env_names(field))
    return sorted(names)


def _env_name(location: str) -> str:
    """The variable to name in an error about ``location`` (a field name or one of its aliases)."""
    for field in Settings.model_fields:
        names = env_names(field)
        if location.upper() == field.upper() or location.upper() in names:
            return names[0]
    return location.upper()


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


__all__ = [
    "SECTIONS",
    "Settings",
    "SettingsError",
    "env_names",
    "format_validation_error",
    "load_settings",
    "setting_env_names",
]
