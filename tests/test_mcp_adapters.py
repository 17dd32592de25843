"""Interoperability with the older protocol line: langchain-mcp-adapters (which pins mcp < 2).

The adapters cannot be installed beside mcp 2, so ``make test`` builds a separate virtual
environment (.venv-adapters, from tests/adapters-requirements.txt) and a small client script
runs there, loading our tools as LangChain tools over stdio.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CLIENT_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    from langchain_mcp_adapters.client import MultiServerMCPClient


    def block_text(block):
        return block.get("text", "") if isinstance(block, dict) else getattr(block, "text", str(block))


    def as_text(output):
        # Adapter versions return a string, content blocks, or (content, artifact).
        if isinstance(output, tuple):
            output = output[0]
        if isinstance(output, list):
            return "".join(block_text(block) for block in output)
        return output if isinstance(output, str) else str(getattr(output, "content", output))


    async def main():
        command, args, env = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
        client = MultiServerMCPClient(
            {"smriti": {"command": command, "args": args, "env": env, "transport": "stdio"}}
        )
        tools = {tool.name: tool for tool in await client.get_tools()}
        stored = json.loads(as_text(await tools["smriti_store"].ainvoke(
            {"content": "Carol schedules the Atlas release review every Thursday.", "importance": 0.8}
        )))
        recalled = json.loads(as_text(await tools["smriti_recall"].ainvoke(
            {"query": "When is the Atlas release review?", "limit": 3}
        )))
        try:  # a tool error surfaces as an exception (ToolException) or as its text
            error_text = as_text(await tools["smriti_store"].ainvoke({"content": "   "}))
        except Exception as error:
            error_text = f"{type(error).__name__}: {error}"
        print(json.dumps({
            "tools": sorted(tools),
            "store_schema": sorted(tools["smriti_store"].args),
            "stored": stored,
            "recalled": recalled,
            "error_text": error_text,
        }))


    asyncio.run(main())
    """
)


ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def adapters_python() -> Path:
    """The Python of the adapters' environment, which ``make test`` builds (.venv-adapters).

    SMRITI_ADAPTERS_PYTHON names another one. Not a skip when it is missing: this test must run
    in CI, so a missing environment is a failure with the command that builds it.
    """
    python = Path(os.environ.get("SMRITI_ADAPTERS_PYTHON") or ROOT / ".venv-adapters" / "bin" / "python")
    if not python.exists():
        pytest.fail(f"{python} does not exist: run `make test` (or `make .venv-adapters/.installed`) first")
    return python


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_langchain_mcp_adapters_load_and_call_our_tools(adapters_python, tmp_path):
    script = tmp_path / "adapters_client.py"
    script.write_text(CLIENT_SCRIPT)
    server = Path(sys.executable).with_name("smriti-mcp")
    command, args = (str(server), []) if server.exists() else (sys.executable, ["-m", "smriti.server"])
    server_env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "STORAGE_LOCATION": str(tmp_path / "store"),
        "ACCESSING_USER": "carol",
        "EMBEDDING_DIMS": "64",
        "LLM_PROVIDER": "heuristic",
        "EMBEDDING_PROVIDER": "hashing",
        "CONSOLIDATION_INTERVAL": "0",
        "SMRITI_SHARED": "false",  # the in-process server: no shared server outlives the test
    }
    version = subprocess.run(
        [str(adapters_python), "-c", "import importlib.metadata as m; print(m.version('mcp'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert int(version.split(".")[0]) < 2, f"the adapters venv should hold the older mcp line, got {version}"

    run = subprocess.run(
        [str(adapters_python), str(script), command, json.dumps(args), json.dumps(server_env)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-5000:]
    output = json.loads(run.stdout.strip().splitlines()[-1])

    assert output["tools"] == ["smriti_manage", "smriti_recall", "smriti_store"]
    assert {"content", "importance", "tags", "source"} <= set(output["store_schema"])
    stored = output["stored"]
    assert stored["deduplicated"] is False and stored["id"]
    recalled = output["recalled"]
    assert recalled["results"] and recalled["results"][0]["id"] == stored["id"]
    assert "content" in output["error_text"]
