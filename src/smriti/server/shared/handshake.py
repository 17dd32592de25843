"""The stdio relay's answer to the handshake before it imports the MCP SDK.

``import mcp`` alone takes 0.9-3 s (its package imports the client, the server and every
protocol version's types), and a cold shared server takes longer still to start: a client
waited that long for the first answer. Yet the server's answers to the handshake depend only on
the server's code and on what the client sent. So the relay keeps, per user, the answers it got
last time (``smriti-initialize.json`` in the storage folder) and, when the client's first lines
are a handshake it has answers for, writes them to stdout before it imports anything heavy.
The handshake is ``initialize``, or ``server/discover`` then ``initialize`` (a client of the
2026-07-28 protocol probes with ``server/discover`` first and falls back to ``initialize`` on the
error the shared server answers it with). The relay then goes on as when it reconnects to a
restarted server: it replays the client's ``initialize`` to the shared server, sends
``notifications/initialized`` itself (the client's own is dropped, so the server gets one) and
compares the server's answer with the one the client was given (see
:mod:`smriti.server.shared.relay`).

An answer is reused only for the same key: the Smriti version, the settings digest, the MCP
SDK's installed files (path and modification time: an SDK upgrade or downgrade misses) and the
client's whole request but its id (method, requested protocol version, capabilities,
clientInfo), so a request is answered from the cache only if the same request got that answer
from a server of this version and these settings. Anything else (no cache, another key, lines
that are not such a handshake, an unreadable cache) takes the ordinary path: the lines go to
the relay's stdio transport as if nothing had read them.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti import __version__
from smriti.server.shared.client import settings_digest, shared_paths

if TYPE_CHECKING:
    from smriti.config import Settings

logger = logging.getLogger("smriti.server.shared.handshake")

MAX_ENTRIES = 16  # answers kept: one per distinct client request (a client sends the same one)
_MAX_FIRST_LINE = 1 << 16  # an initialize is a few hundred bytes; past this, no early answer
_SDK_PACKAGES = ("mcp", "mcp_types")
DISCOVER = "server/discover"
HANDSHAKE = (DISCOVER, "initialize")


def _sdk_stamp() -> list[str]:
    """Where the SDK's packages are installed and when they were written (no import: ~0.1 ms)."""
    stamp = []
    for name in _SDK_PACKAGES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        try:
            stamp.append(f"{origin}:{os.stat(origin).st_mtime_ns}" if origin else f"{name}:absent")
        except OSError:
            stamp.append(f"{origin}:unreadable")
    return stamp


