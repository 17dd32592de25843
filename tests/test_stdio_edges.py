"""What a client hits in its first hour on stdio, against a real ``smriti-mcp`` on pipes.

Both ways ``smriti-mcp`` serves stdio: relaying to the user's shared server (the default,
SMRITI_SHARED=true) and in its own process (SMRITI_SHARED=false). The MCP SDK's client is no
use here: it never sends a malformed line, and it ends its server with SIGTERM after 2 s.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.raw_stdio import INITIALIZE, RawServer, rpc
from tests.test_shared_server import Shared

MODES = ["shared", "in-process"]


class Setup:
    """One test's memory, its ``smriti-mcp`` processes and (in shared mode) its shared server."""

    def __init__(self, location: Path, mode: str) -> None:
        self.mode = mode
        self.shared = Shared(location, SMRITI_SHARED="true" if mode == "shared" else "false")
        self.env = self.shared.env
        self.started: list[RawServer] = []
        self.logs = location.parent

    def start(self) -> RawServer:
        server = RawServer(self.env, self.logs / f"stderr-{len(self.started)}.log")
        self.started.append(server)
        return server

    def stderr(self, server: RawServer) -> str:
        server.stderr.flush()
        return Path(server.stderr.name).read_text(errors="replace")


def _running(location: Path, mode: str) -> Iterator[Setup]:
    one = Setup(location, mode)
    yield one
    for server in one.started:
        server.stop()
    one.shared.kill()  # the shared server this test started, if any


@pytest.fixture(params=MODES)
def setup(request, tmp_path) -> Iterator[Setup]:
    yield from _running(tmp_path / "store", request.param)


@pytest.fixture
def shared_setup(tmp_path) -> Iterator[Setup]:
    yield from _running(tmp_path / "store", "shared")


def store_call(message_id: int | str, content: str) -> tuple[int | str, str, dict]:
    return message_id, "tools/call", {"name": "smriti_store", "arguments": {"content": content}}


# ----------------------------------------------------------------------------- stdin closing
def exit_limit(mode: str) -> float:
    """How long a process may take to exit after stdin closes: 2 s for the relay, 3 s in-process
    (which closes the database too) on a quiet machine, where they take ~0.3 and ~0.5 s; stretched
    by the load per core, at most 5x, so a shared 2-core machine at load 17 (seen) waits 10 s and
    a server that never exits still fails."""
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return (2.0 if mode == "shared" else 3.0) * min(5.0, max(1.0, load))


def test_closing_stdin_ends_the_process_by_itself(setup):
    """The client closes stdin: ``smriti-mcp`` exits 0 within 2 s, no signal sent; in shared
    mode its session with the shared server is closed and that server stays up for others."""
    server = setup.start()
    server.initialize()
    reply = server.request(*store_call(2, "Ivy closes her laptop at six."))
    assert reply["result"]["isError"] is False, reply
    if setup.mode == "shared":
        assert setup.shared.status()["sessions"] == 1
    closed = server.close_stdin()
    limit = exit_limit(setup.mode)
    server.process.wait(timeout=limit)
    took = time.monotonic() - closed
    assert server.process.returncode == 0, setup.stderr(server)
    assert took < limit
    if setup.mode == "shared":
        status = setup.shared.status()  # still serving, for the other clients
        assert status["sessions"] == 0, status
    else:
        assert "memory database closed" in setup.stderr(server)


def test_a_request_sent_just_before_stdin_closes_is_still_answered(setup):
    """``printf '...' | smriti-mcp``: the answer to the last request is written before exit
    (answers due get up to ANSWER_GRACE; a quick request here, so that a loaded machine cannot
    make it miss; in-process the SDK alone answered it "Connection closed")."""
    server = setup.start()
    server.initialize()
    server.write(rpc(3, "tools/list"))
    closed = server.close_stdin()
    limit = exit_limit(setup.mode)
    server.process.wait(timeout=limit)
    assert time.monotonic() - closed < limit
    replies = [reply for reply in server.collect({3}, timeout=5) if reply.get("id") == 3]
    assert len(replies) == 1 and len(replies[0]["result"]["tools"]) == 3, replies


