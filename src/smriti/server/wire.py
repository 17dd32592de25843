"""The stdio wire: what to do with each line a client writes, and the bytes of each answer.

Both ways ``smriti-mcp`` serves stdio (in its own process and as the relay to the shared
server) read the client's lines through one :class:`Wire` per session, so a line gets the same
answer either way. The module imports neither the MCP SDK nor pydantic: the relay can use it
before (or without) importing them. It promises:

- **Every line is answered or passed on.** A line that is no message gets a JSON-RPC 2.0 error:
  -32700 when it is not JSON (invalid UTF-8 outside a string, nesting deeper than the parser
  goes), -32600 when it is JSON but no message: a batch, a wrong field, an ``id`` that is not a
  string or an integer (a float, a boolean, an object or null: without this a line with such an
  id read as a notification and got nothing back), a message over :data:`MAX_MESSAGE_BYTES`
  (the shared server's HTTP body limit: through the relay it was a bare -32603), nesting deeper
  than :data:`MAX_DEPTH`, a number too long or too large to read.
- **The error goes to the line's id when the id can be read**, even when the rest cannot
  (a lexer finds the top-level ``"id"`` without parsing the whole line); an id of the wrong type
  or one that is not valid UTF-8 is no id, and the answer has ``"id": null`` as JSON-RPC 2.0 says.
- **Ids come back exactly as sent.** A lone UTF-16 surrogate escape (``"\\udaee"``, an emoji cut
  in half) is made U+FFFD inside a message, so a memory with one is stored; in an ``id`` that
  would change the id, so the message goes on under a stand-in id and its answer is written with
  the client's own bytes (a ``notifications/cancelled`` for it is pointed at the stand-in too).
- Bytes that are not UTF-8 inside strings become U+FFFD, as the SDK's reader does; a blank line
  carries nothing and is skipped.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
# The MCP SDK's streamable-HTTP servers (the shared server among them) refuse a larger body with
# 413, which its client reported as "-32603 Server returned an error response": checked here on
# the line, so in-process and relay answer alike.
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# pydantic's JSON parser (the SDK's, on the shared server's side) stops at 200 levels; a message
# of MCP needs a handful, tool arguments a few more.
MAX_DEPTH = 100
_MAX_INT_DIGITS = 4300  # Python's own limit on reading an integer from text (sys.int_info)
_MAX_ID_TOKENS = 20_000  # tokens read looking for an unparsable line's id (~50 ms at most)

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_INTEGER = re.compile(rb"-?(?:0|[1-9][0-9]*)")
# One JSON token at a time, leading white space skipped: a string (escapes included), a
# structural character, or a run of anything else (numbers, literals, garbage bytes).
_TOKEN = re.compile(
    rb'[ \t\r\n]*(?:("[^"\\]*(?:\\.[^"\\]*)*")|([{}\[\],:])|([^ \t\r\n"{}\[\],:]+))', re.DOTALL
)


@dataclass(frozen=True, slots=True)
class Line:
    """What to do with one line: pass ``message`` on, write ``reply`` (a whole line, newline
    included) back to the client, or nothing (a blank line). ``warning`` is worth a log line."""

    message: dict[str, Any] | None = None
    reply: bytes | None = None
    warning: str | None = None


class _Refused(Exception):
    def __init__(self, code: int, text: str, id_token: bytes | None = None) -> None:
        super().__init__(text)
        self.code, self.text, self.id_token = code, text, id_token


class _NumberOutOfRange(ValueError):
    """A JSON number this server cannot hold (valid JSON, so a -32600, not a -32700)."""


class Wire:
    """One stdio session's wire: :meth:`read` each line from the client, :meth:`write` each
    message to it. The session's stand-in ids live here, so one object serves both ways."""

    def __init__(self) -> None:
        self._prefix = f"smriti-id-{secrets.token_hex(6)}-"
        self._count = 0
        self._stand_ins: dict[str, bytes] = {}  # stand-in id -> the client's id, as sent
        self._by_value: dict[str, str] = {}  # the client's id, as read -> its stand-in

    # ------------------------------------------------------------------------------ reading
    def read(self, raw: bytes) -> Line:
        """What to do with ``raw``, one line of stdin (its newline or not)."""
        if not raw.strip():
            return Line()
        try:
            message, warning = self._message(raw)
        except _Refused as refused:
            return Line(reply=error_line(refused.code, refused.text, refused.id_token), warning=refused.text)
        return Line(message=message, warning=warning)

    def refuse(self, message: Mapping[str, Any], text: str) -> bytes:
        """The -32600 line for ``message`` (one :meth:`read` passed on) that a stricter reader
        still refused: under its id when it is a request."""
        key = message.get("id") if "method" in message else None
        token = self._stand_ins.pop(key, None) if isinstance(key, str) else None
        if token is None and key is not None:
            token = json.dumps(key).encode()
        return error_line(INVALID_REQUEST, f"Invalid request: {text}", token)

    def _message(self, raw: bytes) -> tuple[dict[str, Any], str | None]:
        if len(raw) > MAX_MESSAGE_BYTES:
            raise _Refused(
                INVALID_REQUEST,
                f"Invalid request: the message is {len(raw):,} bytes; a message may be at most "
                f"{MAX_MESSAGE_BYTES:,} bytes (4 MiB)",
                readable_id(raw),
            )
        text = raw.decode("utf-8", errors="replace")
        try:
            value = json.loads(text, parse_int=_read_int, parse_float=_read_float, parse_constant=_refuse)
        except _NumberOutOfRange as number:
            raise _Refused(INVALID_REQUEST, f"Invalid request: {number}", readable_id(raw)) from None
        except (ValueError, RecursionError):
            raise _Refused(PARSE_ERROR, "Parse error: the line is not valid JSON", readable_id(raw)) from None
        if not isinstance(value, dict):
            raise _Refused(
                INVALID_REQUEST,
                "Invalid request: not a JSON-RPC 2.0 message (a message is one JSON object; "
                "batches are not supported)",
            )
        problem = envelope_problem(value)
        if problem is not None:
            token = readable_id(raw) if "method" in value and problem != _BAD_ID else None
            raise _Refused(INVALID_REQUEST, f"Invalid request: {problem}", token)
        if _deeper_than(value, MAX_DEPTH):
            raise _Refused(
                INVALID_REQUEST,
                f"Invalid request: the message is nested more than {MAX_DEPTH} levels deep",
                readable_id(raw) if "method" in value else None,
            )
        warning = None
        key = value.get("id")
        if _SURROGATE_ESCAPE.search(text):
            warning = "a message carried a lone UTF-16 surrogate: replaced with U+FFFD"
            if isinstance(key, str) and _SURROGATE.search(key):
                value["id"] = self._stand_in(key, raw)
            self._point_cancel_at_stand_in(value)  # before the replacement: the id as read
            value = _replace_surrogates(value)
        elif isinstance(key, str) and "\ufffd" in key and readable_id(raw) is None:
            # U+FFFD made from bytes that are not UTF-8: no id the client could match
            raise _Refused(INVALID_REQUEST, "Invalid request: the id is not valid UTF-8")
        return value, warning

    def _stand_in(self, key: str, raw: bytes) -> str:
        """A stand-in for ``key``, a string id with a lone surrogate; its answer gets ``raw``'s id bytes."""
        token = readable_id(raw)
        self._count += 1
        stand_in = f"{self._prefix}{self._count}"
        self._stand_ins[stand_in] = token if token is not None else json.dumps(key).encode()
        self._by_value[key] = stand_in
        return stand_in

    def _point_cancel_at_stand_in(self, message: dict[str, Any]) -> None:
        if message.get("method") != "notifications/cancelled" or not self._by_value:
            return
        params = message.get("params")
        if isinstance(params, dict) and isinstance(params.get("requestId"), str):
            params["requestId"] = self._by_value.get(params["requestId"], params["requestId"])

    # ------------------------------------------------------------------------------ writing
    def write(self, message: Mapping[str, Any]) -> bytes:
        """``message`` (a JSON-ready mapping) as one line of stdout, newline included; the
        answer to a request read under a stand-in id carries the client's own id bytes.

        Raises:
            ValueError: a float that is not finite (pydantic's JSON mode already makes it null).
        """
        key = message.get("id")
        token = None
        if "method" not in message and isinstance(key, str) and key in self._stand_ins:
            token = self._stand_ins.pop(key)
            for original, stand_in in list(self._by_value.items()):
                if stand_in == key:
                    del self._by_value[original]
        line = _dumps(message)
        if token is not None:
            line = line.replace(b'"id":' + _dumps(key), b'"id":' + token, 1)
        return line + b"\n"