def cache_key(settings: Settings, request: dict[str, Any]) -> str:
    """The key of the answer to ``request`` (its method and params; see the module docstring)."""
    material = {
        "smriti": __version__,
        "settings": settings_digest(settings),
        "sdk": _sdk_stamp(),
        "method": request.get("method"),
        "params": request.get("params"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def reply_of(message: Any) -> dict[str, Any]:
    """What to keep of the server's answer (a JSON-RPC response or error): its ``result`` or
    ``error``, as the SDK's stdio transport writes it."""
    dumped: dict[str, Any] = message.model_dump(mode="json", by_alias=True, exclude_unset=True)
    return {key: value for key, value in dumped.items() if key in ("result", "error")}


class InitializeCache:
    """The shared server's answers to the handshake, in one small JSON file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def of(cls, settings: Settings) -> InitializeCache:
        return cls(shared_paths(settings).handshake)

    def _entries(self) -> dict[str, Any]:
        try:
            value = json.loads(self.path.read_bytes())
        except (OSError, ValueError):  # none yet, or torn by hand: an empty cache
            return {}
        entries = value.get("entries") if isinstance(value, dict) else None
        return entries if isinstance(entries, dict) else {}

    def get(self, key: str) -> dict[str, Any] | None:
        """The reply kept under ``key``: ``{"result": ...}`` or ``{"error": ...}``, or None."""
        entry = self._entries().get(key)
        reply = entry.get("reply") if isinstance(entry, dict) else None
        if not isinstance(reply, dict) or len(reply) != 1:
            return None
        kind, value = next(iter(reply.items()))
        return reply if kind in ("result", "error") and isinstance(value, dict) else None

    def put(self, key: str, reply: dict[str, Any]) -> None:
        """Keep ``reply`` under ``key`` (the newest ``MAX_ENTRIES`` stay), written atomically.

        A failure to write is logged, never raised: the cache only saves time.
        """
        entries = self._entries()
        entries.pop(key, None)
        entries[key] = {"reply": reply, "written": time.time()}
        kept = sorted(entries.items(), key=lambda item: _written(item[1]))[-MAX_ENTRIES:]
        text = json.dumps({"entries": dict(kept)}, ensure_ascii=False, indent=1)
        try:
            # A temporary file in the same folder, then a rename: a reader sees the old file or
            # the new one, never half of one, even with two relays writing at once.
            fd, temporary = tempfile.mkstemp(prefix=".smriti-initialize.", dir=self.path.parent)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as error:
            logger.warning("could not keep the answer to the handshake in %s: %s", self.path, error)


def _written(entry: Any) -> float:
    value = entry.get("written") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


# ----------------------------------------------------------------------------- the first lines
@dataclass(frozen=True)
class EarlyAnswer:
    """What :func:`answer_handshake_early` read from stdin and what it did with it.

    ``head``: the bytes read from stdin that the stdio transport has still to handle (the first
    lines too, unless they were answered). ``request``/``result``: the client's ``initialize``
    (as parsed) and the cached result it was answered with; None when it was not answered.
    """

    head: bytes
    request: dict[str, Any] | None = None
    result: dict[str, Any] | None = None


def _read_line(fd: int, data: bytes) -> bytes:
    """``data`` and more bytes from ``fd``, up to and including a newline (maybe more), or EOF."""
    while b"\n" not in data and len(data) < _MAX_FIRST_LINE:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data


def handshake_request(line: bytes, method: str) -> dict[str, Any] | None:
    """``line`` as a request of ``method`` with a usable id and params, else None."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    key = message.get("id")
    usable_id = isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool))
    if message.get("method") != method or not usable_id or not isinstance(message.get("params"), dict):
        return None
    return message


def reply_line(message_id: str | int, reply: dict[str, Any]) -> bytes:
    """The JSON-RPC answer line, as the SDK's stdio transport writes it (compact, UTF-8).

    Raises:
        UnicodeEncodeError: the id holds a lone surrogate (the transport repairs such lines).
    """
    answer = {"jsonrpc": "2.0", "id": message_id, **reply}
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class _Unanswered(Exception):
    """A line the early path leaves to the relay's transport."""


def _answer(
    settings: Settings, cache: InitializeCache, line: bytes, method: str, kind: str, stdout: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Answer ``line``, a ``method`` request, with the kept reply of ``kind``; the request and
    the reply.

    Raises:
        _Unanswered: it is no such request, or no such reply is kept for it.
    """
    request = handshake_request(line, method)
    reply = cache.get(cache_key(settings, request)) if request is not None else None
    if request is None or reply is None or kind not in reply:
        raise _Unanswered
    try:
        data = reply_line(request["id"], reply)
    except UnicodeEncodeError:
        raise _Unanswered from None
    with contextlib.suppress(OSError):  # the client is gone already: the relay finds stdin closed
        while data:
            data = data[os.write(stdout, data) :]
    logger.info("answered %s from the answer kept in %s", method, cache.path)
    return request, reply


def answer_handshake_early(settings: Settings, stdin: int = 0, stdout: int = 1) -> EarlyAnswer:
    """Read the client's first lines; answer its handshake from the cache when it can.

    The handshake is ``initialize``, or a ``server/discover`` and then ``initialize``: a client of
    the 2026-07-28 protocol probes with ``server/discover`` first and falls back to
    ``initialize`` when the server answers it with an error, as the shared server does (it
    speaks the handshake-era protocol over its sessions). Only such an error is kept for it.
    """
    cache = InitializeCache.of(settings)
    data = _read_line(stdin, b"")
    line, newline, rest = data.partition(b"\n")
    try:
        if newline and handshake_request(line, DISCOVER) is not None:
            _answer(settings, cache, line, DISCOVER, "error", stdout)
            data = _read_line(stdin, rest)  # the client's initialize, sent once it has the answer
            line, newline, rest = data.partition(b"\n")
        if not newline:
            raise _Unanswered
        request, reply = _answer(settings, cache, line, "initialize", "result", stdout)
    except _Unanswered:
        return EarlyAnswer(data)
    return EarlyAnswer(rest, request, reply["result"])