def test_printf_into_a_cold_server_gets_its_answer(setup):
    """``printf '<initialize>' | smriti-mcp`` with no shared server running yet: stdin ends at
    once, and the answer still comes (the server starts in ~1-3 s), then the process exits."""
    server = setup.start()
    server.write(rpc(1, "initialize", INITIALIZE))
    server.close_stdin()
    server.process.wait(timeout=30)
    replies = [reply for reply in server.collect({1}, timeout=5) if reply.get("id") == 1]
    assert len(replies) == 1 and replies[0]["result"]["serverInfo"]["name"] == "smriti", replies
    assert server.process.returncode == 0, setup.stderr(server)


# ----------------------------------------------------------------------------- every line answered
def listed_texts(server: RawServer, message_id: str) -> list[str]:
    reply = server.request(message_id, "tools/call", {"name": "smriti_recall", "arguments": {"mode": "list"}})
    assert reply["result"]["isError"] is False, reply
    return [item["text"] for item in reply["result"]["structuredContent"]["results"]]


def test_a_lone_surrogate_or_invalid_utf8_is_stored_with_a_replacement_character(setup):
    server = setup.start()
    server.initialize()
    line = b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"smriti_store",'
    surrogate = line + b'"arguments":{"content":"cut emoji \\udaee here"}}}\n'
    invalid = line.replace(b'"id":5', b'"id":6') + b'"arguments":{"content":"bad \xff\xfe bytes"}}}\n'
    server.write(surrogate + invalid)
    replies = {reply["id"]: reply for reply in server.collect({5, 6})}
    assert replies[5]["result"]["isError"] is False, replies[5]
    assert replies[6]["result"]["isError"] is False, replies[6]
    assert set(listed_texts(server, "list")) == {"cut emoji \ufffd here", "bad \ufffd\ufffd bytes"}
    # The line is read (and repaired) by the server: the relay passes it on unchanged.
    log = setup.shared.log() if setup.mode == "shared" else setup.stderr(server)
    assert "lone UTF-16 surrogate: replaced with U+FFFD" in log


UNANSWERABLE = [
    (b"{not json", None, -32700),
    (b"[" * 100_000 + b"]" * 100_000, None, -32700),
    (b"[]", None, -32600),
    (b"3", None, -32600),
    (b'"x"', None, -32600),
    (json.dumps([{"jsonrpc": "2.0", "id": 8, "method": "tools/list"}]).encode(), None, -32600),
    (json.dumps({"hello": "world"}).encode(), None, -32600),
    (b'{"jsonrpc":"2.0","id":9,"method":"tools/list","params":[1]}', 9, -32600),
    (b'{"jsonrpc":"2.0","id":"ten","method":10}', "ten", -32600),
    (b'{"id":11,"method":"tools/list"}', 11, -32600),
    (b'{"jsonrpc":"2.0","id":12,"result":[]}', None, -32600),  # a malformed response: no id of ours
    (b'{"jsonrpc":"2.0","id":13,"method":"no/such/method"}', 13, -32601),
]


def test_every_malformed_line_is_answered_with_the_right_id_and_code(setup):
    server = setup.start()
    server.initialize()
    for line, message_id, code in UNANSWERABLE:
        before = len(server.replies)
        server.write(line + b"\n")
        replies = server.collect({message_id} - {None}, timeout=20, nulls=1 if message_id is None else 0)
        reply = replies[before]
        assert len(replies) == before + 1 and reply["id"] == message_id, (line[:60], replies[before:])
        assert reply["error"]["code"] == code, (line[:60], reply)
    assert server.request(14, "ping")["result"] == {}
    assert server.process.poll() is None


