"""Slow HTTP clients cannot lock others out (server/http_limits.py): real sockets on loopback
against ``smriti-mcp --transport streamable-http`` with tokens, a lowered HTTP_MAX_CONNECTIONS
so the flood stays small, every loop bounded in count and time."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx2
import pytest

from smriti.server.tokens import hash_token
from tests.envs import offline_env
from tests.http_server import Server

LIMIT = 20  # HTTP_MAX_CONNECTIONS in these tests
HEADER_TIMEOUT = 2.0
BODY_TIMEOUT = 2.0
TOKEN = "alices-secret"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "slow-test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def server(tmp_path) -> Iterator[Server]:
    env = offline_env(
        tmp_path / "store",
        SMRITI_TOKENS=f"alice:{hash_token(TOKEN)}",
        HTTP_MAX_CONNECTIONS=str(LIMIT),
        HTTP_HEADER_TIMEOUT=str(HEADER_TIMEOUT),
        HTTP_BODY_TIMEOUT=str(BODY_TIMEOUT),
        HTTP_KEEP_ALIVE_TIMEOUT="60",  # only the new timers may close the flood
    )
    running = Server(env)
    yield running
    code, stderr = running.stop()
    assert code == 0, stderr


def initialize(server: Server, token: str | None = TOKEN) -> httpx2.Response:
    headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
    return httpx2.post(server.url, json=INITIALIZE, headers=headers, timeout=20)


class Trickle:
    """``count`` sockets that each send the start of a request, then one more byte of headers
    every ``every`` seconds (never finishing), until stopped; ``closed`` counts those the
    server closed, and when."""

    def __init__(self, server: Server, count: int, every: float = 0.25) -> None:
        self.sockets = [socket.create_connection(("127.0.0.1", server.port), timeout=5) for _ in range(count)]
        self.opened = time.monotonic()
        self.closed_after: list[float] = []
        self.every = every
        self.stop = threading.Event()
        for sock in self.sockets:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        self.thread = threading.Thread(target=self._drip, daemon=True)
        self.thread.start()

    def _drip(self) -> None:
        alive = list(self.sockets)
        deadline = time.monotonic() + 30  # bounded whatever happens
        while alive and not self.stop.is_set() and time.monotonic() < deadline:
            for sock in list(alive):
                try:
                    sock.sendall(b"a")
                except OSError:  # closed by the server (reset or broken pipe)
                    self.closed_after.append(time.monotonic() - self.opened)
                    alive.remove(sock)
            time.sleep(self.every)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        for sock in self.sockets:
            sock.close()


def test_a_flood_of_trickling_sockets_does_not_lock_out_a_client_with_a_token(server):
    """Twice the connection limit in sockets that trickle headers (uvicorn alone held them all and
    answered everyone 503): a client with a valid token is served at once, again and again."""
    flood = Trickle(server, count=2 * LIMIT)
    try:
        time.sleep(0.5)  # the flood is in
        for _ in range(5):
            started = time.monotonic()
            answer = initialize(server)
            assert answer.status_code == 200, (answer.status_code, answer.text[:200])
            assert time.monotonic() - started < 5
            time.sleep(0.1)
        assert initialize(server, token="wrong").status_code == 401  # and the rest still refused
    finally:
        flood.close()


def test_headers_that_trickle_are_cut_off_after_the_header_timeout(server):
    flood = Trickle(server, count=3)
    try:
        deadline = time.monotonic() + HEADER_TIMEOUT + 10
        while len(flood.closed_after) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        flood.close()
    assert len(flood.closed_after) == 3, flood.closed_after  # still sending, and closed anyway
    assert all(HEADER_TIMEOUT - 0.5 < after < HEADER_TIMEOUT + 5 for after in flood.closed_after)


def read_until_closed(sock: socket.socket, limit: float) -> tuple[bytes, float]:
    """What the server sent until it closed ``sock``, and after how long (fails after ``limit``)."""
    start = time.monotonic()
    sock.settimeout(limit)
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except TimeoutError:
        pytest.fail(f"the server kept a stalled connection open for {limit} s: {data[:200]!r}")
    except ConnectionResetError:
        pass
    return data, time.monotonic() - start


def stalled_post(server: Server, token: str | None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    head = [
        "POST /mcp HTTP/1.1",
        "Host: 127.0.0.1",
        "Accept: application/json, text/event-stream",
        "Content-Type: application/json",
        "Content-Length: 1000",
        *([f"Authorization: Bearer {token}"] if token else []),
    ]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + b'{"jsonrpc":')  # 11 of 1,000 bytes
    return sock


def test_a_body_that_stalls_is_closed_after_the_body_timeout(server):
    with stalled_post(server, TOKEN) as sock:  # past authentication: the app waits for the body
        data, after = read_until_closed(sock, BODY_TIMEOUT + 15)
    assert BODY_TIMEOUT - 0.5 < after < BODY_TIMEOUT + 10, after
    assert not data.startswith(b"HTTP/1.1 2"), data[:200]
    assert initialize(server).status_code == 200  # the server serves on


def test_a_stalled_body_without_a_token_is_refused_before_it_is_read(server):
    with stalled_post(server, None) as sock:
        sock.settimeout(10)
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]


def test_the_settings():
    from smriti.config import Settings

    settings = Settings()
    assert (settings.http_header_timeout, settings.http_body_timeout) == (10.0, 30.0)
