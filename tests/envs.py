"""Environment for subprocess and CLI tests: offline models, no background work, one user."""

from __future__ import annotations

from pathlib import Path


def offline_env(location: Path, **extra: str) -> dict[str, str]:
    """Variables that make a `smriti`/`smriti-mcp` run offline and deterministic in ``location``."""
    return {
        "STORAGE_LOCATION": str(location),
        "ACCESSING_USER": "alice",
        "EMBEDDING_DIMS": "64",
        "LLM_PROVIDER": "heuristic",
        "EMBEDDING_PROVIDER": "hashing",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        # The in-process server: a test that starts `smriti-mcp` owns its process and database.
        # The shared server's tests (test_shared_server.py) turn it on themselves.
        "SMRITI_SHARED": "false",
        **extra,
    }