# ----------------------------------------------------------------------------- the fuzz
TEXT = st.text(max_size=40)
SURROGATES = st.sampled_from(["\udaee", "\ud83d", "\ude00", "\udfff"])
CONTENT = st.builds(lambda a, s, b: f"{a}{s}{b}", TEXT, SURROGATES | st.just(""), TEXT)
METHODS = st.sampled_from(
    ["ping", "tools/list", "resources/list", "resources/templates/list", "prompts/list", "logging/setLevel"]
) | st.text(min_size=1, max_size=20)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | TEXT,
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=6,
)
TOOL_CALL = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["smriti_store", "smriti_recall", "smriti_manage", "nope"]),
        "arguments": st.fixed_dictionaries(
            {},
            optional={
                "content": CONTENT,
                "query": CONTENT,
                "limit": st.integers(-3, 60) | TEXT,
                "mode": st.sampled_from(["recall", "search", "list", "other"]),
                "action": st.sampled_from(["stats", "forget", "sync", "nonsense"]),
                "importance": st.floats(allow_nan=False, allow_infinity=False) | TEXT,
            },
        ),
    }
)


@st.composite
def line_kinds(draw) -> tuple[str, Any]:
    """One line to send: a request (answered with its id), a notification (not answered), a
    request with broken fields (answered with its id) or a line that is no message (id null)."""
    kind = draw(
        st.sampled_from(["request", "tool", "broken", "utf8", "notification", "garbage", "not-object"])
    )
    if kind == "request":
        return kind, {
            "method": draw(METHODS),
            "params": draw(st.none() | st.dictionaries(TEXT, JSONISH, max_size=3)),
        }
    if kind in ("tool", "utf8"):
        return kind, {
            "method": "tools/call",
            "params": draw(TOOL_CALL),
            "raw": draw(st.binary(min_size=1, max_size=8)),
        }
    if kind == "broken":
        field = draw(st.sampled_from(["params", "method", "jsonrpc"]))
        return kind, {"field": field, "value": draw(JSONISH.filter(lambda v: not isinstance(v, dict)))}
    if kind == "notification":
        return kind, {"method": draw(st.sampled_from(["notifications/progress", "notifications/x", "x/y"]))}
    if kind == "garbage":  # never JSON: starts with a byte no JSON text starts with
        return kind, b"#" + draw(st.binary(max_size=60)).replace(b"\n", b"")
    return kind, draw(st.sampled_from([b"[]", b"3", b'"x"', b"null", b"[1,2]", b"true", b"-0.5"]))


def encode(kind: str, spec: Any, message_id: int | str) -> tuple[bytes, bool]:
    """The line for one drawn ``spec``, and whether it must be answered with ``message_id``."""
    if kind in ("garbage", "not-object"):
        return spec, False
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": message_id}
    if kind == "notification":
        return json.dumps({"jsonrpc": "2.0", "method": spec["method"]}).encode(), False
    if kind == "broken":
        message.update(method="tools/list", params={})
        message[spec["field"]] = spec["value"]
        if spec["field"] == "jsonrpc" and spec["value"] == "2.0":
            message["params"] = [spec["value"]]  # still broken
        return json.dumps(message).encode(), True
    message["method"] = spec["method"]
    if spec["params"] is not None:
        message["params"] = spec["params"]
    line = json.dumps(message).encode()  # ensure_ascii: a lone surrogate goes out as \udxxx
    if kind == "utf8":  # raw bytes, some invalid UTF-8, inside the tool's name string
        high = bytes(byte | 0x80 for byte in spec["raw"])
        line = line.replace(b'"name": "', b'"name": "' + high, 1)
    return line, True