# ----------------------------------------------------------------------------- the envelope
_BAD_ID = "the id must be a string or an integer"


def envelope_problem(message: Mapping[str, Any]) -> str | None:
    """What makes ``message`` (a JSON object) no JSON-RPC 2.0 message of MCP, or None.

    Request ``{jsonrpc, id, method, params?}``, notification ``{jsonrpc, method, params?}``,
    response ``{jsonrpc, id, result}`` or error ``{jsonrpc, id, error: {code, message}}``;
    ``params`` and ``result`` are objects; an id is a string or an integer (never a boolean).
    """
    if "id" in message and not _good_id(message["id"]):
        is_error = "error" in message and "method" not in message and message["id"] is None
        if not is_error:  # an error answer may carry id null (JSON-RPC 2.0)
            return _BAD_ID
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string"
        if "params" in message and not isinstance(message["params"], dict):
            return "params must be an object"
        return None
    if "id" not in message:
        return "not a JSON-RPC 2.0 message (no method and no id)"
    if ("result" in message) == ("error" in message):
        return "a response has exactly one of result and error"
    if "result" in message:
        return None if isinstance(message["result"], dict) else "result must be an object"
    error = message["error"]
    code = error.get("code") if isinstance(error, dict) else None
    if not (isinstance(code, int) and not isinstance(code, bool)):
        return "error must be an object with an integer code"
    return None if isinstance(error.get("message"), str) else "error.message must be a string"


