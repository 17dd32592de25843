"""The stdio flow again, over streamable HTTP against a ``smriti-mcp`` subprocess."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

from smriti.cli import app


def _stdio_flow():
    # Tests run with --import-mode=importlib, so sibling modules are not importable by name;
    # load the shared flow (schemas, stores, recall modes, forget, stats) by path instead.
    path = Path(__file__).with_name("test_server_stdio.py")
    spec = importlib.util.spec_from_file_location("_smriti_stdio_flow", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flow = _stdio_flow()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(process: subprocess.Popen, port: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited early ({process.returncode}): {process.stderr.read().decode()}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    process.kill()
    pytest.fail(f"server did not listen on port {port} within {timeout}s")


@pytest.fixture
def http_server(tmp_path):
    port = free_port()
    command = [
        *flow.server_command(),
        "--transport",
        "streamable-http",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-auth",  # one user on loopback, as asked for (tests/test_server_auth.py covers tokens)
    ]
    env = {**os.environ, **flow.server_env(tmp_path)}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        wait_for_port(process, port)
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_cli_hooks_without_a_server_are_a_clear_error():
    result = CliRunner().invoke(
        app, ["context", "anything", "--server", f"http://127.0.0.1:{free_port()}/mcp"]
    )
    assert result.exit_code == 1 and "cannot reach the Smriti server" in result.stderr
    assert "Traceback" not in result.stderr


def test_streamable_http_session_end_to_end(http_server):
    process, url = http_server

    async def main() -> None:
        async with Client(streamable_http_client(url)) as client:
            await flow.exercise(client)
        # A second connection shares the one Memory the lifespan opened.
        async with Client(streamable_http_client(url)) as client:
            listed = await flow.recall_ids(client, "list")
            assert len(listed) == 2

    anyio.run(main)

    # Hooks while the server holds the database: the CLI asks the server instead of opening it.
    runner = CliRunner()
    context = runner.invoke(app, ["context", "project Atlas deploy", "--server", url])
    assert context.exit_code == 0, context.stderr
    lines = context.stdout.splitlines()
    assert lines and all(line.startswith("- ") and "(id: " in line for line in lines)
    assert "Atlas" in lines[0]
    sync = runner.invoke(app, ["sync", "--server", url])
    # One behaviour with the local `smriti sync`: backups off is a no-op that says so.
    assert sync.exit_code == 0 and "disabled" in sync.stdout, sync.output

    process.send_signal(signal.SIGTERM)
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr.decode()
    assert b"memory database closed" in stderr
    assert stdout == b""  # logs (uvicorn's access log included) go to stderr only