@pytest.mark.slow
def test_fuzz_every_request_line_gets_exactly_one_answer(setup):
    """Raw byte lines, batch after batch: every request with an id is answered once with that
    id, every line that is no message gets one error with id null, notifications get nothing;
    and the process stays up and serves a normal call afterwards."""
    server = setup.start()
    server.initialize()
    ids = itertools.count(100)
    sent: list[int | str] = []

    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(st.lists(line_kinds(), min_size=1, max_size=8))
    def batch(kinds: list[tuple[str, Any]]) -> None:
        wanted: set[int | str] = set()
        nulls = 0
        lines = []
        for kind, spec in kinds:
            number = next(ids)
            message_id: int | str = number if number % 2 else f"r{number}"
            line, answered = encode(kind, spec, message_id)
            lines.append(line + b"\n")
            if answered:
                wanted.add(message_id)
            else:
                nulls += kind in ("garbage", "not-object")
        server.write(b"".join(lines))
        server.collect(wanted, nulls=nulls)
        sent.extend(wanted)

    batch()
    assert server.request("after", "ping")["result"] == {}
    stored = server.request(*store_call("store", "Kim checks the fuzz log every morning."))
    assert stored["result"]["isError"] is False, stored
    assert "Kim checks the fuzz log every morning." in listed_texts(server, "list")
    counts = Counter(reply.get("id") for reply in server.replies)
    assert {key: n for key, n in counts.items() if key is not None and n != 1} == {}
    assert set(sent) <= set(counts)
    assert server.process.poll() is None


# ----------------------------------------------------------------------------- the MCP surface
def updates(server: RawServer, start: int) -> list[str]:
    """The URIs of the resource-updated notifications received since reply ``start``."""
    return [
        reply["params"]["uri"]
        for reply in server.replies[start:]
        if reply.get("method") == "notifications/resources/updated"
    ]


def wait_for_updates(server: RawServer, start: int, expected: set[str], timeout: float = 20) -> list[str]:
    deadline = time.monotonic() + timeout
    while set(updates(server, start)) < expected and time.monotonic() < deadline:
        server.request(f"ping-{time.monotonic()}", "ping")  # collects what came meanwhile
        time.sleep(0.05)
    return updates(server, start)


