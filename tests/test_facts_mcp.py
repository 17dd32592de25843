"""The facts and the time a memory states, through a real MCP session with ``smriti-mcp`` and
through the CLI (``smriti enrich --wait``), the model served by the local OpenAI-compatible stub.

A client stores "yesterday ..."; the server's worker lands the model's analysis; the memory is
then found by a word only its facts hold, with the stated day as its timestamp, and the facts
show in ``memory://graph``. A memory stored with ``occurred_at`` keeps the caller's time.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import anyio
from typer.testing import CliRunner

from smriti.cli import app
from tests.envs import offline_env
from tests.openai_stub import OpenAIStub
from tests.test_facts import CONTENT, FACTS, _model, _stored_at
from tests.test_supersession_mcp import _call, _session

TOLD = "2026-03-02T14:00:00+00:00"


class Model:
    """The stub's answers ("yesterday" of the store time), remembering each store time seen."""

    def __init__(self) -> None:
        self.seen: list[datetime] = []
        self._answer = _model(self._yesterday)

    def _yesterday(self, stored: datetime) -> str:
        self.seen.append(stored)
        return (stored - timedelta(days=1)).date().isoformat()

    def __call__(self, prompt: str) -> str:
        return self._answer(prompt)


def _llm_env(tmp_path, stub: OpenAIStub, **extra: str) -> dict[str, str]:
    return offline_env(
        tmp_path / "store",
        LLM_PROVIDER="openai",
        LLM_BASE_URL=stub.base_url,
        LLM_API_KEY="sk-test",
        ANALYSIS_BACKOFF_SECONDS="0.1",
        ANALYSIS_RATE_PER_MINUTE="0",
        ANALYSIS_MAX_ATTEMPTS="1",
        **extra,
    )


def _midnight_before(stored: datetime) -> str:
    day = (stored - timedelta(days=1)).date()
    return datetime(day.year, day.month, day.day, tzinfo=UTC).isoformat()


def test_facts_and_the_stated_time_through_an_mcp_session(tmp_path):
    model = Model()
    with OpenAIStub(model, dims=64) as stub:
        env = _llm_env(tmp_path, stub, LOG_LEVEL="INFO")

        async def body(client) -> None:
            stored = (await _call(client, "smriti_store", content=CONTENT))["id"]
            told = await _call(
                client, "smriti_store", content=CONTENT.replace("Alice", "Carol"), occurred_at=TOLD
            )
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                queue = (await _call(client, "smriti_manage", action="stats"))["details"]["analysis_queue"]
                if queue["pending"] == 0:
                    break
                await anyio.sleep(0.1)
            assert queue["pending"] == 0 and queue["failed"] == 0

            found = (await _call(client, "smriti_recall", query="Alice Qdrant", limit=3))["results"]
            assert found[0]["id"] == stored
            assert found[0]["timestamp"] == _midnight_before(model.seen[0])
            assert found[0]["metadata"]["facts"] == FACTS
            # the model stated "yesterday" for Carol's memory too; the caller's time stays
            carol = (await _call(client, "smriti_recall", query="Carol Qdrant", limit=3))["results"]
            assert carol[0]["id"] == told["id"] and carol[0]["timestamp"] == TOLD

            graph = json.loads((await client.read_resource("memory://graph")).contents[0].text)
            facts = {n["id"]: n["facts"] for n in graph["nodes"] if n["kind"] == "memory"}
            assert facts[stored] == FACTS
            assert facts[told["id"]] == [fact.replace("Alice", "Carol") for fact in FACTS]

        _session(env, tmp_path / "server.log", body)
    # the memory with the caller's time: relative times resolve against that time
    assert model.seen[1] == datetime.fromisoformat(TOLD)


def _run(env, *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result.stdout


def test_enrich_wait_lands_facts_and_the_stated_time_from_the_cli(tmp_path):
    prompts: list[str] = []
    answer = _model(lambda stored: (stored - timedelta(days=1)).date().isoformat())

    def model(prompt: str) -> str:
        prompts.append(prompt)
        return answer(prompt)

    with OpenAIStub(model, dims=64) as stub:
        env = _llm_env(tmp_path, stub, COLUMNS="220")
        stored = json.loads(_run(env, "store", CONTENT, "--json"))["id"]
        assert "1 landed" in _run(env, "enrich", "--wait")
        found = json.loads(_run(env, "recall", "Qdrant", "--json"))["results"]
    analysed = [p for p in prompts if "Memory:\n" in p]
    assert found[0]["id"] == stored
    assert found[0]["timestamp"] == _midnight_before(_stored_at(analysed[0]))
