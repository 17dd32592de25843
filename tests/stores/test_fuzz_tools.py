"""Property-based fuzzing of the three MCP tools (issue 12): whatever the arguments, the server
answers and stays up, and a call it rejects changes nothing (the export and the counts are the
same before and after it).

In-process through the SDK's client (``Client(server)``: the real tool functions, schema
validation and lifespan) on SQLite, Kuzu and FalkorDB in tenant mode; and once through a real
MCP session over stdio against the ``smriti-mcp`` process. Bounded in examples, not in time per
example (``deadline=None``: a loaded machine must not fail a correct example).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

import smriti.server.app
from smriti.config import Settings
from smriti.server.app import build_server
from tests.envs import offline_env
from tests.test_server_stdio import INITIALIZE

MAX_CHARS = 300
KNOWN_IDS: list[str] = []  # ids stored so far in the running test, for forgets that hit

# Text without lone surrogates (JSON cannot carry them from the client), with control characters,
# NUL, long words and non-Latin scripts.
text = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=60) | st.sampled_from(
    [
        "",
        "   ",
        "\x00\x01tag",
        "Alice prefers Postgres, pgvector and billing.",
        "x" * (MAX_CHARS + 1),
        "w" * 250,
    ]
)
number = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**6), 10**6)
anything = st.none() | st.booleans() | number | text | st.lists(st.integers(), max_size=3)


def _arguments(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy[dict[str, Any]]:
    """Some of the tool's arguments, each well or badly typed, sometimes an unknown one."""
    own = st.fixed_dictionaries({}, optional={name: value | anything for name, value in fields.items()})
    extra = st.dictionaries(st.sampled_from(["bogus", "user", "id"]), anything, max_size=1)
    return st.builds(lambda a, b: {**a, **b}, own, extra)


def _plausible(required: dict[str, st.SearchStrategy], optional: dict[str, st.SearchStrategy]):
    """Well-typed arguments, the values still fuzzed: most of these calls are accepted."""
    return st.fixed_dictionaries(required, optional=optional)


sentence = st.builds(
    lambda words, tail: " ".join(words) + tail,
    st.lists(
        st.sampled_from(
            "Alice Bob prefers recommends Postgres pgvector Kafka billing cursor pagination the".split()
        ),
        min_size=1,
        max_size=12,
    ),
    text,
)
STORE_FIELDS = {"content": text, "importance": number, "tags": text, "source": text}
STORE = _arguments(STORE_FIELDS) | _plausible(
    {"content": sentence}, {"importance": st.floats(-0.5, 1.5), "tags": text, "source": text}
)
RECALL_FIELDS = {
    "query": text,
    "limit": st.integers(-3, 30),
    "mode": st.sampled_from(["recall", "search", "list", "dream", ""]),
    "memory_type": st.sampled_from(["episodic", "semantic", "procedural", "dream", ""]) | st.none(),
    "explain": st.booleans(),
}
RECALL = _arguments(RECALL_FIELDS) | _plausible({}, RECALL_FIELDS | {"query": sentence | text})
MANAGE_FIELDS = {
    "action": st.sampled_from(["forget", "stats", "consolidate", "sync", "explode", ""]),
    "memory_id": text | st.sampled_from(["known", "known", "no-such-id"]),
}
MANAGE = _arguments(MANAGE_FIELDS) | _plausible(
    {"action": MANAGE_FIELDS["action"]}, {"memory_id": MANAGE_FIELDS["memory_id"]}
)
CALL = st.one_of(
    st.tuples(st.just("smriti_store"), STORE),
    st.tuples(st.just("smriti_recall"), RECALL),
    st.tuples(st.just("smriti_manage"), MANAGE),
    st.tuples(st.sampled_from(["smriti_nothing", ""]), st.dictionaries(text, anything, max_size=2)),
)


def _resolve(arguments: dict[str, Any]) -> dict[str, Any]:
    """A forget of "known" names a memory stored earlier in the test, when there is one."""
    if arguments.get("memory_id") == "known" and KNOWN_IDS:
        return {**arguments, "memory_id": KNOWN_IDS[-1]}
    return arguments


def _counts(details: dict[str, Any]) -> dict[str, Any]:
    """What a rejected call must not change, from the stats tool's details."""
    extra = details.get("extra", {})
    return {
        **{key: details.get(key) for key in ("engrams", "cues", "associations", "cue_links", "clusters")},
        **{key: extra.get(key) for key in ("co_occurrences", "relations")},
    }


def _plain(value: Any) -> Any:
    """A result comparable with ==, NaN included (``float('nan') != float('nan')``)."""
    return json.loads(json.dumps(value, default=str, allow_nan=True).replace("NaN", '"NaN"'))


