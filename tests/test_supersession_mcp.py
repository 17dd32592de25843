"""Corrections and the analysis queue through real MCP sessions with the ``smriti-mcp`` process.

Supersession, explicit (``supersedes``) and detected (same subject and single-valued relation,
another value), as a client sees it; and a server killed with ``kill -9`` while analyses are
queued: after a restart every memory is analysed once, its cues replaced, nothing lost and
nothing doubled. Only the model is scripted (the local OpenAI-compatible stub, over HTTP).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.config import Settings
from smriti.memory import Memory
from tests.envs import offline_env
from tests.openai_stub import OpenAIStub, Reply
from tests.test_server_stdio import INITIALIZE, _read_replies, _rpc, server_command


def _session(env: dict[str, str], log: Path, body) -> None:
    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def main() -> None:
        with log.open("a") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await body(client)

    anyio.run(main)


async def _call(client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


def test_corrections_through_an_mcp_session(tmp_path):
    env = offline_env(tmp_path / "store", LOG_LEVEL="INFO")
    query = "which vector store does Alice prefer for RAG?"

    async def body(client) -> None:
        old = (await _call(client, "smriti_store", content="Alice prefers pgvector for RAG projects."))["id"]
        for _ in range(3):  # recalled often: without supersession it would outrank the correction
            await _call(client, "smriti_recall", query=query)
        new = await _call(client, "smriti_store", content="Alice now prefers Qdrant for RAG projects.")
        assert new["superseded"] == [old]  # detected: alice prefers, pgvector -> qdrant

        current = await _call(client, "smriti_recall", query=query, explain=True)
        ids = [r["id"] for r in current["results"]]
        assert ids[0] == new["id"] and old not in ids
        hidden = next(step for step in current["trace"] if step["node"] == "current_only")
        assert old in hidden["notes"] and "superseded" in hidden["notes"]

        history = await _call(client, "smriti_recall", query=query, explain=True, include_superseded=True)
        ranked = {r["id"]: r for r in history["results"]}
        assert [r["id"] for r in history["results"]][:2] == [new["id"], old]
        assert ranked[old]["superseded_by"] == new["id"] and "superseded_by" not in ranked[new["id"]]
        assert ranked[old]["components"]["superseded"] <= 0.5
        assert ranked[old]["score"] < ranked[new["id"]]["score"]

        # explicit: the caller says which memory a new one corrects
        first = await _call(client, "smriti_store", content="The team standup is at 9:30 in room Ada.")
        standup = first["id"]
        moved = await _call(
            client, "smriti_store", content="The standup starts at 10:00 from now on.", supersedes=standup
        )
        assert moved["superseded"] == [standup]
        listed = await _call(client, "smriti_recall", query="team standup", include_superseded=True)
        assert {r["id"]: r.get("superseded_by") for r in listed["results"]}[standup] == moved["id"]

        # an unknown id is a user error and nothing is stored
        before = (await _call(client, "smriti_manage", action="stats"))["details"]["engrams"]
        refused = await client.call_tool(
            "smriti_store", {"content": "Alice now prefers Milvus.", "supersedes": "no-such-id"}
        )
        assert refused.is_error and "no-such-id" in refused.content[0].text
        assert (await _call(client, "smriti_manage", action="stats"))["details"]["engrams"] == before

        # forget still deletes, and the corrected fact is current again
        await _call(client, "smriti_manage", action="forget", memory_id=new["id"])
        again = await _call(client, "smriti_recall", query=query)
        first = again["results"][0]
        assert first["id"] == old and "superseded_by" not in first

    _session(env, tmp_path / "server.log", body)
    with Memory.open(Settings(**_settings_from(env))) as memory:  # history kept on disk
        assert memory.context.store.get_engram(standup_id(memory)).superseded_by != ""


def _settings_from(env: dict[str, str]) -> dict[str, object]:
    return {
        "storage_location": Path(env["STORAGE_LOCATION"]),
        "accessing_user": env["ACCESSING_USER"],
        "llm_provider": "heuristic",
        "embedding_provider": "hashing",
        "embedding_dims": int(env["EMBEDDING_DIMS"]),
        "consolidation_interval": 0,
    }


def standup_id(memory: Memory) -> str:
    states = memory.context.store.engram_states()
    engrams = memory.context.store.get_engrams([s.id for s in states])
    return next(e.id for e in engrams if "9:30" in e.content)


# ----------------------------------------------------------------------------- kill -9
CODENAMES = ["Kestrel", "Osprey", "Heron"]


def _analysis(prompt: str) -> str:
    """The model's analysis: two cues and a fact of the memory's code name, none of the heuristic's."""
    memory = prompt.split("Memory:\n", 1)[-1].split("\n\nEarlier memories", 1)[0]
    name = next(n for n in CODENAMES if n in memory)
    return json.dumps(
        {
            "summary": f"LLM: project {name}",
            "memory_type": "semantic",
            "cues": [{"name": name, "type": "project"}, {"name": f"{name}-llm", "type": "concept"}],
            "relations": [{"source": name, "relation": "owned_by", "target": f"team-{name}"}],
        }
    )


