"""The examples run as a user would run them: offline, as separate processes."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.client_examples import CLIENTS, EXAMPLES, example_server

ROOT = Path(__file__).resolve().parents[1]


def test_langgraph_agent_example_runs_offline(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LLM_", "EMBEDDING_"))}
    env["STORAGE_LOCATION"] = str(tmp_path / "store")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_agent.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith("agent: Remembered as")
    assert "I prefer PostgreSQL for billing services" in done.stdout.split("Which database")[1]
    assert lines[-1] == "memories stored: 1"
    assert (tmp_path / "store" / "alice").exists()  # STORAGE_LOCATION was honoured


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_each_client_example_is_one_smriti_server_in_its_clients_format_with_no_placeholder(client):
    """Pasted as it is, the entry starts `smriti-mcp` on the offline default: no key to fill in
    (a placeholder key makes every store fail), no user or folder to edit."""
    config = json.loads((EXAMPLES / f"{client}.json").read_text())
    assert list(config) == [CLIENTS[client]]  # "servers" for VS Code, "mcpServers" for the others
    server = example_server(client)
    assert (server["command"], server["args"]) == ("smriti-mcp", [])
    assert server.get("env", {}) == {}
    if client in ("vscode", "claude_code"):  # their formats name the transport
        assert server["type"] == "stdio"


def test_the_examples_are_the_clients_the_docs_describe():
    """One file per client in examples/mcp/, and a section of docs/clients.md for each that
    names the file, where the client keeps its configuration, and how to add a key."""
    assert sorted(path.stem for path in EXAMPLES.glob("*.json")) == sorted(CLIENTS)
    docs = (ROOT / "docs" / "clients.md").read_text()
    sections = {part.split("\n", 1)[0].strip(): part for part in docs.split("\n## ")[1:]}
    places = {
        "claude_desktop": [
            "~/Library/Application Support/Claude/claude_desktop_config.json",
            "%APPDATA%\\Claude\\claude_desktop_config.json",
        ],
        "claude_code": [".mcp.json", "claude mcp add"],
        "cursor": ["~/.cursor/mcp.json"],
        "windsurf": ["~/.codeium/windsurf/mcp_config.json"],
        "vscode": [".vscode/mcp.json"],
    }
    for client, needles in places.items():
        (section,) = [text for text in sections.values() if f"examples/mcp/{client}.json" in text]
        for needle in needles:
            assert needle in section, (client, needle)
    assert "LLM_API_KEY" in docs


def test_the_claude_code_command_in_the_docs_adds_the_example_server():
    """`claude mcp add NAME -- COMMAND ARGS...`, as docs/clients.md writes it, names the same
    server as examples/mcp/claude_code.json."""
    docs = (ROOT / "docs" / "clients.md").read_text()
    (line,) = [line for line in docs.splitlines() if line.startswith("claude mcp add")]
    words = shlex.split(line)
    name = [word for word in words[3 : words.index("--")] if not word.startswith("-")][-1]
    assert name == "smriti"
    server = example_server("claude_code")
    assert words[words.index("--") + 1 :] == [server["command"], *server["args"]]
