"""Every line answered, under the id the client sent, byte for byte: the wire
(:mod:`smriti.server.wire`) on its own, then a real ``smriti-mcp`` on raw pipes in both modes
(relaying to the shared server, and in-process)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from smriti.server.wire import MAX_DEPTH, MAX_MESSAGE_BYTES, Wire, readable_id
from tests.raw_stdio import RawServer
from tests.test_stdio_edges import MODES, Setup, _running


@pytest.fixture(params=MODES)
def setup(request, tmp_path) -> Iterator[Setup]:
    yield from _running(tmp_path / "store", request.param)


def line(message_id: bytes, rest: bytes = b'"method":"ping"') -> bytes:
    return b'{"jsonrpc":"2.0","id":' + message_id + b"," + rest + b"}"


WRONG_IDS = [b"1.5", b"1.0", b"1e3", b"true", b"false", b"null", b'{"a":1}', b"[1]"]
DEEP = b"[" * 1000 + b"]" * 1000
# Lines a parser refuses though their id is plain to read: the error goes to that id.
REFUSED_WITH_ID = [
    (line(b"21") + b"\xff", 21, -32700),  # invalid UTF-8 outside a string
    (b'{"jsonrpc":"2.0",\xfe "id":"twenty-two","method":"ping"}', "twenty-two", -32700),
    (line(b"23", b'"method":"tools/call","params":{"a":' + DEEP + b"}"), 23, -32600),  # 1,000 levels
    (line(b"24", b'"method":"tools/call","params":{"n":' + b"7" * 5000 + b"}"), 24, -32600),
    (line(b'"25"', b'"method":"tools/call","params":{"n":1e999}'), "25", -32600),
    (b'{"jsonrpc":"2.0","params":{"a":' + DEEP + b'},"id":26,"method":"x"}', 26, -32600),  # id last
]


# ----------------------------------------------------------------------------- the wire alone
@pytest.mark.parametrize("wrong", WRONG_IDS)
def test_an_id_of_the_wrong_type_is_an_invalid_request_with_id_null(wrong):
    answer = Wire().read(line(wrong))
    assert answer.message is None and answer.reply is not None
    reply = json.loads(answer.reply)
    assert reply["id"] is None and reply["error"]["code"] == -32600, reply
    assert "string or an integer" in reply["error"]["message"]


@pytest.mark.parametrize(("raw", "message_id", "code"), REFUSED_WITH_ID)
def test_a_refused_line_is_answered_under_its_readable_id(raw, message_id, code):
    reply = json.loads(Wire().read(raw).reply or b"")
    assert (reply["id"], reply["error"]["code"]) == (message_id, code), reply


def test_readable_id_reads_only_the_top_level_id_and_only_usable_ones():
    assert readable_id(b'{"params":{"id":1},"id":"a\\"b"}') == b'"a\\"b"'
    assert readable_id(b'{"id":1,"id":2}') == b"2"  # the last one, as json.loads
    assert readable_id(b'  {"id":-0 , garbage') == b"-0"
    for unusable in (b'{"id":01}', b'{"id":"a\xffb"}', b'[{"id":1}]', b'{"id":"open', b'{"x":"\\"id\\":3"}'):
        assert readable_id(unusable) is None, unusable


def test_a_lone_surrogate_id_goes_on_under_a_stand_in_and_comes_back_as_sent():
    wire = Wire()
    sent = b'"cut \\ud83d"'
    message = wire.read(line(sent, b'"method":"tools/call","params":{"arguments":{"q":"x\\udaee"}}')).message
    assert message is not None and message["id"] != "cut \ud83d"
    assert message["params"]["arguments"]["q"] == "x\ufffd"  # the content is repaired
    cancel = b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":' + sent + b"}}"
    assert wire.read(cancel).message["params"]["requestId"] == message["id"]  # type: ignore[index]
    answer = wire.write({"jsonrpc": "2.0", "id": message["id"], "result": {}})
    assert answer == b'{"jsonrpc":"2.0","id":' + sent + b',"result":{}}\n'
    assert wire.write({"jsonrpc": "2.0", "id": message["id"], "result": {}}).count(b"smriti-id-") == 1


def test_limits_are_what_the_module_says():
    wire = Wire()
    nested = b'{"a":' * (MAX_DEPTH - 1) + b"1" + b"}" * (MAX_DEPTH - 1)
    assert wire.read(line(b"1", b'"method":"x","params":' + nested)).message is not None
    deeper = b'{"a":' + nested + b"}"
    assert wire.read(line(b"1", b'"method":"x","params":' + deeper)).reply is not None
    big = line(b"2", b'"method":"x","params":{"c":"' + b"x" * MAX_MESSAGE_BYTES + b'"}}')
    reply = json.loads(wire.read(big).reply or b"")
    assert reply["id"] == 2 and "at most 4,194,304 bytes" in reply["error"]["message"]


# ----------------------------------------------------------------------------- a real smriti-mcp
def answers(server: RawServer, lines: list[bytes], wanted: set, nulls: int = 0) -> list[dict]:
    before = len(server.replies)
    server.write(b"".join(raw + b"\n" for raw in lines))
    server.collect(wanted, timeout=60, nulls=nulls)
    return server.replies[before:]


def test_wrong_ids_and_refused_lines_are_each_answered_once(setup):
    server = setup.start()
    server.initialize()
    got = answers(server, [line(wrong) for wrong in WRONG_IDS], set(), nulls=len(WRONG_IDS))
    assert [(reply["id"], reply["error"]["code"]) for reply in got] == [(None, -32600)] * len(WRONG_IDS)
    got = answers(server, [raw for raw, _, _ in REFUSED_WITH_ID], {key for _, key, _ in REFUSED_WITH_ID})
    assert {(reply["id"], reply["error"]["code"]) for reply in got} == {
        (key, code) for _, key, code in REFUSED_WITH_ID
    }, got
    assert len(got) == len(REFUSED_WITH_ID)
    assert server.request(30, "ping")["result"] == {}


def test_an_id_with_a_lone_surrogate_comes_back_byte_for_byte(setup):
    server = setup.start()
    server.initialize()
    arguments = b'{"content":"Ana cut \\udaee it"}'
    store = b'"method":"tools/call","params":{"name":"smriti_store","arguments":' + arguments + b"}"
    server.write(line(b'"store \\ud83d"', store) + b"\n" + line(b'"ping \\udfff"') + b"\n")
    server.collect({"store \ud83d", "ping \udfff"})
    raw = b"".join(server.raw_replies)
    assert b'"id":"store \\ud83d"' in raw and b'"id":"ping \\udfff"' in raw, raw
    stored = next(reply for reply in server.replies if reply.get("id") == "store \ud83d")
    assert stored["result"]["isError"] is False, stored
    assert server.request(31, "ping")["result"] == {}


def test_a_message_over_the_limit_gets_the_same_plain_error_in_both_modes(setup):
    """In-process it reached the tool (and its MAX_CONTENT_CHARS); through the relay the shared
    server's HTTP limit made it "-32603 Server returned an error response"."""
    server = setup.start()
    server.initialize()
    content = "x" * (MAX_MESSAGE_BYTES + 10)
    params = {"name": "smriti_store", "arguments": {"content": content}}
    message = {"jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": params}
    got = answers(server, [json.dumps(message).encode()], {40})
    assert len(got) == 1 and got[0]["error"]["code"] == -32600, got
    assert got[0]["error"]["message"].endswith("a message may be at most 4,194,304 bytes (4 MiB)")
    assert server.request(41, "ping")["result"] == {}


def test_line_splitter_joins_lines_cut_across_chunks_and_keeps_the_unfinished_rest():
    from smriti.server.wire import LineSplitter

    splitter = LineSplitter()
    assert splitter.feed(b'{"a"') == []
    assert splitter.feed(b':1}\n{"b":2}\n\n{"c"') == [b'{"a":1}\n', b'{"b":2}\n', b"\n"]
    assert splitter.feed(b":3") == []
    assert splitter.rest() == b'{"c":3'
    assert splitter.feed(b"}\n") == [b'{"c":3}\n'] and splitter.rest() == b""
