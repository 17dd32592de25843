"""The relay's answer to ``initialize`` from the cache: real ``smriti-mcp`` relays on raw pipes and
through the MCP SDK's client, real shared servers, the real cache file.

A first session fills ``smriti-initialize.json``; the shared server is stopped (``smriti stop``)
so the next relay starts cold, as a client's first start of the day does.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from smriti.config import Settings
from smriti.server.shared import handshake
from smriti.server.shared.client import server_running
from smriti.server.shared.handshake import MAX_ENTRIES, InitializeCache, cache_key, handshake_request
from smriti.server.stdio import _after
from smriti.stores.paths import process_lock
from tests.raw_stdio import INITIALIZE, RawServer, rpc
from tests.test_shared_server import Shared, listed, run, store

FROM_CACHE = "answered initialize from the answer kept in"
INITIALIZED = rpc(None, "notifications/initialized")


class RawRelay(RawServer):
    """A relay on raw pipes whose stdout lines are kept as bytes, as the client received them."""

    def __init__(self, one: Shared, stderr: Path, command: list[str] | None = None) -> None:
        self.stderr = stderr.open("wb")
        pipe = subprocess.PIPE
        command = command or [sys.executable, "-m", "smriti.server"]
        self.process = subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=self.stderr, env=one.env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.replies: list[dict[str, Any]] = []
        self.raw_replies: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def raw_line(self, timeout: float = 60.0) -> bytes:
        line = self.lines.get(timeout=timeout)
        assert line is not None, "the relay closed stdout"
        self.replies.append(json.loads(line))
        return line


@pytest.fixture
def one(tmp_path):
    """This test's storage folder and shared server (killed at the end if still running)."""
    made = Shared(tmp_path / "store")
    yield made
    made.kill()


def first_session(one: Shared, tmp_path: Path, params: dict[str, Any] = INITIALIZE) -> bytes:
    """A whole session on a cold server (no cache: the ordinary path); the answer to initialize."""
    relay = RawRelay(one, tmp_path / "first.log")
    try:
        relay.write(rpc("init", "initialize", params))
        answer = relay.raw_line()
        relay.write(INITIALIZED)
        tools = relay.request(2, "tools/list")
        assert len(tools["result"]["tools"]) == 3, tools
    finally:
        relay.close_stdin()
        relay.process.wait(30)
        relay.stop()
    stop(one)
    return answer


def stop(one: Shared) -> None:
    stopped = one.cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not server_running(one.paths)


def entries(one: Shared) -> dict[str, Any]:
    return json.loads(one.paths.handshake.read_text())["entries"]


def edit_cached(one: Shared, change: dict[str, Any]) -> None:
    """Change every cached result as a different server would have answered."""
    value = json.loads(one.paths.handshake.read_text())
    for entry in value["entries"].values():
        if "result" in entry["reply"]:
            entry["reply"]["result"].update(change)
    one.paths.handshake.write_text(json.dumps(value))


def test_a_cold_relay_answers_initialize_from_the_cache_before_it_imports_the_sdk(one, tmp_path):
    """The second start answers ``initialize`` byte for byte as the server did, while no server can
    run (a client holds the start lock) and before any module of the SDK is imported; then the
    session is the server's: once the lock is free, tools/list is answered."""
    answer = first_session(one, tmp_path)
    assert json.loads(answer)["result"]["serverInfo"]["name"] == "smriti"
    assert len(entries(one)) == 1

    starting = process_lock(one.paths.start_lock)
    starting.acquire()  # no server can start: only the relay can answer
    log = tmp_path / "cached.log"
    relay = RawRelay(one, log, [sys.executable, "-X", "importtime", "-m", "smriti.server"])
    try:
        relay.write(rpc("init", "initialize", INITIALIZE))
        assert relay.raw_line() == answer
        assert not server_running(one.paths)
        relay.write(INITIALIZED)
        relay.write(rpc(2, "tools/list"))
        starting.release()
        relay.collect({2})
        assert len(relay.replies[-1]["result"]["tools"]) == 3, relay.replies
        assert relay.nulls() == 0
    finally:
        if starting.is_locked:
            starting.release()
        relay.stop()
    text = log.read_text()
    assert FROM_CACHE in text, text
    sdk = re.search(r"^import time:.*\| +mcp(_types)?(\.|$)", text, re.MULTILINE)
    assert sdk is not None  # the SDK was imported, after the answer
    assert text.index(FROM_CACHE) < sdk.start(), text[: text.index(FROM_CACHE) + 200]
    assert "Traceback" not in text
    assert "reconnected to the shared Smriti server" in text  # the replay opened the session


