"""The relay's kept answers (``initialize``, ``server/discover``, ``tools/list``): real
``smriti-mcp`` relays on raw pipes and through the MCP SDK's client, real shared servers, the
real answers file.

A first session fills ``smriti-answers.json``; the shared server is stopped (``smriti stop``) so
the next relay starts cold, as a client's first start of the day does.
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

from smriti.server.shared import kept
from smriti.server.shared.client import server_running
from smriti.server.shared.kept import MAX_ENTRIES, KeptAnswers
from smriti.server.shared.relay import Line
from smriti.stores.paths import process_lock
from tests.raw_stdio import INITIALIZE, RawServer, rpc
from tests.test_shared_server import Shared, listed, run, store

FROM_CACHE = "answered initialize from the answer kept in"
TOOLS = rpc(2, "tools/list")
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
    return json.loads(one.paths.answers.read_text())["entries"]


def edit_cached(one: Shared, change: dict[str, Any], kind: str = "protocolVersion") -> None:
    """Change every kept result that holds ``kind`` (an initialize result by default) as a
    different server would have answered."""
    value = json.loads(one.paths.answers.read_text())
    for entry in value["entries"].values():
        if kind in entry["reply"].get("result", {}):
            entry["reply"]["result"].update(change)
    one.paths.answers.write_text(json.dumps(value))


def test_a_cold_relay_answers_initialize_and_tools_list_while_no_server_can_run(one, tmp_path):
    """The second start answers ``initialize`` and ``tools/list`` byte for byte as the server did,
    while no server can run (a client holds the start lock), and imports no module of the MCP
    SDK, pydantic or an HTTP library at all; then the session is the server's: once the lock is
    free, a tool call is answered."""
    answer = first_session(one, tmp_path)
    assert json.loads(answer)["result"]["serverInfo"]["name"] == "smriti"
    assert len(entries(one)) == 2  # initialize and tools/list

    starting = process_lock(one.paths.start_lock)
    starting.acquire()  # no server can start: only the relay can answer
    log = tmp_path / "cached.log"
    relay = RawRelay(one, log, [sys.executable, "-X", "importtime", "-m", "smriti.server"])
    try:
        relay.write(rpc("init", "initialize", INITIALIZE))
        assert relay.raw_line() == answer
        relay.write(INITIALIZED + TOOLS)
        tools = json.loads(relay.raw_line())
        assert [tool["name"] for tool in tools["result"]["tools"]] == [
            "smriti_store",
            "smriti_recall",
            "smriti_manage",
        ]
        assert not server_running(one.paths)
        relay.write(rpc(3, "tools/call", {"name": "smriti_recall", "arguments": {"mode": "list"}}))
        starting.release()
        relay.collect({3})
        assert relay.replies[-1]["result"]["isError"] is False, relay.replies
        assert relay.nulls() == 0
    finally:
        if starting.is_locked:
            starting.release()
        relay.stop()
    text = log.read_text()
    assert FROM_CACHE in text, text
    heavy = re.findall(
        r"^import time:.*\| +(mcp|mcp_types|pydantic|httpx2?|anyio|numpy|filelock)(?:\.|$)", text, re.M
    )
    assert heavy == [], sorted(set(heavy))
    assert "Traceback" not in text
    assert "connected to the shared Smriti server" in text  # the replay opened the session


def test_a_kept_answer_goes_back_under_the_id_bytes_the_client_sent(one, tmp_path):
    """As the server's wire answers (ids echoed byte for byte): an escaped character stays an
    escape, a lone surrogate comes back as sent, with no server running."""
    answer = json.loads(first_session(one, tmp_path))
    starting = process_lock(one.paths.start_lock)
    starting.acquire()  # no server can start: only the relay can answer
    relay = RawRelay(one, tmp_path / "ids.log")
    init_id, tools_id = b'"in\\u00edt"', b'"tools \\udaee"'
    try:
        relay.write(rpc("x", "initialize", INITIALIZE).replace(b'"id": "x"', b'"id": ' + init_id))
        got = relay.raw_line()
        assert got.startswith(b'{"jsonrpc":"2.0","id":' + init_id + b","), got
        assert json.loads(got)["result"] == answer["result"]
        relay.write(INITIALIZED + TOOLS.replace(b'"id": 2', b'"id": ' + tools_id))
        got = relay.raw_line()
        assert got.startswith(b'{"jsonrpc":"2.0","id":' + tools_id + b","), got
        assert len(json.loads(got)["result"]["tools"]) == 3
    finally:
        starting.release()
        relay.stop()


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
        assert "from the answer kept in" not in log.read_text()
        both = await session("Heidi keeps the spare keys.")
        assert first < both and len(both) == 2

    run(main, 180)
    text = log.read_text()
    # The SDK's client probes with server/discover: the server serves the 2026-07-28 protocol,
    # so there is no initialize; the second session's probe is answered from the kept answers.
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
        reply = relay.request(2, "tools/call", {"name": "smriti_recall", "arguments": {"mode": "list"}})
        assert "not the one this client was given" in reply["error"]["message"], reply
        assert relay.process.wait(30) == 1  # with stdin still open: the relay gave up the client
        assert relay.lines.get(timeout=5) is None  # stdout closed, nothing more
    finally:
        relay.stop()
    kept_initialize = [e["reply"] for e in entries(one).values() if "protocolVersion" in e["reply"]["result"]]
    assert kept_initialize == [{"result": real}]
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
        reply = relay.request(2, "tools/call", {"name": "smriti_recall", "arguments": {"mode": "list"}})
        assert reply["result"]["isError"] is False, reply
        relay.close_stdin()
        assert relay.process.wait(30) == 0
    finally:
        relay.stop()
    kept_initialize = [e["reply"] for e in entries(one).values() if "protocolVersion" in e["reply"]["result"]]
    assert kept_initialize == [{"result": real}]
    assert "differs in instructions" in log.read_text()


def test_another_request_or_a_torn_cache_takes_the_ordinary_path(one, tmp_path):
    """A torn cache file and a request the cache has no answer for are answered by the server
    (and kept); several lines in one write are all answered. Stdin is closed once they are:
    closing it first would also time the shared server's cold start against the relay's answer
    grace, which a loaded machine can exceed (test_stdio_edges covers closing early)."""
    first_session(one, tmp_path)
    one.paths.answers.write_text('{"entries": {"x": ')  # torn by hand
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
    assert len(entries(one)) == 2  # the torn file was replaced by a whole one
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
@pytest.mark.parametrize(
    ("line", "request_id"),
    [
        (b"not json", None),
        (b"[]", None),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}', 1),
        (b'{"jsonrpc": "2.0", "id": "a", "method": "initialize"}', "a"),
        (b'{"jsonrpc": "2.0", "id": true, "method": "initialize", "params": {}}', None),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "initialize", "params": {}}', None),
        (b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', None),
    ],
)
def test_a_line_is_a_request_only_with_a_method_and_an_id_json_rpc_can_answer(line, request_id):
    parsed = Line.of(line)
    assert parsed.id == request_id
    assert parsed.is_request is (request_id is not None)
    assert not parsed.is_answer


def test_a_server_answer_is_told_from_a_server_request():
    assert Line.of(b'{"jsonrpc": "2.0", "id": 7, "result": {}}').is_answer
    assert Line.of(b'{"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "x"}}').is_answer
    assert not Line.of(b'{"jsonrpc": "2.0", "id": 7, "method": "roots/list"}').is_answer


def test_the_kept_answers_are_keyed_by_version_settings_request_and_context(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBEDDING_DIMS", "64")
    names = ["embedding_dims", "storage_location"]
    answers = KeptAnswers(tmp_path / "smriti-answers.json")
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
    key = answers.key(request, names=names)
    assert answers.key(request) is None  # no names known yet: nothing can be kept or found
    assert key == answers.key(
        {**request, "id": "other", "params": dict(reversed(INITIALIZE.items()))}, names=names
    )
    assert key != answers.key(
        {**request, "params": {**INITIALIZE, "protocolVersion": "2025-11-25"}}, names=names
    )
    other_client = {
        **INITIALIZE,
        "capabilities": {"sampling": {}},
        "clientInfo": {"name": "b", "version": "2"},
    }
    assert key == answers.key({**request, "params": other_client}, names=names)  # any client of the version
    assert key != answers.key({**request, "method": "server/discover"}, names=names)
    listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {"progressToken": 1}}}
    assert answers.key(listing, names=names) == answers.key({**listing, "params": {}}, names=names)
    versioned = {
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "clientInfo": {"name": "a"}}
    }
    assert answers.key({**listing, "params": versioned}, names=names) not in (
        answers.key(listing, names=names),
        None,
    )
    assert key != answers.key(request, context={"protocolVersion": "2025-06-18"}, names=names)
    monkeypatch.setenv("EMBEDDING_DIMS", "128")
    assert key != answers.key(request, names=names)
    monkeypatch.setenv("LLM_MODEL", "another")  # not among the names: not part of the key
    monkeypatch.setenv("EMBEDDING_DIMS", "64")
    assert key == answers.key(request, names=names)
    monkeypatch.setattr(kept, "__version__", "0.0.0-other")
    assert key != answers.key(request, names=names)


def test_the_kept_answers_keep_the_newest_and_only_whole_replies(tmp_path):
    answers = KeptAnswers(tmp_path / "smriti-answers.json")
    names = ["accessing_user"]

    def request(k: int) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": k, "method": "tools/list", "params": {"cursor": str(k)}}

    for k in range(MAX_ENTRIES + 3):
        answers.put(request(k), {"result": {"n": k}}, names)
    assert answers.get(request(0)) is None
    assert answers.get(request(MAX_ENTRIES + 2)) == {"result": {"n": MAX_ENTRIES + 2}}
    assert len(json.loads(answers.path.read_text())["entries"]) == MAX_ENTRIES
    assert sorted(p.name for p in tmp_path.iterdir()) == [answers.path.name]  # no temporaries
    answers.put(request(1), {"result": {}, "error": {}}, names)
    assert answers.get(request(1)) is None  # one reply, of one kind, or none
    answers.put(request(2), {"result": {"n": 2}}, ["another_setting"])  # other names: a new file
    assert len(json.loads(answers.path.read_text())["entries"]) == 1
