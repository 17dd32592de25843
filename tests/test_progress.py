"""Per-step progress (issue 43, item 3): a tool call that carries a progressToken gets one MCP
progress notification per pipeline step, in order, before its result; through the in-process
server and through a real ``smriti-mcp`` relay to the shared server. And a real server runs its
tools on compiled LangGraph graphs, with LangGraph loaded and no other executor."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

from mcp import Client
from mcp.client.stdio import stdio_client

from smriti.server.app import build_server
from tests.test_shared_server import Shared, run, store


class Progress:
    """The SDK client's progress callback, recording each notification with the result's arrival."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.events.append((progress, message))

    @property
    def steps(self) -> list[str | None]:
        return [message for _, message in self.events]


async def _recall_with_progress(client: Client) -> tuple[list[str], Progress, dict[str, Any]]:
    progress = Progress()
    result = await client.call_tool(
        "smriti_recall",
        {"query": "Where is the release checklist?", "explain": True},
        progress_callback=progress,
    )
    assert not result.is_error, result.content
    # Counted when the result came back: every notification had arrived before it.
    steps = list(progress.steps)
    return steps, progress, result.structured_content


def _check(steps: list[str], progress: Progress, recalled: dict[str, Any]) -> None:
    traced = [entry["node"] for entry in recalled["trace"]]
    # One notification per step, in the order the steps ran: the parallel branches (positions 3-5)
    # as each finished, which the trace lists in node-name order.
    assert steps[:3] + steps[6:] == traced[:3] + traced[6:] and sorted(steps[3:6]) == traced[3:6]
    assert [value for value, _ in progress.events] == list(range(1, len(traced) + 1))
    assert steps[0] == "validate_recall" and steps[-1] == "format_result" and len(steps) == 24


def test_a_recall_with_a_progress_token_reports_each_step_in_order_in_process(settings):
    async def main() -> None:
        # The JSON-RPC session (an in-process "auto" client calls the server's functions directly,
        # with no progressToken on the request: the server cannot see that progress was asked).
        async with Client(build_server(settings), mode="legacy") as client:
            await store(client, "Ivan keeps the release checklist in the wiki.")
            steps, progress, recalled = await _recall_with_progress(client)
            _check(steps, progress, recalled)
            stored = Progress()
            result = await client.call_tool(
                "smriti_store", {"content": "Ivan moved it to Notion."}, progress_callback=stored
            )
            assert not result.is_error
            assert stored.steps[:4] == ["validate_store", "analyze", "embed", "find_duplicate"]
            plain = await client.call_tool(
                "smriti_recall", {"query": "checklist"}
            )  # no token: no notification
            assert not plain.is_error and len(progress.events) == len(steps)

    run(main, 120)


def test_progress_arrives_through_the_relay_and_the_server_runs_compiled_graphs(tmp_path):
    """A real ``smriti-mcp`` relay to a real shared server: the notifications pass through, in
    order, before the result; the server's status names the compiled StateGraph its calls ran,
    and it has LangGraph loaded and no runner module (``smriti_manage stats``)."""
    one = Shared(tmp_path / "store")

    async def main() -> None:
        with (tmp_path / "client.log").open("w") as errlog:
            async with Client(stdio_client(one.params(), errlog=errlog)) as client:
                await store(client, "Ivan keeps the release checklist in the wiki.")
                steps, progress, recalled = await _recall_with_progress(client)
                _check(steps, progress, recalled)
                consolidated = Progress()
                result = await client.call_tool(
                    "smriti_manage", {"action": "consolidate"}, progress_callback=consolidated
                )
                assert not result.is_error
                assert consolidated.steps == [
                    "repair",
                    "decay",
                    "prune",
                    "strengthen",
                    "orphans",
                    "recluster",
                    "manage_indexes",
                ]
                stats = await client.call_tool("smriti_manage", {"action": "stats"})
                executor = stats.structured_content["details"]["executor"]
                assert executor == dict.fromkeys(
                    ("store", "recall", "consolidate"), "langgraph.graph.state.CompiledStateGraph"
                )

    try:
        run(main, 180)
    finally:
        one.kill()
    assert "Traceback" not in one.log()


SERVER_SESSION = """
import sys, anyio
from pathlib import Path
from mcp import Client
from smriti.config import Settings
from smriti.server.app import build_server
settings = Settings(storage_location=Path(sys.argv[1]), accessing_user="u", embedding_provider="hashing",
                    embedding_dims=64, llm_provider="heuristic", smriti_shared=False,
                    consolidation_interval=0)
async def main():
    async with Client(build_server(settings)) as client:
        stored = await client.call_tool("smriti_store", {"content": "Ivan keeps the checklist in the wiki."})
        found = await client.call_tool("smriti_recall", {"query": "Where is the checklist?"})
        assert found.structured_content["results"][0]["id"] == stored.structured_content["id"]
anyio.run(main)
print(sorted({name.split(".")[0] for name in sys.modules if name.startswith(("langgraph", "langsmith"))}))
print(any(name in sys.modules for name in ("smriti.pipelines.runner", "smriti.pipelines.gate")))
"""


def test_a_server_runs_langgraph_and_no_other_executor(tmp_path):
    """A fresh process serving a real MCP session: LangGraph is loaded (its graphs ran the
    calls) and no module of the old runner or its gate. (LangSmith is loaded too, tracing or
    not: langchain_core imports it with its runnables; docs/executor.md.)"""
    out = subprocess.run(
        [sys.executable, "-c", SERVER_SESSION, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    loaded, runner = out.stdout.strip().splitlines()
    assert "langgraph" in loaded and runner == "False"
