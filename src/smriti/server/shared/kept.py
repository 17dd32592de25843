"""The shared server's answers that a stdio relay gives its client before the server is ready.

A client's first requests are ``initialize`` (or ``server/discover``) and ``tools/list``, and it
waits for them before anything else; a cold shared server takes seconds to start. Yet the
server's answers to them depend only on the server's code, its settings and what the client
sent. So the relay keeps, per user, the answers it got last time (``smriti-answers.json`` in the
storage folder) and gives them at once; it checks them against the server once connected
(:mod:`smriti.server.shared.relay`).

An answer is reused only for the same key: the Smriti version, the digest of the settings
(:func:`smriti.server.shared.client.environment_digest`, over the setting names the last server
published), the MCP SDK's installed files (path and modification time: an SDK upgrade or
downgrade misses), the request's method, what of its params the answer depends on
(:func:`answer_depends_on`), and the ``context``: for ``tools/list``, the protocol version the
client's ``initialize`` asked for. The server answers every client of one protocol version
alike, whatever its name, version or capabilities, so an updated client (a new
``clientInfo.version``) or another client starts warm too. The standard library only: the relay
imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from smriti import __version__
from smriti.server.shared.client import environment_digest

logger = logging.getLogger("smriti.server.shared.kept")

MAX_ENTRIES = 32  # answers kept: a few per distinct client (a client sends the same requests)
_SDK_PACKAGES = ("mcp", "mcp_types")
KEPT_METHODS = ("initialize", "server/discover", "tools/list")


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


def reply_line(message_id: Any, reply: dict[str, Any]) -> bytes:
    """The JSON-RPC answer line (compact, UTF-8, as the SDK's stdio transport writes one).

    Raises:
        UnicodeEncodeError: the id holds a lone surrogate.
    """
    answer = {"jsonrpc": "2.0", "id": message_id, **reply}
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def answer_depends_on(request: dict[str, Any]) -> Any:
    """What of ``request``'s params the server's answer depends on.

    ``initialize``: the protocol version asked for (the server's answer names the version it
    agrees to, its own capabilities, info and instructions: nothing of the client's name,
    version or capabilities). Any other method: its params, with ``_meta`` (a progress token,
    the 2026-07-28 envelope's client info) cut to what names a protocol version.
    """
    params = request.get("params")
    if not isinstance(params, dict):
        return params
    if request.get("method") == "initialize":
        return {"protocolVersion": params.get("protocolVersion")}
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        return params
    versions = {key: value for key, value in meta.items() if "protocolversion" in key.lower()}
    return {**{k: v for k, v in params.items() if k != "_meta"}, **({"_meta": versions} if versions else {})}


class KeptAnswers:
    """The shared server's answers, in one small JSON file: ``{"names": [...], "entries": {...}}``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        try:
            value = json.loads(self.path.read_bytes())
        except (OSError, ValueError):  # none yet, or torn by hand: an empty store
            return {}
        return value if isinstance(value, dict) else {}

    def key(self, request: dict[str, Any], context: Any = None, names: list[str] | None = None) -> str | None:
        """The key of the answer to ``request``; None when no setting names are known yet."""
        names = names if names is not None else self._read().get("names")
        if not isinstance(names, list):
            return None
        material = {
            "smriti": __version__,
            "settings": environment_digest(names),
            "sdk": _sdk_stamp(),
            "method": request.get("method"),
            "params": answer_depends_on(request),
            "context": context,
        }
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()

    def get(self, request: dict[str, Any], context: Any = None) -> dict[str, Any] | None:
        """The reply kept for ``request``: ``{"result": ...}`` or ``{"error": ...}``, or None."""
        value = self._read()
        names = value.get("names")
        entries = value.get("entries")
        if not isinstance(names, list) or not isinstance(entries, dict):
            return None
        entry = entries.get(self.key(request, context, names))
        reply = entry.get("reply") if isinstance(entry, dict) else None
        if not isinstance(reply, dict) or len(reply) != 1:
            return None
        kind, answer = next(iter(reply.items()))
        return reply if kind in ("result", "error") and isinstance(answer, dict) else None

    def put(
        self, request: dict[str, Any], reply: dict[str, Any], names: list[str], context: Any = None
    ) -> None:
        """Keep ``reply`` to ``request`` (the newest ``MAX_ENTRIES`` stay), written atomically.

        ``names``: the setting names the server published; entries kept under other names are
        dropped (their keys can no longer be computed). A failure to write is logged, never
        raised: this only saves time.
        """
        value = self._read()
        entries = value.get("entries") if value.get("names") == names else None
        entries = dict(entries) if isinstance(entries, dict) else {}
        key = self.key(request, context, names)
        entries.pop(key, None)
        entries[key] = {"reply": reply, "written": time.time()}
        kept = sorted(entries.items(), key=lambda item: _written(item[1]))[-MAX_ENTRIES:]
        text = json.dumps({"names": names, "entries": dict(kept)}, ensure_ascii=False, indent=1)
        # A private file in the same folder, then a rename: a reader sees the old file or the
        # new one, never half of one, even with two relays writing at once.
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.{time.monotonic_ns()}")
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except OSError as error:
            logger.warning("could not keep the server's answer in %s: %s", self.path, error)


def _written(entry: Any) -> float:
    value = entry.get("written") if isinstance(entry, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0
