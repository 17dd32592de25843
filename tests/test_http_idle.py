"""Idle HTTP connections are closed by the server (HTTP_KEEP_ALIVE_TIMEOUT), with real sockets:
``smriti-mcp --transport streamable-http`` on 127.0.0.1 and the shared server on its unix socket."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

import httpx2
import pytest

from smriti.config import Settings
from tests.envs import offline_env
from tests.http_server import Server
from tests.raw_stdio import RawServer
from tests.test_shared_server import Shared

TIMEOUT = 1.0  # the test's HTTP_KEEP_ALIVE_TIMEOUT


def closed_after(sock: socket.socket, limit: float) -> float:
    """Seconds until the server closes ``sock`` (reads EOF), failing after ``limit``."""
    start = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):  # a response still being read
            pass
    except TimeoutError:
        pytest.fail(f"the server kept an idle connection open for {limit} s")
    except ConnectionResetError:
        pass  # closed, less politely
    return time.monotonic() - start


def health_request(host: str) -> bytes:
    return f"GET /health HTTP/1.1\r\nHost: {host}\r\nConnection: keep-alive\r\n\r\n".encode()


def read_health(sock: socket.socket) -> bytes:
    """One whole /health response (headers and body may come in separate reads)."""
    sock.settimeout(10)
    data = b""
    while not data.endswith(b"}"):
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-response: {data!r}"
        data += chunk
    return data


def check_idle_connections(connect: Callable[[], socket.socket], host: str) -> None:
    # Connections that never send a request: uvicorn alone held these forever.
    silent = [connect() for _ in range(20)]
    # A keep-alive connection after one answered request.
    used = connect()
    used.sendall(health_request(host))
    first = read_health(used)
    assert first.startswith(b"HTTP/1.1 200"), first[:100]
    waited = [closed_after(sock, TIMEOUT + 10) for sock in silent]
    assert max(waited) < TIMEOUT + 5
    assert closed_after(used, TIMEOUT + 10) < TIMEOUT + 5
    for sock in [*silent, used]:
        sock.close()
    # Used within the timeout, a connection stays open for the next request.
    busy = connect()
    for _ in range(3):
        busy.sendall(health_request(host))
        assert read_health(busy).startswith(b"HTTP/1.1 200")
        time.sleep(TIMEOUT / 3)
    busy.close()


def test_streamable_http_closes_idle_connections(tmp_path):
    env = offline_env(tmp_path / "store", HTTP_KEEP_ALIVE_TIMEOUT=str(TIMEOUT))
    server = Server(env, "--no-auth")
    try:
        check_idle_connections(lambda: socket.create_connection(("127.0.0.1", server.port)), "127.0.0.1")
        # and the server serves on
        assert httpx2.get(f"{server.base}/health", timeout=10).status_code == 200
    finally:
        code, stderr = server.stop()
    assert code == 0, stderr


def test_the_shared_server_closes_idle_connections(tmp_path):
    shared = Shared(tmp_path / "store", HTTP_KEEP_ALIVE_TIMEOUT=str(TIMEOUT))
    client = RawServer(shared.env, tmp_path / "relay.log")
    try:
        client.initialize()  # starts the shared server

        def connect() -> socket.socket:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(shared.paths.socket))
            return sock

        check_idle_connections(connect, "localhost")
        # The relay's own pooled connections go idle too: its next request still goes through.
        time.sleep(TIMEOUT * 2)
        assert client.request("after", "ping")["result"] == {}
    finally:
        client.stop()
        shared.kill()


def test_the_settings(monkeypatch):
    settings = Settings()
    assert (settings.http_keep_alive_timeout, settings.http_max_connections) == (5.0, 1000)
    from smriti.config import load_settings
    from smriti.errors import SettingsError

    monkeypatch.setenv("HTTP_KEEP_ALIVE_TIMEOUT", "0")
    with pytest.raises(SettingsError, match="HTTP_KEEP_ALIVE_TIMEOUT"):
        load_settings()
