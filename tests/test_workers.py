"""``smriti-mcp --workers``: server processes sharing one SQLite memory, through real MCP clients.

Two servers started with HTTP_WORKERS=2 on the same storage are two workers whose requests we
can aim (``--workers 2`` itself lets the kernel pick the worker of each connection): what one
stores the other recalls at once, what one forgets the other no longer returns, and stores
through both at once lose nothing. Then ``--workers 2`` itself: two processes answering on one
port, and the refusals (Kuzu, a lone server holding the file).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.envs import offline_env
from tests.http_server import Server, server_command

QUERY = "PostgreSQL replication for the orders service"


async def _call(client: Client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


def _ids(payload) -> set[str]:
    return {item["id"] for item in payload["results"]}


@pytest.fixture
def two_workers(tmp_path):
    env = offline_env(tmp_path / "store", HTTP_WORKERS="2", LOG_LEVEL="INFO", MEMORY_FABRIC_MAX_RESULTS="50")
    first, second = Server(env, "--no-auth"), Server(env, "--no-auth")
    yield first, second
    for server in (first, second):
        code, stderr = server.stop()
        assert code == 0, stderr
        assert "Traceback" not in stderr, stderr


def test_what_one_worker_stores_or_forgets_the_other_sees_at_once(two_workers):
    first, second = two_workers

    async def main() -> None:
        async with (
            Client(streamable_http_client(first.url)) as a,
            Client(streamable_http_client(second.url)) as b,
        ):
            # Both load their caches before the writes: the writes must reach a loaded cache.
            for client in (a, b):
                await _call(client, "smriti_recall", query="anything", mode="search")
            stored = await _call(
                a, "smriti_store", content="PostgreSQL replication for the orders service runs two replicas."
            )
            for mode in ("search", "recall", "list"):
                assert stored["id"] in _ids(await _call(b, "smriti_recall", query=QUERY, mode=mode)), mode
            await _call(b, "smriti_manage", action="forget", memory_id=stored["id"])
            for mode in ("search", "recall", "list"):
                assert stored["id"] not in _ids(await _call(a, "smriti_recall", query=QUERY, mode=mode)), mode

            # Concurrent stores through both workers: every one lands, and each worker finds all.
            ids: list[str] = []

            async def store_many(client: Client, tag: str) -> None:
                for number in range(12):
                    text = (
                        f"Service {tag}{number} writes its audit events to the {tag} queue number {number}."
                    )
                    ids.append((await _call(client, "smriti_store", content=text))["id"])

            async with anyio.create_task_group() as group:
                group.start_soon(store_many, a, "alpha")
                group.start_soon(store_many, b, "beta")
            assert len(set(ids)) == 24
            for client in (a, b):
                assert (await _call(client, "smriti_manage", action="stats"))["details"]["engrams"] == 24
                listed = await _call(client, "smriti_recall", mode="list", limit=50)
                assert _ids(listed) == set(ids)
                searched = await _call(
                    client, "smriti_recall", query="audit events queue", mode="search", limit=50
                )
                assert _ids(searched) == set(ids)

    anyio.run(main)


def _workers(pid: int) -> list[int]:
    """The worker processes uvicorn spawned (not multiprocessing's resource tracker)."""
    with open(f"/proc/{pid}/task/{pid}/children") as stream:
        children = [int(child) for child in stream.read().split()]
    return [child for child in children if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes()]


def test_workers_2_serves_one_port_from_two_processes(tmp_path):
    server = Server(offline_env(tmp_path / "store"), "--no-auth", "--workers", "2")
    try:

        async def main() -> None:
            async def store(number: int) -> str:
                async with Client(streamable_http_client(server.url)) as client:
                    text = f"Deploy {number} of the billing service went out on a Tuesday."
                    return (await _call(client, "smriti_store", content=text))["id"]

            ids = [await store(number) for number in range(6)]
            for _ in range(4):  # new connections: whichever worker takes each, all are there
                async with Client(streamable_http_client(server.url)) as client:
                    assert _ids(await _call(client, "smriti_recall", mode="list", limit=20)) == set(ids)

        anyio.run(main)
        workers = _workers(server.process.pid)
        assert len(workers) == 2, workers
        health = httpx2.get(f"{server.base}/health", timeout=5)
        assert health.status_code == 200
        # Each request on a connection of its own, so the kernel spreads them over the workers.
        assert health.headers["connection"] == "close"
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr


def test_workers_serve_each_authenticated_user_in_their_own_memory(tmp_path):
    from mcp.shared._httpx_utils import create_mcp_http_client

    from smriti.server.tokens import hash_token

    tokens = {"alice": "alice-secret-token", "bob": "bob-secret-token"}
    hashes = ",".join(f"{user}:{hash_token(token)}" for user, token in tokens.items())
    server = Server(offline_env(tmp_path / "store", SMRITI_TOKENS=hashes), "--workers", "2")

    def client(user: str) -> Client:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {tokens[user]}"})
        return Client(streamable_http_client(server.url, http_client=http))

    try:

        async def main() -> None:
            stored = []
            for number in range(3):  # new connections each time: any worker may take them
                async with client("alice") as alice:
                    text = f"Alice's team {number} runs its nightly jobs on Kubernetes."
                    stored.append((await _call(alice, "smriti_store", content=text))["id"])
            for _ in range(3):
                async with client("alice") as alice, client("bob") as bob:
                    assert _ids(await _call(alice, "smriti_recall", mode="list", limit=20)) == set(stored)
                    assert (await _call(bob, "smriti_recall", mode="list", limit=20))["results"] == []

        anyio.run(main)
        refused = httpx2.post(server.url, json={}, headers={"Authorization": "Bearer wrong"}, timeout=5)
        assert refused.status_code == 401
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr
    assert "Traceback" not in stderr, stderr


def _refused(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    command = [*server_command(), "--transport", "streamable-http", "--no-auth", "--port", "1", *args]
    return subprocess.run(command, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)


def test_workers_refuse_kuzu_and_a_file_held_by_a_lone_server(tmp_path):
    kuzu = _refused(offline_env(tmp_path / "k", DB_TYPE="kuzu"), "--workers", "2")
    assert kuzu.returncode == 2 and "one process only" in kuzu.stderr
    stdio_only = _refused(offline_env(tmp_path / "s"), "--transport", "stdio", "--workers", "2")
    assert stdio_only.returncode == 2 and "--workers" in stdio_only.stderr

    env = offline_env(tmp_path / "held")
    lone = Server(env, "--no-auth")  # one process, the file taken exclusively
    try:
        held = _refused(env, "--workers", "2")
        assert held.returncode == 1 and "stop it first" in held.stderr
    finally:
        lone.stop()


def test_periodic_maintenance_runs_in_one_worker_at_a_time(settings):
    from smriti.runtime import close_runtime, open_runtime
    from smriti.server.app import one_worker_at_a_time

    runtime = open_runtime(settings.model_copy(update={"http_workers": 2}))
    try:
        runs: list[str] = []

        def consolidate() -> str:
            # Another worker's timer fires while this one runs: it skips the round.
            runs.append("outer")
            assert other() is None
            return "done"

        first = one_worker_at_a_time(runtime, "consolidation", consolidate)
        other = one_worker_at_a_time(runtime, "consolidation", lambda: runs.append("inner"))
        assert first() == "done" and runs == ["outer"]
        assert other() is None and runs == ["outer", "inner"]  # free again once the first is done
        # One worker: the function itself, no lock.
        assert (
            one_worker_at_a_time(runtime.__class__(settings, runtime.memory), "x", consolidate) is consolidate
        )
    finally:
        close_runtime(runtime, final_sync=False)
