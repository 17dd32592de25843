"""Bad input gets a tool error and changes nothing; failing models never take the server down.

Most checks use the SDK's in-process client (``Client(server)``) for speed; one session
runs over stdio, and the process-level failures (bad settings, unsafe user) run the script.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.server.app import build_server

MAX_CHARS = 200


def _stdio_flow():
    # --import-mode=importlib: load the shared helpers of the stdio test by path.
    spec = importlib.util.spec_from_file_location(
        "_smriti_stdio_flow", Path(__file__).with_name("test_server_stdio.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flow = _stdio_flow()


async def engram_count(client) -> int:
    stats = await client.call_tool("smriti_manage", {"action": "stats"})
    assert not stats.is_error, stats.content
    return stats.structured_content["details"]["engrams"]


BAD_CALLS = [
    ("smriti_store", {"content": ""}, "content"),
    ("smriti_store", {"content": "  \n\t "}, "content"),
    ("smriti_store", {"content": "x" * (MAX_CHARS + 1)}, "limit"),
    ("smriti_store", {"content": "fine", "importance": -0.1}, "importance"),
    ("smriti_store", {"content": "fine", "importance": 1.01}, "importance"),
    ("smriti_store", {"content": "fine", "importance": float("nan")}, "importance"),
    ("smriti_store", {"content": "fine", "importance": "NaN"}, "importance"),
    ("smriti_store", {"content": "fine", "importance": "inf"}, "importance"),
    ("smriti_store", {"importance": 0.5}, "content"),
    ("smriti_recall", {"query": "x", "mode": "dream"}, "mode"),
    ("smriti_recall", {"query": "x", "memory_type": "dream"}, "memory_type"),
    ("smriti_recall", {"query": "x", "limit": 0}, "limit"),
    ("smriti_recall", {"query": "x", "limit": -3}, "limit"),
    ("smriti_recall", {"query": "x", "limit": 21}, "limit"),
    ("smriti_manage", {"action": "forget", "memory_id": "no-such-id"}, "no-such-id"),
    ("smriti_manage", {"action": "forget"}, "memory_id"),
    ("smriti_manage", {"action": "forget", "memory_id": "   "}, "memory_id"),
    ("smriti_manage", {"action": "explode"}, "action"),
]


@pytest.fixture
def server_settings(settings):
    return settings.model_copy(update={"max_content_chars": MAX_CHARS})


@pytest.mark.parametrize(("tool", "arguments", "needle"), BAD_CALLS, ids=lambda v: str(v)[:40])
def test_bad_input_is_a_tool_error_and_changes_nothing(server_settings, tool, arguments, needle):
    async def main() -> None:
        async with Client(build_server(server_settings)) as client:
            stored = await client.call_tool(
                "smriti_store", {"content": "Kuzu is an embedded graph database."}
            )
            assert not stored.is_error
            before = await engram_count(client)
            result = await client.call_tool(tool, arguments)
            assert result.is_error, result
            assert needle in result.content[0].text, result.content[0].text
            assert await engram_count(client) == before == 1

    anyio.run(main)


def test_sync_without_backups_says_so_and_is_not_an_error(server_settings):
    """As `smriti sync` (exit 0): a session-end hook on a memory without backups does no harm."""

    async def main() -> None:
        async with Client(build_server(server_settings)) as client:
            result = await client.call_tool("smriti_manage", {"action": "sync"})
            assert not result.is_error, result.content
            assert result.structured_content["details"]["status"] == "disabled"
            assert "BACKUP_TYPE=none" in result.structured_content["message"]

    anyio.run(main)


def test_forgetting_another_users_memory_is_not_found(server_settings):
    from smriti.memory import Memory

    with Memory.open(server_settings, user="bob") as bob:
        bobs_id = bob.store("Bob keeps his notes in Obsidian.")["id"]

    async def main() -> None:
        async with Client(build_server(server_settings)) as client:
            result = await client.call_tool("smriti_manage", {"action": "forget", "memory_id": bobs_id})
            assert result.is_error and bobs_id in result.content[0].text
            assert await engram_count(client) == 0

    anyio.run(main)
    with Memory.open(server_settings, user="bob") as bob:
        assert bob.stats()["engrams"] == 1


class UnreachableEmbeddings:
    """An embedding endpoint that is down."""

    def embed_documents(self, texts):
        raise ConnectionError("embedding endpoint unreachable")

    def embed_query(self, text):
        raise ConnectionError("embedding endpoint unreachable")


def serve_with_embedder(monkeypatch, embedder) -> None:
    """Make build_server's runtime use ``embedder`` (only the model is faked)."""
    import smriti.server.app as server_module

    real_open = server_module.open_runtime

    def open_with(settings, *args, **kwargs):
        runtime = real_open(settings, *args, **kwargs)
        runtime.memory.context.embedder = embedder
        return runtime

    monkeypatch.setattr(server_module, "open_runtime", open_with)


