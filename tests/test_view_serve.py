"""`smriti view --serve` serves the page it wrote and nothing else (a real process, raw HTTP).

The page is served from a folder that also holds a dotfile, a copy of the memory database and a
sub-folder: none of them, nor anything outside the folder, may come back, whatever the path's
spelling; a foreign ``Host`` (DNS rebinding) is refused even for the page.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.envs import offline_env

PAGE = "graph.html"


def raw_get(port: int, target: str, host: str | None = None, method: str = "GET") -> tuple[int, bytes]:
    """Send one request with ``target`` exactly as given (no client normalises it); the status and body."""
    host = host if host is not None else f"127.0.0.1:{port}"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    root = tmp_path_factory.mktemp("view")
    storage, folder = root / "memories", root / "out"
    folder.mkdir()
    env = {**os.environ, **offline_env(storage)}
    smriti = [sys.executable, "-m", "smriti.cli"]
    stored = subprocess.run(
        [*smriti, "store", "Priya deploys the Atlas project with Terraform"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stored.returncode == 0, stored.stderr
    shutil.copy(storage / "alice" / "memory.sqlite", folder / "memory.sqlite")
    (folder / ".env").write_text("OPENAI_API_KEY=secret\n")
    (folder / "sub").mkdir()
    (folder / "sub" / "note.txt").write_text("private\n")
    (root / "outside.txt").write_text("outside\n")
    process = subprocess.Popen(
        [*smriti, "view", "--serve", "-o", PAGE],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()  # printed once the socket listens
        assert url.startswith("http://127.0.0.1:") and url.endswith(f"/{PAGE}"), url
        yield int(url.rsplit(":", 1)[1].split("/")[0]), folder
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_page_is_served(served: tuple[int, Path]) -> None:
    port, folder = served
    for target in (f"/{PAGE}", "/", f"/{PAGE}?x=1"):
        status, body = raw_get(port, target)
        assert status == 200, target
        assert body == (folder / PAGE).read_bytes()
    for host in (f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}"):
        assert raw_get(port, f"/{PAGE}", host=host)[0] == 200, host
    assert raw_get(port, f"/{PAGE}", method="HEAD") == (200, b"")


@pytest.mark.parametrize(
    "target",
    [
        "/memory.sqlite",
        "/.env",
        "/sub/",
        "/sub",
        "/sub/note.txt",
        "/../",
        "/../outside.txt",
        "/%2e%2e/",
        "/%2e%2e/outside.txt",
        "/..%2foutside.txt",
        "//etc/passwd",
        "/%2Fetc%2Fpasswd",
        f"/{PAGE}/",
        f"/./{PAGE}",
        f"/{PAGE}%00",
        "/favicon.ico",
    ],
)
def test_nothing_else_is_served(served: tuple[int, Path], target: str) -> None:
    status, body = raw_get(served[0], target)
    assert status == 404, target
    assert b"secret" not in body and b"SQLite" not in body and b"private" not in body


@pytest.mark.parametrize(
    "host",
    ["evil.example:{port}", "evil.example", "127.0.0.1:1", "localhost", "", "127.0.0.1.evil.example:{port}"],
)
def test_a_foreign_host_is_refused(served: tuple[int, Path], host: str) -> None:
    port = served[0]
    status, body = raw_get(port, f"/{PAGE}", host=host.format(port=port))
    assert status == 403, host
    assert b"Smriti memory" not in body


def test_only_get_and_head(served: tuple[int, Path]) -> None:
    assert raw_get(served[0], f"/{PAGE}", method="POST")[0] == 405
    assert raw_get(served[0], f"/{PAGE}", method="DELETE")[0] == 405


def test_a_non_loopback_bind_is_refused(tmp_path: Path) -> None:
    env = {**os.environ, **offline_env(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "view", "--serve", "--bind", "0.0.0.0"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "--bind must be a loopback address" in done.stderr
    assert not (tmp_path / "memory-graph.html").exists()
