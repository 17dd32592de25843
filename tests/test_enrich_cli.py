"""``smriti store --supersedes``, ``recall --include-superseded``, ``enrich`` and ``stats``
through typer's CliRunner, with the LLM served by the local OpenAI-compatible stub."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from smriti.cli import app
from tests.envs import offline_env
from tests.openai_stub import OpenAIStub, Reply

ANALYSIS = {
    "summary": "LLM summary",
    "memory_type": "semantic",
    "cues": [{"name": "Helix", "type": "project"}],
    "relations": [],
}


def _run(env, *args: str):
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result.stdout


def test_enrich_drains_what_store_queued_and_stats_shows_parked(tmp_path):
    replies = iter([Reply("the model is down", status=500)])

    def answer(prompt: str):
        return next(replies, None) or json.dumps(ANALYSIS)

    with OpenAIStub(answer, dims=64) as stub:
        env = offline_env(
            tmp_path / "store",
            COLUMNS="220",
            LLM_PROVIDER="openai",
            LLM_BASE_URL=stub.base_url,
            LLM_API_KEY="sk-test",
            ANALYSIS_MAX_ATTEMPTS="1",
        )
        stored = json.loads(_run(env, "store", "Project Helix ships in May with Priya", "--json"))
        assert stored["analysis_queued"] is True
        assert "LLM analysis queued" in _run(env, "store", "Project Helix needs a new logo designer")
        first = json.loads(_run(env, "enrich", "--json"))
        assert first["ran"] == {"parked": 1, "landed": 1}
        stats = json.loads(_run(env, "stats", "--json"))["analysis_queue"]
        assert stats["failed"] == 1 and "500" in stats["failed_memories"][0]["error"]
        assert stats["failed_memories"][0]["id"] == stored["id"]
        text = _run(env, "enrich", "--wait", "--retry-failed")
        assert "1 landed" in text and "0 pending, 0 failed" in text


def test_store_supersedes_by_id_prefix_and_recall_includes_history(tmp_path):
    env = offline_env(tmp_path / "store", COLUMNS="220")
    old = json.loads(_run(env, "store", "The standup is at 9:30 in room Ada", "--json"))["id"]
    new = json.loads(_run(env, "store", "The standup is at 10:00 now", "--supersedes", old[:8], "--json"))
    assert new["superseded"] == [old]
    current = json.loads(_run(env, "recall", "standup", "--json"))
    assert [r["id"] for r in current["results"]] == [new["id"]]
    history = json.loads(_run(env, "recall", "standup", "--include-superseded", "--json"))
    assert [(r["id"], r.get("superseded_by")) for r in history["results"]] == [
        (new["id"], None),
        (old, new["id"]),
    ]
    refused = CliRunner().invoke(app, ["store", "Another time", "--supersedes", "nope-nope"], env=env)
    assert refused.exit_code == 1 and "nope-nope" in refused.stderr
