"""The example client configurations (examples/mcp/), read in each client's own format."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "mcp"

# Each client's file and the key its format keeps the servers under: VS Code's mcp.json says
# "servers"; Claude Desktop, Claude Code (.mcp.json), Cursor and Windsurf say "mcpServers".
CLIENTS = {
    "claude_desktop": "mcpServers",
    "claude_code": "mcpServers",
    "cursor": "mcpServers",
    "windsurf": "mcpServers",
    "vscode": "servers",
}


def example_server(client: str) -> dict[str, Any]:
    """The one server entry of ``client``'s example file."""
    config = json.loads((EXAMPLES / f"{client}.json").read_text())
    (server,) = config[CLIENTS[client]].values()
    return server


def pasted_env(home: Path) -> dict[str, str]:
    """The environment a client starts its server in when the example is pasted as it is: the
    user's own, with no Smriti or model setting, ``home`` for their home folder and this
    checkout's ``smriti-mcp`` on PATH (where `pipx install` or `uv tool install` would put it)."""
    kept = ("PATH", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "SYSTEMROOT")
    env = {name: value for name, value in os.environ.items() if name in kept}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["HOME"] = str(home)
    return env
