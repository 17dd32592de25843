"""Settings: the original environment variables, clear errors, secrets kept out of output."""

from __future__ import annotations

from pathlib import Path

import pytest

from smriti.config import SettingsError, load_settings

ORIGINAL_DEFAULTS = {
    "storage_location": Path("~/.smriti").expanduser(),
    "db_type": "auto",  # sqlite, or kuzu for a folder that holds only a Kuzu store
    "llm_model": "gpt-4o-mini",
    "embedding_model": "text-embedding-3-small",
    "embedding_dims": 1536,
    "backup_type": "none",
    "backup_sync_interval": 60,
    "consolidation_interval": 3600,
    "memory_fabric_dedup_threshold": 0.85,
    "memory_fabric_boost_factor": 1.2,
    "memory_fabric_max_results": 20,
}


def test_defaults_match_the_original_server():
    settings = load_settings()
    for field, value in ORIGINAL_DEFAULTS.items():
        assert getattr(settings, field) == value, field
    assert settings.accessing_user  # the OS user


def test_original_variable_names_are_read(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCESSING_USER", "bob")
    monkeypatch.setenv("STORAGE_LOCATION", str(tmp_path))
    monkeypatch.setenv("DB_TYPE", "falkordb")
    monkeypatch.setenv("FALKOR_ISOLATION", "graph")
    monkeypatch.setenv("EMBEDDING_DIMS", "384")
    monkeypatch.setenv("MEMORY_FABRIC_BOOST_FACTOR", "1.5")
    settings = load_settings()
    assert (settings.accessing_user, settings.storage_location, settings.db_type) == (
        "bob",
        tmp_path,
        "falkordb",
    )
    assert settings.falkor_isolation == "graph"
    assert settings.embedding_dims == 384
    assert settings.memory_fabric_boost_factor == 1.5


def test_embedding_key_falls_back_to_llm_key(monkeypatch):
    monkeypatch.setenv("LLM_API_KEY", "sk-llm")
    assert load_settings().effective_embedding_key.get_secret_value() == "sk-llm"
    monkeypatch.setenv("EMBEDDING_API_KEY", "sk-emb")
    assert load_settings().effective_embedding_key.get_secret_value() == "sk-emb"


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DB_TYPE", "postgres"),  # sqlite became a backend (the default)
        ("EMBEDDING_DIMS", "many"),
        ("CONSOLIDATION_INTERVAL", "-5"),
        ("MEMORY_FABRIC_DEDUP_THRESHOLD", "1.5"),
        ("BACKUP_TYPE", "dropbox"),
    ],
)
def test_invalid_value_names_the_variable(monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as error:
        load_settings()
    message = str(error.value)
    assert f"{variable}:" in message
    assert "Traceback" not in message and "pydantic" not in message.lower()


def test_missing_requirement_of_a_choice_is_named(monkeypatch):
    monkeypatch.setenv("BACKUP_TYPE", "github")
    with pytest.raises(SettingsError, match="GIT_BASE_URL"):
        load_settings()


def test_neo4j_needs_credentials_unless_declared_without_auth(monkeypatch):
    monkeypatch.setenv("DB_TYPE", "neo4j")
    monkeypatch.setenv("NEO4J_URI", "bolt://localhost:7687")
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "NEO4J_USERNAME" in str(error.value) and "NEO4J_PASSWORD" in str(error.value)
    monkeypatch.setenv("NEO4J_USERNAME", "neo4j")
    with pytest.raises(SettingsError, match="NEO4J_PASSWORD"):
        load_settings()
    monkeypatch.setenv("NEO4J_PASSWORD", "secret")
    assert load_settings().neo4j_auth == "basic"
    monkeypatch.delenv("NEO4J_USERNAME")
    monkeypatch.delenv("NEO4J_PASSWORD")
    monkeypatch.setenv("NEO4J_AUTH", "none")
    assert load_settings().neo4j_auth == "none"


def test_secrets_never_appear_in_repr_or_errors(monkeypatch):
    monkeypatch.setenv("LLM_API_KEY", "sk-very-secret")
    monkeypatch.setenv("S3_SECRET_KEY", "s3-very-secret")
    settings = load_settings()
    assert "very-secret" not in repr(settings) and "very-secret" not in str(settings.model_dump())
    monkeypatch.setenv("EMBEDDING_DIMS", "0")
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert "very-secret" not in str(error.value)


def test_settings_are_not_read_at_import(monkeypatch):
    """Importing the package with a broken environment must work; only load_settings() complains."""
    import subprocess
    import sys

    monkeypatch.setenv("EMBEDDING_DIMS", "not-a-number")
    code = "import smriti.config, smriti.memory, smriti.server.app, smriti.cli.commands; print('imported')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"
