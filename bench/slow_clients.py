"""Slow HTTP clients against a client with a valid token (issue 37 item 3), on loopback only.

Starts ``smriti-mcp --transport streamable-http`` with one token and the default
HTTP_MAX_CONNECTIONS (1,000), opens ``--sockets`` connections that trickle one header byte per
second and never finish, and meanwhile sends an authenticated ``initialize`` every half second
for ``--seconds``. Reports how many of those got 200 or 503 and their median latency. Each
``--python`` names a venv's interpreter whose checkout serves (the baseline: main's venv).

    .venv/bin/python -m bench.slow_clients --python ../../main/.venv/bin/python .venv/bin/python
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx2

TOKEN = "bench-secret"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "slow-bench", "version": "0"},
    },
}
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "Authorization": f"Bearer {TOKEN}",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run(python: str, sockets: int, seconds: float) -> dict:
    port = free_port()
    folder = tempfile.mkdtemp(prefix="smriti-slow-")
    env = {
        **os.environ,
        "STORAGE_LOCATION": folder,
        "LLM_PROVIDER": "heuristic",
        "EMBEDDING_PROVIDER": "hashing",
        "EMBEDDING_DIMS": "64",
        "SMRITI_TOKENS": f"alice:{hashlib.sha256(TOKEN.encode()).hexdigest()}",
        "LOG_LEVEL": "WARNING",
    }
    command = [python, "-m", "smriti.server", "--transport", "streamable-http", "--port", str(port)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx2.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.2)
        flood = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(sockets)]
        for sock in flood:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        stop = threading.Event()
        closed = [0]

        def drip() -> None:
            alive = list(flood)
            while alive and not stop.is_set():
                for sock in list(alive):
                    try:
                        sock.sendall(b"a")
                    except OSError:
                        closed[0] += 1
                        alive.remove(sock)
                stop.wait(1.0)

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        statuses: list[int] = []
        latencies: list[float] = []
        end = time.monotonic() + seconds
        with httpx2.Client(timeout=10) as client:
            while time.monotonic() < end:
                started = time.monotonic()
                try:
                    status = client.post(f"{base}/mcp", json=INITIALIZE, headers=HEADERS).status_code
                except httpx2.HTTPError:
                    status = 0
                latencies.append((time.monotonic() - started) * 1000)
                statuses.append(status)
                time.sleep(0.5)
        stop.set()
        dripper.join(timeout=5)
        for sock in flood:
            sock.close()
        return {
            "python": python,
            "sockets": sockets,
            "requests": len(statuses),
            "ok_200": statuses.count(200),
            "busy_503": statuses.count(503),
            "other": len(statuses) - statuses.count(200) - statuses.count(503),
            "median_ms": round(statistics.median(latencies), 1),
            "flood_closed_by_server": closed[0],
        }
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", nargs="+", default=[sys.executable])
    parser.add_argument("--sockets", type=int, default=1001)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    for python in args.python:
        print(json.dumps(run(str(Path(python)), args.sockets, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
