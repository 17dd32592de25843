"""The examples run as a user would run them: offline, as separate processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("name", ["claude_desktop.json", "cursor.json", "windsurf.json"])
def test_mcp_client_configurations_start_smriti_with_known_settings(name):
    from smriti.config import Settings

    servers = json.loads((ROOT / "examples" / "mcp" / name).read_text())["mcpServers"]
    assert servers
    for server in servers.values():
        command = [Path(server["command"]).name, *server["args"]]
        assert command == ["smriti-mcp"] or command == ["uvx", "--from", "smriti-graph", "smriti-mcp"]
        assert {key.lower() for key in server["env"]} <= set(Settings.model_fields)
