"""Shared fixtures. Real databases on tmp_path; only the models are faked (deterministically)."""

from __future__ import annotations

import pytest

from smriti.config import Settings

# Environment variables that would make a test depend on the machine running it.
_LEAKY_ENV = (
    "ACCESSING_USER", "STORAGE_LOCATION", "DB_TYPE", "LLM_API_KEY", "EMBEDDING_API_KEY", "LLM_PROVIDER",
    "EMBEDDING_PROVIDER", "EMBEDDING_DIMS", "BACKUP_TYPE", "CONSOLIDATION_INTERVAL", "BACKUP_SYNC_INTERVAL",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _LEAKY_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Offline settings on a fresh storage folder: heuristic analysis, 64-dim hashing embedder."""
    return Settings(
        storage_location=tmp_path / "smriti",
        accessing_user="alice",
        llm_provider="heuristic",
        embedding_provider="hashing",
        embedding_dims=64,
        consolidation_interval=0,
        backup_sync_interval=0,
    )
