"""A real ``smriti-mcp`` process driven with raw bytes on stdin, as a careless client would."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "raw-test", "version": "0"},
}


def smriti_mcp() -> list[str]:
    """The installed console script (what clients start), or the module without scripts."""
    path = Path(sys.executable).with_name("smriti-mcp")
    return [str(path)] if path.exists() else [sys.executable, "-m", "smriti.server"]


def rpc(message_id: int | str | None, method: str, params: dict | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if message_id is not None:
        message["id"] = message_id
    if params is not None:
        message["params"] = params
    return json.dumps(message).encode() + b"\n"


class RawServer:
    """``smriti-mcp`` on pipes; a thread collects every stdout line (each must be JSON)."""

    def __init__(self, env: dict[str, str], stderr_path: Path) -> None:
        self.stderr = stderr_path.open("wb")
        pipe = subprocess.PIPE
        self.process = subprocess.Popen(smriti_mcp(), stdin=pipe, stdout=pipe, stderr=self.stderr, env=env)
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.replies: list[dict[str, Any]] = []
        self.raw_replies: list[bytes] = []  # the same replies, as the bytes that came
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def collect(self, wanted: set[Any], timeout: float = 60.0, nulls: int = 0) -> list[dict[str, Any]]:
        """Read replies until every id in ``wanted`` has an answer and ``nulls`` more id-null
        replies than before have come."""
        deadline = time.monotonic() + timeout
        nulls += self.nulls()
        while True:
            seen = [reply.get("id") for reply in self.replies]
            if not (wanted - set(seen)) and seen.count(None) >= nulls:
                return self.replies
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(
                    f"no reply for {wanted - set(seen)} (or id null) in {timeout} s"
                ) from None
            assert line is not None, "the server closed stdout before answering"
            reply = json.loads(line)
            assert reply.get("jsonrpc") == "2.0", reply
            self.replies.append(reply)
            self.raw_replies.append(line)

    def nulls(self) -> int:
        """How many replies with id null came so far."""
        return sum(1 for reply in self.replies if reply.get("id") is None)

    def request(self, message_id: int | str, method: str, params: dict | None = None) -> dict[str, Any]:
        self.write(rpc(message_id, method, params))
        self.collect({message_id})
        return next(reply for reply in reversed(self.replies) if reply.get("id") == message_id)

    def initialize(self) -> dict[str, Any]:
        reply = self.request("init", "initialize", INITIALIZE)
        self.write(rpc(None, "notifications/initialized"))
        return reply

    def close_stdin(self) -> float:
        """Close stdin (the client went away); the moment it happened."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        return time.monotonic()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.stderr.close()