def run_fuzz(
    call: Callable[[str, dict[str, Any]], dict[str, Any]], snapshot: Callable[[], Any], examples: int
):
    """Drive ``call(tool, arguments) -> {"is_error", "structured"}`` with generated calls."""

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,  # no example database written into the repository
    )
    @given(calls=st.lists(CALL, min_size=1, max_size=3))
    def fuzz(calls: list[tuple[str, dict[str, Any]]]) -> None:
        for tool, arguments in calls:
            arguments = _resolve(arguments)
            before = snapshot()
            result = call(tool, arguments)
            if result["is_error"]:
                assert snapshot() == before, f"rejected {tool}({arguments!r}) changed the memory"
            elif tool == "smriti_store":
                KNOWN_IDS.append(result["structured"]["id"])
        # The server is still up and answering.
        assert not call("smriti_manage", {"action": "stats"})["is_error"]

    KNOWN_IDS.clear()
    fuzz()


# ----------------------------------------------------------------------------- in-process
def _settings_for(name: str, base: Settings, request: pytest.FixtureRequest) -> Settings:
    update: dict[str, Any] = {"db_type": name, "max_content_chars": MAX_CHARS}
    if name == "falkordb":
        _, port = request.getfixturevalue("falkor_server")
        update |= {
            "falkor_isolation": "tenant",
            "falkor_graph": f"smriti_fuzz_{os.getpid()}_{id(request)}",
            "falkor_addr": f"127.0.0.1:{port}",
        }
    return base.model_copy(update=update)


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu", "falkordb"])
def test_fuzzed_tool_calls_never_break_the_server_and_rejected_ones_change_nothing(
    settings, request, monkeypatch, db_type
):
    cfg = _settings_for(db_type, settings, request)
    opened: list[Any] = []
    real_open = smriti.server.app.open_runtime

    def open_and_keep(*args: Any, **kwargs: Any) -> Any:
        runtime = real_open(*args, **kwargs)
        opened.append(runtime)
        return runtime

    # Only to reach the memory for its export; the server opens and uses it as always.
    monkeypatch.setattr(smriti.server.app, "open_runtime", open_and_keep)
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(build_server(cfg))) as client,
    ):
        memory = opened[0].memory

        def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = portal.call(client.call_tool, tool, arguments)
            return {"is_error": result.is_error, "structured": result.structured_content}

        def snapshot() -> Any:
            stats = _counts(memory.stats())
            return stats, _plain(list(memory.export_records()))

        try:
            run_fuzz(call, snapshot, examples=100 if db_type == "sqlite" else 70)
        finally:
            if db_type == "falkordb":  # the shared server outlives the test: drop the test's graph
                client_of_server, _ = request.getfixturevalue("falkor_server")
                client_of_server.select_graph(cfg.falkor_graph).delete()


# ----------------------------------------------------------------------------- over stdio
class StdioSession:
    """``python -m smriti.server`` driven line by line (the raw protocol, no SDK in between)."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "smriti.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.next_id = 1
        self.request("initialize", INITIALIZE)
        self.write({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        # allow_nan: the fuzz sends NaN and Infinity as a careless client would.
        self.process.stdin.write(json.dumps(message, allow_nan=True) + "\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        message_id, self.next_id = self.next_id, self.next_id + 1
        self.write({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            assert line, "the server closed stdout (it is down)"
            reply = json.loads(line)
            if reply.get("id") == message_id:
                return reply

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        if "error" in reply:  # a protocol-level rejection (unknown tool, invalid params)
            return {"is_error": True, "structured": None}
        result = reply["result"]
        return {"is_error": result.get("isError", False), "structured": result.get("structuredContent")}


def test_fuzzed_calls_over_a_real_stdio_session(tmp_path):
    env = {
        **os.environ,
        **offline_env(tmp_path / "store", MAX_CONTENT_CHARS=str(MAX_CHARS), LOG_LEVEL="ERROR"),
    }
    session = StdioSession(env)
    try:

        def snapshot() -> Any:
            stats = session.call("smriti_manage", {"action": "stats"})["structured"]["details"]
            listed = session.call("smriti_recall", {"mode": "list", "limit": 20})["structured"]
            return _counts(stats), _plain([(r["id"], r["text"], r["metadata"]) for r in listed["results"]])

        run_fuzz(session.call, snapshot, examples=40)
        assert session.process.poll() is None
    finally:
        assert session.process.stdin is not None
        session.process.stdin.close()
        try:
            code = session.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            session.process.kill()
            raise
    assert code == 0


def test_nan_stays_comparable():
    assert _plain({"a": math.nan}) == _plain({"a": math.nan})