def test_an_mcp_client_session_after_an_answer_from_the_cache(one, tmp_path):
    """The MCP SDK's client through a relay that answered its handshake from the cache: tools, a
    store and a recall work, and the memory of the first session is there."""
    log = tmp_path / "client.log"

    async def session(content: str) -> set[str]:
        with log.open("a") as errlog:
            async with Client(stdio_client(one.params(), errlog=errlog)) as client:
                assert {tool.name for tool in (await client.list_tools()).tools} == {
                    "smriti_store",
                    "smriti_recall",
                    "smriti_manage",
                }
                await store(client, content)
                result = await client.call_tool("smriti_recall", {"query": "Who keeps the keys?"})
                assert not result.is_error, result.content
                return await listed(client)

    first: set[str] = set()

    async def main() -> None:
        first.update(await session("Grace keeps the keys to the server room."))
        await anyio.to_thread.run_sync(stop, one)
        assert log.read_text().count(FROM_CACHE) == 0
        both = await session("Heidi keeps the spare keys.")
        assert first < both and len(both) == 2

    run(main, 180)
    text = log.read_text()
    # The SDK's client probes with server/discover, then falls back to initialize: both are
    # answered from the cache (it sends the same requests each time).
    assert text.count(FROM_CACHE) == 1, text
    assert text.count("answered server/discover from the answer kept in") == 1, text
    assert "Traceback" not in text and "differs" not in text, text


def test_a_changed_capability_ends_the_session_and_keeps_the_servers_answer(one, tmp_path):
    """A cached answer whose capabilities the server no longer has: the client got it, so the
    relay answers what it holds with an error that says why and exits; the next start gets the
    server's own answer."""
    real = json.loads(first_session(one, tmp_path))["result"]
    edit_cached(one, {"capabilities": {**real["capabilities"], "experimental": {"gone": {}}}})
    log = tmp_path / "changed.log"
    relay = RawRelay(one, log)
    try:
        relay.write(rpc("init", "initialize", INITIALIZE))
        assert json.loads(relay.raw_line())["result"]["capabilities"]["experimental"] == {"gone": {}}
        relay.write(INITIALIZED)
        reply = relay.request(2, "tools/list")
        assert "not the one this client was given" in reply["error"]["message"], reply
        assert relay.process.wait(30) == 1  # with stdin still open: the relay gave up the client
        assert relay.lines.get(timeout=5) is None  # stdout closed, nothing more
    finally:
        relay.stop()
    assert [entry["reply"] for entry in entries(one).values()] == [{"result": real}]
    assert "capabilities" in log.read_text()


def test_other_instructions_are_logged_and_the_session_goes_on(one, tmp_path):
    real = json.loads(first_session(one, tmp_path))["result"]
    edit_cached(one, {"instructions": "Old instructions."})
    log = tmp_path / "instructions.log"
    relay = RawRelay(one, log)
    try:
        relay.write(rpc("init", "initialize", INITIALIZE))
        assert json.loads(relay.raw_line())["result"]["instructions"] == "Old instructions."
        relay.write(INITIALIZED)
        assert len(relay.request(2, "tools/list")["result"]["tools"]) == 3
        relay.close_stdin()
        assert relay.process.wait(30) == 0
    finally:
        relay.stop()
    assert [entry["reply"] for entry in entries(one).values()] == [{"result": real}]
    assert "differs in instructions" in log.read_text()