def test_failing_embedding_endpoint_is_a_tool_error_not_a_crash(server_settings, monkeypatch):
    serve_with_embedder(monkeypatch, UnreachableEmbeddings())

    async def main() -> None:
        async with Client(build_server(server_settings)) as client:
            for tool, arguments in [
                ("smriti_store", {"content": "Redis streams back the job queue."}),
                ("smriti_recall", {"query": "job queue", "mode": "search"}),
            ]:
                result = await client.call_tool(tool, arguments)
                assert result.is_error
                assert "ConnectionError" in result.content[0].text, result.content[0].text
            assert await engram_count(client) == 0  # still serving, nothing half-written
            listed = await client.call_tool("smriti_recall", {"mode": "list"})
            assert not listed.is_error

    anyio.run(main)


def test_bad_input_over_stdio(tmp_path):
    command = flow.server_command()
    env = {**flow.server_env(tmp_path), "MAX_CONTENT_CHARS": str(MAX_CHARS)}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def main() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                stored = await client.call_tool(
                    "smriti_store", {"content": "Kuzu is an embedded graph database."}
                )
                assert not stored.is_error
                for tool, arguments, needle in BAD_CALLS:
                    if arguments.get("importance") != arguments.get("importance"):
                        continue  # NaN cannot be written as JSON; the in-process test covers it
                    result = await client.call_tool(tool, arguments)
                    assert result.is_error and needle in result.content[0].text, (tool, arguments)
                assert await engram_count(client) == 1

    anyio.run(main)


def _run_server(tmp_path, **overrides) -> subprocess.CompletedProcess:
    env = {**os.environ, **flow.server_env(tmp_path), **overrides}
    return subprocess.run(
        [sys.executable, "-m", "smriti.server"], input=b"", capture_output=True, env=env, timeout=60
    )


def test_settings_error_exits_2_with_one_message(tmp_path):
    result = _run_server(tmp_path, EMBEDDING_DIMS="lots", PRUNE_THRESHOLD="7")
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "EMBEDDING_DIMS" in stderr and "PRUNE_THRESHOLD" in stderr
    assert "Traceback" not in stderr and result.stdout == b""


def test_unsafe_user_exits_1_with_one_message(tmp_path):
    result = _run_server(tmp_path, ACCESSING_USER="../../etc")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "user name" in stderr and "Traceback" not in stderr and result.stdout == b""


def test_missing_model_package_exits_1_with_one_line(tmp_path):
    # EMBEDDING_PROVIDER=local needs sentence-transformers, which the test install leaves out:
    # a ProviderError, once a 95-line traceback, is now one line like every other Smriti error.
    result = _run_server(tmp_path, EMBEDDING_PROVIDER="local")
    stderr = result.stderr.decode()
    assert result.returncode == 1, stderr
    assert "Traceback" not in stderr and result.stdout == b""
    lines = [line for line in stderr.splitlines() if line.startswith("smriti-mcp: ")]
    assert len(lines) == 1 and "sentence-transformers" in lines[0], stderr


def test_background_consolidation_runs_periodically_and_survives_failures(server_settings, monkeypatch):
    import smriti.server.app as server_module

    real_open = server_module.open_runtime
    calls: list[int] = []

    def open_with_flaky_consolidation(settings, *args, **kwargs):
        runtime = real_open(settings, *args, **kwargs)
        real_consolidate = runtime.consolidate

        def flaky(**options) -> dict:
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("first consolidation fails")
            return real_consolidate(**options)

        runtime.consolidate = flaky
        return runtime

    monkeypatch.setattr(server_module, "open_runtime", open_with_flaky_consolidation)
    settings = server_settings.model_copy(update={"consolidation_interval": 1})

    async def main() -> None:
        async with Client(build_server(settings)) as client:
            # Wait for the failed run and one after it (every second), however slow the machine.
            with anyio.fail_after(30):
                while len(calls) < 2:
                    await anyio.sleep(0.1)
            assert not (await client.call_tool("smriti_store", {"content": "Still serving."})).is_error
            assert await engram_count(client) == 1

    anyio.run(main)
    assert len(calls) >= 2  # the failure was logged and the next run still happened


