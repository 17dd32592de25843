"""A real MCP client session over stdio against the ``smriti-mcp`` process.

The SDK's stdio client parses every stdout line as JSON-RPC, so a stray print would fail
the session; the raw test below also checks stdout line by line and the exit code.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.envs import offline_env

MEMORIES = [
    "Alice prefers PostgreSQL with pgvector for retrieval augmented generation projects.",
    "The deploy pipeline for project Atlas runs on GitHub Actions every night at 02:00 UTC.",
    "Bob recommends cursor-based pagination for the orders API because offsets get slow.",
]
QUERY = "which pagination does Bob recommend for the orders API"


def server_command() -> list[str]:
    """The installed console script, or the module when the scripts are not installed."""
    script = Path(sys.executable).with_name("smriti-mcp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "smriti.server"]


def server_env(tmp_path: Path) -> dict[str, str]:
    return offline_env(tmp_path / "store", LOG_LEVEL="INFO")


def check_tool_schemas(tools) -> None:
    by_name = {tool.name: tool for tool in tools}
    assert set(by_name) == {"smriti_store", "smriti_recall", "smriti_manage"}
    for tool in by_name.values():
        assert tool.description and len(tool.description) > 200
        assert tool.output_schema and tool.output_schema["type"] == "object"

    def params(name):
        schema = by_name[name].input_schema
        return schema["properties"], schema.get("required", [])

    props, required = params("smriti_store")
    assert list(props) == ["content", "importance", "tags", "source", "occurred_at", "explain", "supersedes"]
    assert required == ["content"]
    assert [props[name].get("default") for name in props] == [None, 0.5, "", "", "", False, ""]
    assert props["importance"]["type"] == "number"
    assert (props["importance"]["minimum"], props["importance"]["maximum"]) == (0.0, 1.0)

    props, required = params("smriti_recall")
    assert list(props) == ["query", "limit", "mode", "memory_type", "explain", "include_superseded"]
    assert required == []
    assert [props[name]["default"] for name in props] == ["", 5, "recall", None, False, False]
    assert props["mode"]["enum"] == ["recall", "search", "list"]
    assert (props["limit"]["minimum"], props["limit"]["maximum"]) == (1, 20)  # what the server accepts
    memory_types = [option.get("enum") for option in props["memory_type"]["anyOf"]]
    assert ["episodic", "semantic", "procedural"] in memory_types

    # The annotations say what the tools do: recall reinforces (not read-only), only manage
    # (forget) destroys.
    hints = {name: tool.annotations for name, tool in by_name.items()}
    assert hints["smriti_recall"].read_only_hint is False and hints["smriti_recall"].destructive_hint is False
    assert hints["smriti_store"].destructive_hint is False and hints["smriti_manage"].destructive_hint is True

    props, required = params("smriti_manage")
    assert list(props) == ["action", "memory_id", "explain"] and required == ["action"]
    assert props["action"]["enum"] == ["forget", "sync", "consolidate", "stats"]
    assert props["memory_id"]["default"] == ""

    recall_out = by_name["smriti_recall"].output_schema
    assert {"query", "total_results", "sources", "results"} <= set(recall_out["required"])


async def recall_ids(client, mode: str, query: str = QUERY) -> list[str]:
    result = await client.call_tool("smriti_recall", {"query": query, "mode": mode, "limit": 10})
    assert not result.is_error, result.content
    return [item["id"] for item in result.structured_content["results"]]


async def exercise(client) -> None:
    """The full flow: schemas, three stores, three recall modes, forget, stats."""
    check_tool_schemas((await client.list_tools()).tools)

    ids = []
    for content in MEMORIES:
        stored = await client.call_tool(
            "smriti_store", {"content": content, "importance": 0.7, "tags": "test", "source": "mcp-test"}
        )
        assert not stored.is_error, stored.content
        assert set(stored.structured_content) == {
            "id",
            "memory_type",
            "cues",
            "cluster_id",
            "deduplicated",
            "superseded",
            "analysis_queued",
        }
        assert json.loads(stored.content[0].text) == stored.structured_content  # text-only clients
        ids.append(stored.structured_content["id"])
    assert len(set(ids)) == 3

    recalled = await client.call_tool("smriti_recall", {"query": QUERY, "limit": 3})
    body = recalled.structured_content
    assert body["results"][0]["id"] == ids[2], body
    assert body["total_results"] == len(body["results"]) and body["sources"]
    # each result counted once, by its source, as the specification's format has it
    assert sum(body["sources"].values()) == body["total_results"]
    assert body["sources"] == dict(Counter(item["source"] for item in body["results"]))
    assert body["retrieval_paths"] and min(body["retrieval_paths"].values()) >= 1
    first = body["results"][0]
    assert {"id", "text", "score", "source", "timestamp", "entities", "graph_relations"} <= set(first)
    assert {"memory_type", "cluster_id", "metadata"} <= set(first) and first["source"] == "mcp-test"

    assert ids[2] in await recall_ids(client, "search")
    assert set(await recall_ids(client, "list")) == set(ids)

    explained = await client.call_tool("smriti_recall", {"query": QUERY, "explain": True})
    assert explained.structured_content["trace"][0]["node"] == "validate_recall"

    forgotten = await client.call_tool("smriti_manage", {"action": "forget", "memory_id": ids[2]})
    assert not forgotten.is_error and forgotten.structured_content["details"]["forgotten"] == ids[2]
    for mode in ("recall", "search", "list"):
        assert ids[2] not in await recall_ids(client, mode), mode
    assert set(await recall_ids(client, "list")) == set(ids[:2])

    again = await client.call_tool("smriti_manage", {"action": "forget", "memory_id": ids[2]})
    assert again.is_error

    stats = await client.call_tool("smriti_manage", {"action": "stats"})
    assert not stats.is_error
    details = stats.structured_content["details"]
    assert details["engrams"] == 2 and details["user"] == "alice"
    assert details["backup"]["enabled"] is False


def test_stdio_session_end_to_end(tmp_path):
    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path))
    log = tmp_path / "server-stderr.log"

    async def main() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                await exercise(client)

    anyio.run(main)
    stderr = log.read_text()
    assert "memory database closed" in stderr, stderr
    assert "Traceback" not in stderr, stderr


INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"},
}


def spawn(tmp_path: Path) -> subprocess.Popen:
    env = {**os.environ, **server_env(tmp_path)}
    pipe = subprocess.PIPE
    return subprocess.Popen(
        [sys.executable, "-m", "smriti.server"], stdin=pipe, stdout=pipe, stderr=pipe, env=env
    )


def _rpc(message_id: int | None, method: str, params: dict | None = None) -> str:
    message: dict = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = params
    return json.dumps(message) + "\n"


def _read_replies(process, wanted: set[int]) -> list[dict]:
    """Read stdout lines until every id in ``wanted`` has a reply; each line must be JSON-RPC."""
    replies = []
    while wanted - {reply.get("id") for reply in replies}:
        line = process.stdout.readline()
        assert line, "the server closed stdout before answering"
        replies.append(json.loads(line))
    return replies


def test_stdout_is_only_json_rpc_and_exit_code_is_zero(tmp_path):
    """Drive ``python -m smriti.server`` by hand, close stdin, and inspect every stdout line."""
    first = "".join(
        [
            _rpc(1, "initialize", INITIALIZE),
            _rpc(None, "notifications/initialized"),
            _rpc(2, "tools/list", {}),
            _rpc(3, "tools/call", {"name": "smriti_store", "arguments": {"content": MEMORIES[0]}}),
        ]
    )
    # The server handles requests concurrently, so the recall is sent only after the store
    # has answered; otherwise it may run first and find nothing.
    second = "".join(
        [
            _rpc(4, "tools/call", {"name": "smriti_recall", "arguments": {"query": "pgvector"}}),
            _rpc(5, "tools/call", {"name": "smriti_store", "arguments": {"content": "  "}}),
        ]
    )
    process = spawn(tmp_path)
    process.stdin.write(first.encode())
    process.stdin.flush()
    replies = _read_replies(process, {1, 2, 3})
    process.stdin.write(second.encode())
    process.stdin.flush()
    replies += _read_replies(process, {4, 5})
    rest, stderr = process.communicate(timeout=60)  # closes stdin: the client is gone
    assert process.returncode == 0, stderr.decode()
    replies += [json.loads(line) for line in rest.splitlines() if line.strip()]
    assert all(reply.get("jsonrpc") == "2.0" for reply in replies)
    by_id = {reply["id"]: reply for reply in replies}
    assert set(by_id) == {1, 2, 3, 4, 5}
    assert by_id[3]["result"]["isError"] is False
    assert by_id[4]["result"]["structuredContent"]["total_results"] == 1
    assert by_id[5]["result"]["isError"] is True
    assert b"memory database closed" in stderr


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_signal_closes_the_database_and_exits_zero(tmp_path, signum):
    import signal

    process = spawn(tmp_path)
    process.stdin.write(_rpc(1, "initialize", INITIALIZE).encode())
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["id"] == 1  # the lifespan (and database) is up
    process.send_signal(getattr(signal, signum))
    # stdin stays open (communicate() would close it): the server must not wait for it.
    process.wait(timeout=30)
    stderr = process.stderr.read()
    process.stdin.close()
    assert process.returncode == 0, stderr.decode()
    assert b"memory database closed" in stderr


UNREADABLE_LINES = [
    ("{not json", -32700),
    ("[" * 100_000 + "]" * 100_000, -32700),
    (json.dumps([{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}]), -32600),
    (json.dumps({"hello": "world"}), -32600),
]


def test_every_unreadable_line_gets_a_json_rpc_error_and_the_session_goes_on(tmp_path):
    """Invalid JSON, deep nesting, a batch array, a non-message: each gets an
    error reply with id null (the SDK alone answered none of them), then a request still works."""
    process = spawn(tmp_path)
    try:
        process.stdin.write(
            (_rpc(1, "initialize", INITIALIZE) + _rpc(None, "notifications/initialized")).encode()
        )
        process.stdin.flush()
        assert _read_replies(process, {1})[-1]["result"]["serverInfo"]["name"] == "smriti"
        for line, code in UNREADABLE_LINES:
            process.stdin.write(line.encode() + b"\n")
            process.stdin.flush()
            reply = json.loads(process.stdout.readline())
            assert reply["id"] is None and reply["error"]["code"] == code, (line[:60], reply)
        process.stdin.write(_rpc(2, "tools/list").encode())
        process.stdin.flush()
        tools = _read_replies(process, {2})[-1]["result"]["tools"]
        assert {tool["name"] for tool in tools} == {"smriti_store", "smriti_recall", "smriti_manage"}
        process.stdin.close()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()


def test_the_docs_tools_table_matches_the_tools(tmp_path):
    """Every parameter the tools page's table names is the tool's, and none is missing."""
    import re

    from smriti.config import Settings
    from smriti.server.app import build_server

    page = (Path(__file__).resolve().parent.parent / "docs" / "tools.md").read_text()
    table = page.split("## The three tools", 1)[1].split("\n\n", 2)[1]
    documented = {}
    for row in table.splitlines()[2:]:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        documented[cells[0].strip("`")] = re.findall(r"`(\w+):", cells[1])
    settings = Settings(**{k.lower(): v for k, v in offline_env(tmp_path / "store").items()})

    async def main() -> dict[str, list[str]]:
        async with Client(build_server(settings)) as client:
            tools = (await client.list_tools()).tools
            return {tool.name: list(tool.input_schema["properties"]) for tool in tools}

    assert documented == anyio.run(main)