def test_another_request_or_a_torn_cache_takes_the_ordinary_path(one, tmp_path):
    """A torn cache file and a request the cache has no answer for are answered by the server
    (and kept); several lines in one write are all answered. Stdin is closed once they are:
    closing it first would also time the shared server's cold start against the relay's answer
    grace, which a loaded machine can exceed (test_stdio_edges covers closing early)."""
    first_session(one, tmp_path)
    one.paths.handshake.write_text('{"entries": {"x": ')  # torn by hand
    newer = {**INITIALIZE, "protocolVersion": "2025-11-25"}
    log = tmp_path / "ordinary.log"
    relay = RawRelay(one, log)
    try:
        # As `printf '...' | smriti-mcp`: the relay's first read gets all of them.
        relay.write(rpc("init", "initialize", newer) + INITIALIZED + rpc(2, "tools/list"))
        relay.collect({"init", 2})
        relay.close_stdin()
        assert relay.replies[0].get("result", {}).get("protocolVersion") == "2025-11-25", relay.replies
        assert relay.process.wait(30) == 0
    finally:
        relay.stop()
    assert FROM_CACHE not in log.read_text()
    assert len(entries(one)) == 1  # the torn file was replaced by a whole one
    stop(one)

    relay = RawRelay(one, log)  # the same lines again: the first now comes from the cache
    try:
        relay.write(rpc("init", "initialize", newer) + INITIALIZED + rpc(2, "tools/list"))
        relay.collect({"init", 2})
        relay.close_stdin()
        assert relay.process.wait(30) == 0
    finally:
        relay.stop()
    assert log.read_text().count(FROM_CACHE) == 1


# ----------------------------------------------------------------------------- in process
def test_the_lines_read_before_the_transport_come_first_and_whole():
    async def lines(head: bytes, rest: list[bytes]) -> list[bytes]:
        async def source():
            for line in rest:
                yield line

        return [line async for line in _after(head, source())]

    assert anyio.run(lines, b"", [b"a\n", b"b\n"]) == [b"a\n", b"b\n"]
    assert anyio.run(lines, b"x\ny\n", [b"a\n"]) == [b"x\n", b"y\n", b"a\n"]
    assert anyio.run(lines, b'x\n{"par', [b'tial"}\n', b"b"]) == [b"x\n", b'{"partial"}\n', b"b"]
    assert anyio.run(lines, b"unfinished", []) == [b"unfinished"]


@pytest.mark.parametrize(
    "line",
    [
        b"not json",
        b"[]",
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}',
        b'{"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "id": true, "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1.5, "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "method": "initialize", "params": {}}',
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}',
    ],
)
def test_only_an_initialize_request_is_answered_early(line):
    assert handshake_request(line, "initialize") is None


def test_the_cache_keys_answers_by_version_settings_and_request_and_keeps_the_newest(tmp_path, monkeypatch):
    settings = Settings(storage_location=tmp_path, accessing_user="alice")
    other = Settings(storage_location=tmp_path, accessing_user="alice", embedding_dims=64)
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
    key = cache_key(settings, request)
    assert key == cache_key(
        settings, {**request, "id": "other", "params": dict(reversed(INITIALIZE.items()))}
    )
    assert key != cache_key(other, request)
    assert key != cache_key(settings, {**request, "params": {**INITIALIZE, "protocolVersion": "2025-11-25"}})
    assert key != cache_key(settings, {**request, "method": "server/discover"})
    monkeypatch.setattr(handshake, "__version__", "0.0.0-other")
    assert key != cache_key(settings, request)

    (tmp_path / "alice").mkdir()
    cache = InitializeCache.of(settings)
    for k in range(MAX_ENTRIES + 3):
        cache.put(f"k{k}", {"result": {"n": k}})
    assert cache.get("k0") is None
    assert cache.get(f"k{MAX_ENTRIES + 2}") == {"result": {"n": MAX_ENTRIES + 2}}
    assert len(json.loads(cache.path.read_text())["entries"]) == MAX_ENTRIES
    assert sorted(p.name for p in cache.path.parent.iterdir()) == [cache.path.name]  # no temporaries
    cache.put("odd", {"result": {}, "error": {}})
    assert cache.get("odd") is None  # one reply, of one kind, or none
