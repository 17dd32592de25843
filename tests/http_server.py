"""A ``smriti-mcp --transport streamable-http`` subprocess for tests, ready once /health answers."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2
import pytest


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_command() -> list[str]:
    script = Path(sys.executable).with_name("smriti-mcp")
    return [str(script)] if script.exists() else [sys.executable, "-m", "smriti.server"]


class Server:
    """A running smriti-mcp over streamable HTTP on a free loopback port."""

    def __init__(self, env: dict[str, str], *args: str, host: str = "127.0.0.1") -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        command = [*server_command(), "--transport", "streamable-http", "--host", host]
        command += ["--port", str(self.port), *args]
        # stderr to a file, not a pipe: a server logging every request would block on a full pipe.
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - read and closed by stop()
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=self.log, env={**os.environ, **env}
        )
        self._wait()

    def _wait(self, timeout: float = 60.0) -> None:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"server exited ({self.process.returncode}): {self.stderr()}")
            try:
                if httpx2.get(f"{self.base}/health", timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                time.sleep(0.1)
        self.stop()
        pytest.fail("server did not answer /health in time")

    def stderr(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self) -> tuple[int, str]:
        """SIGTERM, wait, and (once) the exit code and stderr; later calls return the same."""
        if self.log.closed:
            return self.process.returncode, self._text
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._text = self.stderr()
        self.log.close()
        return self.process.returncode, self._text