def _good_id(key: Any) -> bool:
    return isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool))


# ----------------------------------------------------------------------------- the id, unparsed
def readable_id(raw: bytes) -> bytes | None:
    """The bytes of ``raw``'s top-level ``"id"`` value when it is a usable id (a JSON string of
    valid UTF-8, or an integer), read without parsing the rest: the line may be no JSON at all.
    None when there is none, or its value is of another type. The last ``"id"`` wins, as in
    :func:`json.loads`. Only the first :data:`_MAX_ID_TOKENS` tokens are read: a line nested
    thousands deep before its id costs a bounded time, and gets id null."""
    depth, position, found = 0, 0, None
    expect_key, key, after_colon = False, None, False
    end = len(raw)
    if not raw.lstrip().startswith(b"{"):
        return None
    for _ in range(_MAX_ID_TOKENS):
        match = _TOKEN.match(raw, position)
        if match is None:  # an unterminated string: nothing more to read
            break
        position = match.end()
        string, structural, other = match.groups()
        if depth == 1 and after_colon:  # a member's value
            if key == "id":
                found = string if string is not None else other if other is not None else b"{"
            after_colon, key = False, None
        if structural in (b"{", b"["):
            depth += 1
            expect_key = structural == b"{" and depth == 1
        elif structural in (b"}", b"]"):
            depth -= 1
        elif depth == 1 and structural == b",":
            expect_key = True
        elif depth == 1 and structural == b":" and key is not None:
            after_colon = True
        elif depth == 1 and string is not None and expect_key:
            key = _string_value(string)
            expect_key = False
        if depth <= 0 or position >= end:
            break
    if found is None:
        return None
    if found.startswith(b'"'):
        return found if _string_value(found) is not None else None
    return found if _INTEGER.fullmatch(found) and len(found) <= _MAX_INT_DIGITS else None


def _string_value(token: bytes) -> str | None:
    try:
        value = json.loads(token.decode("utf-8"))
    except ValueError:  # not UTF-8 (UnicodeDecodeError is a ValueError), or a bad escape
        return None
    return value if isinstance(value, str) else None


# ----------------------------------------------------------------------------- helpers
def error_line(code: int, text: str, id_token: bytes | None = None) -> bytes:
    """A JSON-RPC error line (newline included) under ``id_token`` (an id's bytes), else id null."""
    error = _dumps({"code": code, "message": text})
    return b'{"jsonrpc":"2.0","id":' + (id_token or b"null") + b',"error":' + error + b"}\n"


def _dumps(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in a string: escaped, still valid JSON
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode("ascii")


def _read_int(text: str) -> int:
    if len(text.lstrip("-")) > _MAX_INT_DIGITS:
        raise _NumberOutOfRange(f"a number has more than {_MAX_INT_DIGITS} digits")
    return int(text)


def _read_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NumberOutOfRange(f"the number {text[:40]} is too large")
    return value


def _refuse(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests containers more than ``limit`` deep (no recursion: it may be deep)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            children = item.values() if isinstance(item, dict) else item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def _replace_surrogates(value: Any) -> Any:
    """``value`` (parsed JSON) with every lone surrogate in its strings and keys made U+FFFD."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_replace_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {_replace_surrogates(key): _replace_surrogates(item) for key, item in value.items()}
    return value


class LineSplitter:
    """Bytes as they arrive -> the newline-terminated lines in them. What a chunk leaves
    unterminated waits for the next one; :meth:`rest` is what is left at the end of input (the
    relay's stdin, its socket to the shared server and the server's lines socket all read so)."""

    def __init__(self) -> None:
        self._partial: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines ``chunk`` completes, each with its newline."""
        *complete, rest = chunk.split(b"\n")
        lines = []
        for piece in complete:
            lines.append(b"".join([*self._partial, piece, b"\n"]))
            self._partial = []
        if rest:
            self._partial.append(rest)
        return lines

    def rest(self) -> bytes:
        """The unfinished last line (b"" when input ended on a newline)."""
        return b"".join(self._partial)
