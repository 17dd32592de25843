"""Shared fixtures. Real databases on tmp_path; only the models are faked (deterministically)."""

from __future__ import annotations

import pytest

from smriti.config import Settings

# Environment variables that would make a test depend on the machine running it.
_LEAKY_ENV = (
    "ACCESSING_USER",
    "STORAGE_LOCATION",
    "DB_TYPE",
    "LLM_API_KEY",
    "EMBEDDING_API_KEY",
    "LLM_PROVIDER",
    "EMBEDDING_PROVIDER",
    "EMBEDDING_DIMS",
    "BACKUP_TYPE",
    "CONSOLIDATION_INTERVAL",
    "BACKUP_SYNC_INTERVAL",
    "SMRITI_SHARED",
    "SHARED_IDLE_TIMEOUT",
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


class KeywordEmbeddings:
    """A deterministic fake embedding model with controllable geometry.

    Each word of ``vocabulary`` owns one axis; a text's vector is the normalised count of
    its vocabulary words (other words are ignored), so "alpha" and "beta" memories are
    orthogonal and tests can reason about exact similarities.
    """

    def __init__(self, vocabulary: list[str], dims: int = 64) -> None:
        assert len(vocabulary) <= dims
        self.axes = {word: i for i, word in enumerate(vocabulary)}
        self.dims = dims
        self.calls = 0

    def _embed(self, text: str) -> list[float]:
        import re

        vector = [0.0] * self.dims
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            if word in self.axes:
                vector[self.axes[word]] += 1.0
        norm = sum(v * v for v in vector) ** 0.5
        return [v / norm for v in vector] if norm else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


@pytest.fixture
def make_context(settings):
    """Build a MemoryContext on a real store of the default backend (DB_TYPE=auto: SQLite).

    Usage: ``make_context(embedder=..., llm=..., **setting_overrides)``.
    """
    from datetime import UTC, datetime

    from smriti.nodes.state import MemoryContext
    from smriti.providers.hashing import HashingEmbeddings
    from smriti.stores import make_store

    opened = []

    def build(embedder=None, llm=None, clock=None, user="alice", **overrides):
        cfg = settings.model_copy(update=overrides) if overrides else settings
        store = make_store(cfg, user)
        opened.append(store)
        return MemoryContext(
            store=store,
            embedder=embedder or HashingEmbeddings(cfg.embedding_dims),
            settings=cfg,
            llm=llm,
            clock=clock or (lambda: datetime(2026, 1, 15, 12, 0, tzinfo=UTC)),
        )

    yield build
    for store in opened:
        store.close()


@pytest.fixture
def keyword_embedder():
    """The KeywordEmbeddings class, for exact geometry: ``keyword_embedder(["alpha", ...])``."""
    return KeywordEmbeddings