def test_logging_and_classic_subscriptions_on_protocol_2025_06_18(setup):
    server = setup.start()
    capabilities = server.initialize()["result"]["capabilities"]
    assert capabilities["logging"] == {} and capabilities["resources"]["subscribe"] is True
    assert server.request(1, "logging/setLevel", {"level": "debug"})["result"] == {}
    assert server.request(2, "logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    assert server.request(3, "resources/subscribe", {"uri": "memory://nothing"})["error"]["code"] == -32602
    for number, uri in enumerate(["memory://stats", "memory://recent"], start=4):
        assert server.request(number, "resources/subscribe", {"uri": uri})["result"] == {}
    start = len(server.replies)
    assert server.request(*store_call(6, "Lena subscribes to memory stats."))["result"]["isError"] is False
    assert sorted(wait_for_updates(server, start, {"memory://stats", "memory://recent"})) == [
        "memory://recent",
        "memory://stats",
    ]  # once each, and not memory://graph, which nobody subscribed to
    assert server.request(7, "resources/unsubscribe", {"uri": "memory://recent"})["result"] == {}
    memory_id = listed_ids(server)[0]
    start = len(server.replies)
    forget = {"name": "smriti_manage", "arguments": {"action": "forget", "memory_id": memory_id}}
    assert server.request(8, "tools/call", forget)["result"]["isError"] is False
    assert wait_for_updates(server, start, {"memory://stats"}) == ["memory://stats"]
    start = len(server.replies)
    server.request(9, "tools/call", {"name": "smriti_recall", "arguments": {"query": "memory"}})
    server.request(10, "ping")
    assert updates(server, start) == []  # a recall changes no resource


def listed_ids(server: RawServer) -> list[str]:
    reply = server.request("ids", "tools/call", {"name": "smriti_recall", "arguments": {"mode": "list"}})
    ids = [item["id"] for item in reply["result"]["structuredContent"]["results"]]
    server.replies = [r for r in server.replies if r.get("id") != "ids"]  # the id can be used again
    return ids


def test_another_client_of_the_shared_server_is_told_of_a_store(shared_setup):
    setup = shared_setup
    watcher, writer = setup.start(), setup.start()
    watcher.initialize()
    writer.initialize()
    assert watcher.request(1, "resources/subscribe", {"uri": "memory://recent"})["result"] == {}
    start = len(watcher.replies)
    assert writer.request(*store_call(2, "Mia writes, Noor watches."))["result"]["isError"] is False
    assert wait_for_updates(watcher, start, {"memory://recent"}) == ["memory://recent"]


def test_the_limit_schema_is_what_the_server_accepts_and_errors_are_plain_words(setup):
    server = setup.start()
    server.initialize()
    tools = {tool["name"]: tool for tool in server.request(1, "tools/list")["result"]["tools"]}
    limit = tools["smriti_recall"]["inputSchema"]["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 20)  # MEMORY_FABRIC_MAX_RESULTS' default

    def error(number: int, name: str, arguments: dict) -> str:
        result = server.request(number, "tools/call", {"name": name, "arguments": arguments})["result"]
        assert result["isError"] is True, result
        return result["content"][0]["text"]

    assert (
        error(2, "smriti_recall", {"limit": 21})
        == "limit must be at most 20 (MEMORY_FABRIC_MAX_RESULTS), got 21"
    )
    assert error(3, "smriti_recall", {"limit": 0}) == "limit must be at least 1, got 0"
    assert error(4, "smriti_recall", {"limit": "many"}) == "limit must be a whole number"
    assert error(5, "smriti_store", {"content": "x", "importance": "high"}) == "importance must be a number"
    assert error(6, "smriti_store", {}) == "content is required"
    assert (
        error(7, "smriti_recall", {"mode": "deep"})
        == "mode must be one of 'recall', 'search' or 'list', got 'deep'"
    )
    for text in [error(8, "smriti_recall", {"limit": 20.5}), error(9, "smriti_manage", {"action": "x"})]:
        assert "pydantic" not in text and "http" not in text and "validation error" not in text, text
    assert (
        server.request(10, "tools/call", {"name": "smriti_recall", "arguments": {"limit": 20}})["result"][
            "isError"
        ]
        is False
    )
    annotations = tools["smriti_manage"]["annotations"]
    assert annotations["destructiveHint"] is True and annotations["idempotentHint"] is False


# ----------------------------------------------------------------------------- a server killed mid-burst
def test_requests_in_flight_when_the_shared_server_dies_get_the_relays_answer(shared_setup):
    """Stores written in one burst, the shared server killed -9 after the first answers: every
    request gets exactly one answer, each store either acknowledged (and then kept) or refused
    with the relay's words for a request the dead server may or may not have run, never the MCP
    SDK's own "SSE stream ended without a response" (its error for an abandoned stream, which
    the relay once passed on and then sent the client's next request into the dead session)."""
    from smriti.server.shared.client import read_state

    setup = shared_setup
    setup.env["MEMORY_FABRIC_MAX_RESULTS"] = "100"  # one list shows every store
    server = setup.start()
    server.initialize()
    ids = [f"s{n}" for n in range(40)]
    server.write(
        b"".join(rpc(*store_call(i, f"Deployment note {i}: service {i} runs on host h{i}.")) for i in ids)
    )
    server.collect(set(ids[:3]), timeout=60)
    os.kill(read_state(setup.shared.paths)["pid"], 9)
    replies = {r["id"]: r for r in server.collect(set(ids), timeout=120) if r.get("id") in ids}
    assert Counter(r.get("id") for r in server.replies if r.get("id") in ids) == Counter(ids)
    acknowledged = [i for i in ids if "result" in replies[i] and not replies[i]["result"]["isError"]]
    refused = [replies[i]["error"]["message"] for i in ids if "error" in replies[i]]
    assert len(acknowledged) + len(refused) == len(ids), replies
    assert all("may or may not have been carried out" in text for text in refused), refused
    stored = {replies[i]["result"]["structuredContent"]["id"] for i in acknowledged}
    assert len(stored) >= 3  # the answers that came before the kill, at least
    listing = server.request(
        "all", "tools/call", {"name": "smriti_recall", "arguments": {"mode": "list", "limit": 100}}
    )
    assert stored <= {item["id"] for item in listing["result"]["structuredContent"]["results"]}
    assert "Traceback" not in setup.stderr(server)