def test_queued_analyses_survive_kill_9_and_land_once(tmp_path):
    with OpenAIStub(lambda prompt: Reply(hang=True), dims=64) as stub:
        env = offline_env(
            tmp_path / "store",
            LOG_LEVEL="INFO",
            LLM_PROVIDER="openai",
            LLM_BASE_URL=stub.base_url,
            LLM_API_KEY="sk-test",
            LLM_TIMEOUT="60",
            ANALYSIS_BACKOFF_SECONDS="0.1",
            ANALYSIS_RATE_PER_MINUTE="0",
        )
        pipe = subprocess.PIPE
        process = subprocess.Popen(
            [sys.executable, "-m", "smriti.server"],
            stdin=pipe,
            stdout=pipe,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        try:
            messages = [_rpc(1, "initialize", INITIALIZE), _rpc(None, "notifications/initialized")]
            for n, name in enumerate(CODENAMES, start=2):
                content = f"The {name} migration is owned by the platform team and ships in March."
                arguments = {"name": "smriti_store", "arguments": {"content": content}}
                messages.append(_rpc(n, "tools/call", arguments))
            process.stdin.write("".join(messages).encode())
            process.stdin.flush()
            replies = _read_replies(process, {1, 2, 3, 4})
            stored = [r["result"]["structuredContent"] for r in replies if r.get("id") in (2, 3, 4)]
            assert all(s["analysis_queued"] for s in stored) and len(stored) == 3
            deadline = time.monotonic() + 10
            while not stub.chat_times and time.monotonic() < deadline:  # the worker is mid-call
                time.sleep(0.05)
            assert stub.chat_times
        finally:
            process.kill()  # SIGKILL: no shutdown, no final write
            process.wait(10)

        with Memory.open(Settings(**_settings_from(env))) as memory:
            queue = memory.analysis_queue()
            assert queue["pending"] == 3 and queue["failed"] == 0  # nothing lost
            ids = sorted(s["id"] for s in stored)
            assert sorted(e.id for e in memory.context.store.get_engrams(ids)) == ids

        stub.chat_reply = _analysis
        calls_before = len(stub.chat_times)

        async def drain(client) -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                details = (await _call(client, "smriti_manage", action="stats"))["details"]
                if details["analysis_queue"]["pending"] == 0:
                    break
                await anyio.sleep(0.1)
            assert details["analysis_queue"] == {
                "pending": 0,
                "failed": 0,
                "next_due": None,
                "failed_memories": [],
            }

        _session(env, tmp_path / "server.log", drain)
        assert len(stub.chat_times) - calls_before == 3  # each memory analysed once after the restart

    with Memory.open(Settings(**_settings_from(env))) as memory:
        store = memory.context.store
        for engram in store.get_engrams(ids):
            name = next(n for n in CODENAMES if n in engram.content)
            cues = [(c.name, c.cue_type) for c in store.cues_of([engram.id])[engram.id]]
            assert sorted(cues) == [(name.lower(), "project"), (f"{name.lower()}-llm", "concept")]
            facts = [(f.source, f.relation, f.target) for f in store.relations_of([engram.id])]
            assert facts == [(name.lower(), "owned_by", f"team-{name.lower()}")]
            assert engram.summary == f"LLM: project {name}"
        cooccurs = [r for r in memory.export_records() if r["kind"] == "co_occurs"]
        assert sorted(r["strength"] for r in cooccurs) == [1.0, 1.0, 1.0]  # one pair each, not doubled
