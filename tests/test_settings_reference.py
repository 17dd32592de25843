"""Settings a person can find: sections, descriptions, ``smriti config`` and the generated
reference page (issue 38, item 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from smriti.cli.commands import app
from smriti.config import SECTIONS, Settings, SettingsError, env_names, load_settings
from smriti.config.reference import MASK, setting_rows, settings_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "settings.md"

# Every environment variable Smriti read before the settings were grouped into sections
# (issue 38): an MCP client's configuration names them, so none may change or disappear.
VARIABLES_BEFORE_SECTIONS = """
ACCESSING_USER ACTIVATION_ASSOCIATION_WEIGHT ACTIVATION_DAMPING ACTIVATION_MAX_CUE_SHARE
ACTIVATION_MAX_ENGRAMS ACTIVATION_NEW ACTIVATION_SEEDS ANALYSIS_BACKOFF_MAX_SECONDS
ANALYSIS_BACKOFF_SECONDS ANALYSIS_MAX_ATTEMPTS ANALYSIS_RATE_PER_MINUTE ANALYSIS_WORKER
ASSOCIATE_MIN_SIMILARITY ASSOCIATE_TOP_K BACKUP_RESTORE_ON_START BACKUP_SHUTDOWN_TIMEOUT
BACKUP_SYNC_INTERVAL BACKUP_SYNC_TIMEOUT BACKUP_TYPE BRIDGE_MAX_LINKS BRIDGE_SEEDS BRIDGE_WEIGHT
CONSOLIDATION_INTERVAL CONTEXT_ADDITIVE CONTEXT_BACKWARD CONTEXT_BUDGET_CHARS CONTEXT_SEEDS
CONTEXT_WEIGHT CROSS_CLUSTER_PENALTY DB_TYPE DECAY_HALF_LIFE_DAYS EMBEDDING_API_KEY EMBEDDING_BASE_URL
EMBEDDING_DIMS
EMBEDDING_MODEL EMBEDDING_PROVIDER ENTITY_HINT_WEIGHT EPISODE_EVIDENCE EPISODE_WEIGHT
FABRIC_WEIGHT_AUTHORITY FABRIC_WEIGHT_RECENCY FABRIC_WEIGHT_RELEVANCE FALKOR_ADDR FALKOR_GRAPH
FALKOR_ISOLATION FALKOR_PASSWORD FUSION_K FUSION_SCORE_SHARE FUSION_WEIGHT_CUE FUSION_WEIGHT_GRAPH
FUSION_WEIGHT_SIMILARITY FUSION_WEIGHT_TEXT GIT_BASE_URL GRAPH_ACTIVATION HOP_PENALTY
HTTP_KEEP_ALIVE_TIMEOUT HTTP_MAX_CONNECTIONS HTTP_WORKERS IMPORTANT_THRESHOLD INDEX_THRESHOLD
INTENT_TYPE_WEIGHT LEIDEN_RETUNE_GROWTH LLM_API_KEY LLM_BASE_URL LLM_MAX_RETRIES LLM_MODEL
LLM_PROVIDER LLM_QUERY_TIMEOUT LLM_TIMEOUT LOCAL_EMBEDDING_MODEL LOG_LEVEL MAX_CONTENT_CHARS
MAX_HOPS MAX_OPEN_USERS MAX_PER_EPISODE MEMORY_FABRIC_BOOST_FACTOR MEMORY_FABRIC_DEDUP_THRESHOLD
MEMORY_FABRIC_MAX_RESULTS MIN_FREE_DISK_MB NEO4J_AUTH NEO4J_DATABASE NEO4J_ISOLATION
NEO4J_PASSWORD NEO4J_URI NEO4J_USERNAME PRUNE_THRESHOLD QUERY_HUB_NAMES RECENCY_HALF_LIFE_DAYS
REINFORCE_BOOST RELATION_DEPTH RELATION_MAX_EDGES RELATION_NEW RELATION_SEEDS RELATION_TRAVERSAL
RELATION_WEIGHT RERANK_API RERANK_API_KEY RERANK_MODEL RERANK_TIMEOUT RERANK_TOP_N RERANK_URL
RERANK_WEIGHT RERANKER S3_ACCESS_KEY S3_BUCKET S3_ENDPOINT S3_REGION S3_SECRET_KEY
SCORE_WEIGHT_DECAY SCORE_WEIGHT_IMPORTANCE SCORE_WEIGHT_RECENCY SCORE_WEIGHT_SIMILARITY
SCORING_PROFILE SMRITI_SHARED SHARED SHARED_IDLE_TIMEOUT SMRITI_AUTH_AUDIENCE
SMRITI_AUTH_ISSUER_URL SMRITI_AUTH_JWKS_URL SMRITI_AUTH_USER_CLAIM SMRITI_RESOURCE_URL
SMRITI_TOKENS SMRITI_TOKENS_FILE STORAGE_LOCATION STORE_DEDUP_THRESHOLD STRENGTHEN_BOOST
STRENGTHEN_MIN_ACCESS SUBJECT_WEIGHT TIME_WINDOW_WEIGHT USER_IDLE_TIMEOUT VECTOR_INDEX_DTYPE
VECTOR_MIN_SIMILARITY VECTOR_RELATIVE_FLOOR
""".split()


def test_the_checked_in_reference_is_what_the_code_generates():
    assert DOCS.read_text(encoding="utf-8") == settings_markdown(), (
        "docs/settings.md is stale: run `.venv/bin/smriti config --markdown > docs/settings.md`"
    )


def test_every_setting_is_described_and_in_exactly_one_section():
    owners: dict[str, list[str]] = {}
    for section in SECTIONS:
        assert section.__doc__ and section.title and section.slug, section
        for name in section.model_fields:
            owners.setdefault(name, []).append(section.slug)
    assert set(owners) == set(Settings.model_fields)
    assert {name: slugs for name, slugs in owners.items() if len(slugs) > 1} == {}
    undescribed = [
        name for name, info in Settings.model_fields.items() if not (info.description or "").strip()
    ]
    assert undescribed == []
    assert len({section.slug for section in SECTIONS}) == len(SECTIONS)


def test_no_environment_variable_was_renamed_or_lost():
    read_now = {name for field in Settings.model_fields for name in env_names(field)}
    assert sorted(set(VARIABLES_BEFORE_SECTIONS) - read_now) == []


def test_fields_stay_flat_attributes_read_from_their_variables(monkeypatch):
    monkeypatch.setenv("MAX_HOPS", "2")
    monkeypatch.setenv("shared", "false")  # the old spelling, in lower case, still reaches the field
    settings = load_settings()
    assert settings.max_hops == 2 and settings.shared is False


def test_an_error_names_the_variable_a_user_sets(monkeypatch):
    monkeypatch.setenv("SMRITI_SHARED", "perhaps")
    monkeypatch.setenv("MAX_HOPS", "9")
    with pytest.raises(SettingsError) as raised:
        load_settings()
    message = str(raised.value)
    assert "SMRITI_SHARED:" in message and "MAX_HOPS:" in message


def _config(monkeypatch, *args: str, **environment: str):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    return CliRunner().invoke(app, ["config", *args])


def test_smriti_config_shows_value_section_and_source_with_secrets_masked(monkeypatch, tmp_path):
    secret, password = "sk-very-secret-key", "hunter2pass"
    done = _config(
        monkeypatch,
        "--json",
        STORAGE_LOCATION=str(tmp_path),
        LLM_API_KEY=secret,
        GIT_BASE_URL=f"https://me:{password}@git.example.com/backups",
        max_hops="2",
    )
    assert done.exit_code == 0, done.output
    assert secret not in done.output and password not in done.output
    rows = {row["variable"]: row for row in json.loads(done.output)}
    assert len(rows) == len(Settings.model_fields)
    assert rows["LLM_API_KEY"]["value"] == MASK
    assert rows["LLM_API_KEY"]["source"] == "environment (LLM_API_KEY)"
    assert rows["LLM_API_KEY"]["section"] == "models"
    assert rows["GIT_BASE_URL"]["value"] == f"https://me:{MASK}@git.example.com/backups"
    assert (rows["MAX_HOPS"]["value"], rows["MAX_HOPS"]["source"]) == ("2", "environment (max_hops)")
    assert rows["MAX_HOPS"]["section"] == "stages"
    assert (rows["FUSION_K"]["value"], rows["FUSION_K"]["source"]) == ("5", "default")
    assert rows["STORAGE_LOCATION"]["value"] == str(tmp_path)


def test_smriti_config_one_section_and_only_what_changed(monkeypatch):
    done = _config(monkeypatch, "stages", "--changed", "--json", GRAPH_ACTIVATION="true", FUSION_K="7")
    assert done.exit_code == 0, done.output
    rows = json.loads(done.output)
    assert [(row["variable"], row["value"]) for row in rows] == [("GRAPH_ACTIVATION", "true")]


def test_smriti_config_table_and_the_user_option(monkeypatch):
    done = CliRunner().invoke(app, ["--user", "carol", "config", "storage"])
    assert done.exit_code == 0, done.output
    assert "ACCESSING_USER" in done.output and "carol" in done.output and "option (--user)" in done.output
    assert "FUSION_K" not in done.output


def test_smriti_config_refuses_an_unknown_section_and_a_bad_value(monkeypatch):
    assert _config(monkeypatch, "nonsense").exit_code == 2
    done = _config(monkeypatch, EMBEDDING_DIMS="lots")
    assert done.exit_code == 2
    assert "EMBEDDING_DIMS" in done.output and "Traceback" not in done.output


def test_a_library_argument_is_named_as_such():
    rows = {row.variable: row for row in setting_rows(load_settings(max_hops=3), environ={})}
    assert (rows["MAX_HOPS"].value, rows["MAX_HOPS"].source) == ("3", "argument")
    assert rows["HOP_PENALTY"].source == "default"


def test_the_markdown_flag_prints_the_reference():
    done = CliRunner().invoke(app, ["config", "--markdown"])
    assert done.exit_code == 0 and done.output == settings_markdown()
