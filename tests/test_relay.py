"""The standard-library stdio relay: the newest protocol, a refused setting, a changed tools list,
and the one place a line can be answered by the relay itself. Real ``smriti-mcp`` processes on
raw pipes and through the MCP SDK's client, real shared servers (see also test_stdio_edges.py,
test_shared_server.py and test_relay_kept.py)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from smriti.server.shared.client import Attachment
from smriti.server.shared.relay import Line, Relay
from tests.envs import offline_env
from tests.http_server import Server
from tests.raw_stdio import INITIALIZE, RawServer, rpc
from tests.test_shared_server import Shared, listed, run, store

MODERN = "2026-07-28"


@pytest.fixture
def one(tmp_path):
    made = Shared(tmp_path / "store")
    yield made
    made.kill()


async def modern_session(client: Client) -> None:
    """Tools, a store and a recall on the 2026-07-28 protocol (no handshake, no session)."""
    assert client.protocol_version == MODERN
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert names == {"smriti_store", "smriti_recall", "smriti_manage"}
    stored = await store(client, "Ivan keeps the release checklist in the wiki.")
    result = await client.call_tool("smriti_recall", {"query": "Where is the release checklist?"})
    assert not result.is_error, result.content
    assert stored in {item["id"] for item in result.structured_content["results"]}


@pytest.mark.parametrize("shared", ["true", "false"])
def test_a_2026_07_28_client_works_on_stdio(one, tmp_path, shared):
    """A client of the newest protocol (per-request envelope, no initialize) through the relay and
    in-process; through the relay a second time too, after the server was stopped."""
    env = {**one.env, "SMRITI_SHARED": shared}

    async def main() -> None:
        with (tmp_path / "client.log").open("w") as errlog:
            async with Client(stdio_client(one.params(env), errlog=errlog), mode=MODERN) as client:
                await modern_session(client)
            if shared == "true":
                assert one.cli("stop").returncode == 0
                async with Client(stdio_client(one.params(env), errlog=errlog), mode=MODERN) as client:
                    assert len(await listed(client)) == 1

    run(main, 180)
    assert "Traceback" not in (tmp_path / "client.log").read_text()


def test_a_2026_07_28_client_works_over_http(tmp_path):
    server = Server(offline_env(tmp_path / "store"), "--no-auth")
    try:

        async def main() -> None:
            async with Client(streamable_http_client(server.url), mode=MODERN) as client:
                await modern_session(client)

        run(main, 120)
    finally:
        server.stop()


def test_a_setting_the_server_refuses_is_answered_and_exits_2_with_its_name(one, tmp_path):
    """The relay reads no settings on its way up: a bad one is the shared server's start-up
    error, which the relay answers the request with, then says on stderr, exiting 2 as
    ``smriti-mcp`` does in-process."""
    env = {**one.env, "EMBEDDING_DIMS": "lots"}
    relay = RawServer(env, tmp_path / "relay.log")
    try:
        relay.write(rpc(1, "initialize", INITIALIZE))
        replies = relay.collect({1}, timeout=90)
        assert "error" in replies[-1], replies
        assert relay.process.wait(60) == 2
    finally:
        relay.stop()
    assert "smriti-mcp: invalid configuration" in (tmp_path / "relay.log").read_text()
    assert "EMBEDDING_DIMS" in (tmp_path / "relay.log").read_text()


def test_a_kept_tools_list_the_server_no_longer_gives_is_replaced_and_the_client_told(one, tmp_path):
    """The client gets the kept list at once; the relay asks the server again, keeps the real
    one and sends ``notifications/tools/list_changed``; the next client gets the real one."""
    relay = RawServer(one.env, tmp_path / "first.log")
    try:
        relay.initialize()
        real = relay.request(2, "tools/list")["result"]
    finally:
        relay.close_stdin()
        relay.process.wait(30)
        relay.stop()
    value = json.loads(one.paths.answers.read_text())
    for entry in value["entries"].values():
        if "tools" in entry["reply"]["result"]:
            entry["reply"]["result"]["tools"] = entry["reply"]["result"]["tools"][:1]
    one.paths.answers.write_text(json.dumps(value))

    relay = RawServer(one.env, tmp_path / "second.log")
    try:
        relay.initialize()
        assert len(relay.request(2, "tools/list")["result"]["tools"]) == 1  # as kept
        while not any(r.get("method") == "notifications/tools/list_changed" for r in relay.replies):
            line = relay.lines.get(timeout=60)
            assert line is not None, relay.replies
            relay.replies.append(json.loads(line))
        assert relay.request(3, "tools/list")["result"] == real  # the real list is kept now
    finally:
        relay.close_stdin()
        relay.process.wait(30)
        relay.stop()


# ----------------------------------------------------------------------------- in process
def test_the_line_check_answers_in_the_relays_place_and_nothing_reaches_a_server(tmp_path):
    """``check_line`` is the one place the relay answers a line itself: what it answers is
    written in place of passing the line on, so no server is started for it."""

    def refuse_long(line: Line) -> dict[str, Any] | None:
        if len(line.raw) > 100:
            error = {"code": -32600, "message": "Invalid request: the line is too long"}
            return {"jsonrpc": "2.0", "id": line.id, "error": error}
        return None

    attachment = Attachment(accessing_user="alice", storage_location=tmp_path, log_level="INFO")
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    relay = Relay(attachment, check_line=refuse_long, stdout=stdout_write)
    long_request = rpc(7, "tools/call", {"name": "smriti_store", "arguments": {"content": "x" * 200}})
    os.write(stdin_write, long_request)
    os.close(stdin_write)
    done = threading.Thread(target=relay.run, args=(stdin_read,))
    done.start()
    done.join(10)
    os.close(stdout_write)
    with os.fdopen(stdout_read, "rb") as out:
        answers = [json.loads(line) for line in out.read().splitlines()]
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32600, "message": "Invalid request: the line is too long"},
        }
    ]
    assert not Path(tmp_path / "alice" / "smriti-server.log").exists()  # no server was started


def test_a_relative_storage_location_is_the_clients_folder_for_the_server_too(tmp_path, monkeypatch):
    """The shared server runs in the user folder: a relative STORAGE_LOCATION is resolved where
    the client started the relay, and the server is given that folder."""
    from smriti.server.shared.client import shared_paths

    monkeypatch.chdir(tmp_path)
    attachment = Attachment.from_environment({"STORAGE_LOCATION": "memories", "ACCESSING_USER": "alice"})
    assert attachment is not None
    assert attachment.storage_location == tmp_path / "memories"
    assert shared_paths(attachment).folder == tmp_path / "memories" / "alice"


def test_a_client_whose_discover_probe_timed_out_keeps_its_era_when_the_server_is_replaced(one, tmp_path):
    """What the SDK's ``mode="auto"`` does when ``server/discover`` takes over 10 s (a shared server
    starting on a loaded machine): it sends ``initialize``, which the connection its probe opened
    in the 2026-07-28 era refuses, and goes on in that era. Killed and replaced, the server must not
    get that refused ``initialize`` replayed: the new connection would serve the handshake era
    and refuse every enveloped request ("this connection serves the handshake protocol era")."""
    from mcp import ClientSession
    from mcp.shared.exceptions import MCPError
    from mcp_types import DiscoverResult

    async def main() -> None:
        with (tmp_path / "relay.log").open("w") as errlog:
            async with (
                stdio_client(one.params(), errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                probe = await session.send_discover(MODERN)  # the answer the client gave up on
                with pytest.raises(MCPError, match="2026-07-28"):
                    await session.initialize()  # the fallback, refused on this connection
                session.adopt(DiscoverResult.model_validate(probe))  # the re-probe's outcome
                first = await session.call_tool("smriti_store", {"content": "Ivan keeps the checklist."})
                assert not first.is_error, first.content
                one.kill()
                for _ in range(3):  # each call on the new server, in the era the client speaks
                    listed = await session.call_tool("smriti_recall", {"mode": "list"})
                    assert not listed.is_error, listed.content
                    assert first.structured_content["id"] in {
                        r["id"] for r in listed.structured_content["results"]
                    }

    run(main, 180)
    assert "Traceback" not in (tmp_path / "relay.log").read_text()