def test_tool_errors_carry_no_server_paths_or_engine_internals(server_settings, monkeypatch):
    import smriti.server.app as server_module
    from smriti.errors import StoreError

    real_open = server_module.open_runtime
    location = str(server_settings.storage_location)
    failures = {
        # an engine's own exception: its text stays in the log
        "smriti_store": RuntimeError(f"Buffer manager exception: pool full at {location}/alice/memory.kuzu"),
        # an anticipated failure worded for people, but naming a server path
        "smriti_recall": StoreError(f"the database {location}/alice/memory.kuzu is locked by process 4242"),
    }

    def open_failing(settings, *args, **kwargs):
        runtime = real_open(settings, *args, **kwargs)

        def store(*_, **__):
            raise failures["smriti_store"]

        def recall(*_, **__):
            raise failures["smriti_recall"]

        runtime.memory.store_checked, runtime.memory.recall_checked = store, recall  # what the tools call
        return runtime

    monkeypatch.setattr(server_module, "open_runtime", open_failing)

    async def main() -> None:
        async with Client(build_server(server_settings)) as client:
            stored = await client.call_tool("smriti_store", {"content": "Anything at all."})
            recalled = await client.call_tool("smriti_recall", {"query": "anything"})
        assert stored.is_error and recalled.is_error
        store_text, recall_text = stored.content[0].text, recalled.content[0].text
        assert store_text.endswith(
            "store failed: internal error (RuntimeError; the details are in the server log)"
        )
        assert "Buffer manager" not in store_text and location not in store_text
        assert recall_text.endswith("recall failed: the database memory.kuzu is locked by process 4242")

    anyio.run(main)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("cannot open /home/ann/.smriti/ann/memory.kuzu: locked", "cannot open memory.kuzu: locked"),
        ("see '/var/log/smriti/' now", "see '…' now"),
        (
            "http://127.0.0.1:8000/mcp and 1/2 and ./rel/file stay",
            "http://127.0.0.1:8000/mcp and 1/2 and ./rel/file stay",
        ),
    ],
)
def test_without_paths_keeps_only_the_last_component(text, expected):
    from smriti.server.app import without_paths

    assert without_paths(text) == expected


class NaNEmbeddings:
    """An embedding endpoint that answers with NaN and infinity."""

    def embed_documents(self, texts):
        return [[float("nan"), float("inf")] + [0.1] * (len(text) % 1 + 62) for text in texts]

    def embed_query(self, text):
        return self.embed_documents([text])[0]


def test_nan_or_infinite_embeddings_are_refused_and_nothing_is_stored(server_settings, monkeypatch):
    serve_with_embedder(monkeypatch, NaNEmbeddings())

    async def main() -> None:
        async with Client(build_server(server_settings)) as client:
            result = await client.call_tool("smriti_store", {"content": "Redis streams back the job queue."})
            assert result.is_error and "NaN or infinite" in result.content[0].text, result.content[0].text
            assert await engram_count(client) == 0

    anyio.run(main)


def test_forget_takes_an_unambiguous_id_prefix_and_says_why_it_refuses_one(server_settings):
    """As the CLI does: the first characters of an id forget that memory; a prefix two ids
    share, one no id starts with, or one too short, is refused with a message saying which."""
    import json

    from smriti.memory import Memory

    with Memory.open(server_settings) as memory:  # two memories whose ids share "abcd"
        for text in ("Olga waters the office plants.", "Pavel orders the team lunch on Fridays."):
            memory.store(text)
        records = json.dumps(list(memory.export_records()))
        old = [r["id"] for r in json.loads(records) if r.get("kind") == "engram"]
        for engram_id in old:
            memory.forget(engram_id)
        new = ["abcd1111-0000-4000-8000-000000000001", "abcd2222-0000-4000-8000-000000000002"]
        for before, after in zip(old, new, strict=True):
            records = records.replace(before, after)
        memory.import_records(json.loads(records))

    async def main() -> None:
        async with Client(build_server(server_settings)) as client:

            async def forget(memory_id: str) -> Any:
                return await client.call_tool("smriti_manage", {"action": "forget", "memory_id": memory_id})

            both = await forget("abcd")
            assert both.is_error and "2 memories have ids starting 'abcd'" in both.content[0].text
            missing = await forget("zzzz-no-such")
            assert (
                missing.is_error and "no memory with an id starting 'zzzz-no-such'" in missing.content[0].text
            )
            short = await forget("ab")
            assert short.is_error and "at least 4 characters" in short.content[0].text
            assert await engram_count(client) == 2  # nothing was forgotten by those
            done = await forget("abcd2")
            assert not done.is_error, done.content
            assert done.structured_content["details"]["forgotten"] == new[1]
            assert await engram_count(client) == 1

    anyio.run(main)
