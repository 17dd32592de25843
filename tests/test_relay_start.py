"""Short sessions and the shared server's start: real ``smriti-mcp`` relays on raw pipes.

A client that lists the tools and disconnects (langchain-mcp-adapters' ``get_tools()``) gets
both answers from the kept answers and exits before the server it started is up. The next
relays must wait for that server, not start another; and the kept answers serve any client of
the same protocol version, whatever its name, version or capabilities.
"""

from __future__ import annotations

import re
import time

import pytest

from smriti.server.shared.client import server_status
from tests.raw_stdio import INITIALIZE, rpc
from tests.test_relay_kept import FROM_CACHE, INITIALIZED, RawRelay, first_session
from tests.test_shared_server import Shared

SERVER_STARTED = re.compile(r"shared Smriti server \S+ \(pid (\d+)\)")


@pytest.fixture
def one(tmp_path):
    made = Shared(tmp_path / "store")
    yield made
    made.kill()


def short_session(one, log, params=INITIALIZE) -> dict:
    """initialize, tools/list, exit: the answers, and whether a server served by the exit."""
    relay = RawRelay(one, log)
    try:
        relay.write(rpc("init", "initialize", params) + INITIALIZED + rpc(2, "tools/list"))
        relay.collect({"init", 2})
        relay.close_stdin()
        assert relay.process.wait(30) == 0
    finally:
        relay.stop()
    return {"replies": relay.replies, "served": server_status(one.paths) is not None}


def test_ten_short_sessions_in_a_row_start_exactly_one_server(one, tmp_path):
    first_session(one, tmp_path)  # fills the kept answers; the server is stopped after it
    before = one.log()
    logs = [tmp_path / f"short-{n}.log" for n in range(10)]  # a relay's stderr each
    sessions = [short_session(one, log) for log in logs]
    assert all(len(s["replies"]) == 2 and "result" in s["replies"][1] for s in sessions)
    # Meaningful only if the early sessions ended before their server was up.
    assert not sessions[0]["served"], "the server was up before the first short session ended"
    assert all(FROM_CACHE in log.read_text() for log in logs)
    spawned = sum(log.read_text().count("started the shared Smriti server (pid") for log in logs)
    assert spawned == 1, [log.read_text() for log in logs]
    deadline = time.monotonic() + 90
    while server_status(one.paths) is None:
        assert time.monotonic() < deadline, one.log()
        time.sleep(0.1)
    started = SERVER_STARTED.findall(one.log().removeprefix(before))
    assert len(started) == 1, one.log()
    assert "already serves" not in one.log()
    assert one.status()["pid"] == int(started[0])
    assert not one.paths.starting.exists()  # the server that serves removed its start marker


def test_the_kept_answers_serve_any_client_of_the_same_protocol_version(one, tmp_path):
    first_session(one, tmp_path)
    log = tmp_path / "other-client.log"
    other = {
        "protocolVersion": INITIALIZE["protocolVersion"],
        "capabilities": {"roots": {"listChanged": True}, "sampling": {}},
        "clientInfo": {"name": "another-client", "version": "9.1"},
    }
    answered = short_session(one, log, other)
    assert FROM_CACHE in log.read_text()
    assert "answered tools/list from" in log.read_text()
    assert not answered["served"]  # both answers came before the server was up
    assert answered["replies"][0]["result"]["protocolVersion"] == INITIALIZE["protocolVersion"]
    assert len(answered["replies"][1]["result"]["tools"]) == 3
    one.kill()
    newer = {**other, "protocolVersion": "2025-11-25"}
    newer_log = tmp_path / "newer.log"
    short_session(one, newer_log, newer)  # another protocol version: the server's own answer
    assert FROM_CACHE not in newer_log.read_text()
