"""Resources and the prompt, through a real MCP session with the server over stdio."""

from __future__ import annotations

import json
import subprocess

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.test_server_stdio import MEMORIES, server_command, server_env


def test_stats_recent_and_the_relevant_memories_prompt(tmp_path):
    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path))

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            for text in MEMORIES:
                await client.call_tool("smriti_store", {"content": text})
            listed = await client.list_resources()
            assert {str(r.uri) for r in listed.resources} >= {
                "memory://stats",
                "memory://recent",
                "memory://graph",
            }
            graph = json.loads((await client.read_resource("memory://graph")).contents[0].text)
            memories = [n for n in graph["nodes"] if n["kind"] == "memory"]
            assert {n["text"] for n in memories} == set(MEMORIES)
            assert any(e["kind"] == "cue" for e in graph["edges"])

            stats = json.loads((await client.read_resource("memory://stats")).contents[0].text)
            assert stats["engrams"] == len(MEMORIES)

            recent = json.loads((await client.read_resource("memory://recent")).contents[0].text)
            assert {item["text"] for item in recent["results"]} == set(MEMORIES)
            # reading the resource reinforced nothing
            assert all(item["metadata"]["access_count"] == 0 for item in recent["results"])

            prompts = await client.list_prompts()
            assert "relevant_memories" in [p.name for p in prompts.prompts]
            prompt = await client.get_prompt("relevant_memories", {"task": "paginate the orders API"})
            text = prompt.messages[0].content.text
            assert "cursor-based pagination" in text and text.endswith("The task: paginate the orders API")

            refused = await client.call_tool("smriti_store", {"content": "x", "importance": 1.5})
            assert refused.is_error
            after = json.loads((await client.read_resource("memory://stats")).contents[0].text)
            assert after["engrams"] == len(MEMORIES)

    anyio.run(main)


def test_version_flag():
    done = subprocess.run([*server_command(), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0
    from smriti import __version__

    assert done.stdout.strip() == f"smriti-mcp {__version__}"


def test_store_and_consolidate_traces_with_explain(tmp_path):
    """Every pipeline is inspectable through MCP, not only recall."""
    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path))

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            plain = await client.call_tool("smriti_store", {"content": MEMORIES[0]})
            assert "trace" not in plain.structured_content
            stored = await client.call_tool("smriti_store", {"content": MEMORIES[1], "explain": True})
            nodes = [step["node"] for step in stored.structured_content["trace"]]
            assert nodes[0] == "validate_store" and "embed" in nodes and len(nodes) >= 4
            consolidated = await client.call_tool("smriti_manage", {"action": "consolidate", "explain": True})
            steps = [step["node"] for step in consolidated.structured_content["trace"]]
            assert "recluster" in steps and "decay" in steps

    anyio.run(main)


def test_listeners_hear_when_memories_change(tmp_path):
    """A client listening (subscriptions/listen) to the memory resources is told after a store,
    a forget and a consolidation; a rejected store and a recall change nothing and say nothing."""
    from mcp.client.subscriptions import ResourceUpdated

    from smriti.server.resources import MEMORY_RESOURCES

    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path))

    async def changed(sub, seconds: float) -> set[str]:
        seen: set[str] = set()
        with anyio.move_on_after(seconds):
            async for event in sub:
                assert isinstance(event, ResourceUpdated)
                seen.add(event.uri)
                if seen == set(MEMORY_RESOURCES):
                    break
        return seen

    async def main() -> None:
        async with (
            Client(stdio_client(params)) as client,
            client.listen(resource_subscriptions=list(MEMORY_RESOURCES)) as sub,
        ):
            assert set(sub.honored.resource_subscriptions or ()) == set(MEMORY_RESOURCES)
            stored = await client.call_tool("smriti_store", {"content": MEMORIES[0]})
            assert await changed(sub, 10) == set(MEMORY_RESOURCES)
            assert (await client.call_tool("smriti_store", {"content": ""})).is_error
            await client.call_tool("smriti_recall", {"query": "pagination"})
            assert await changed(sub, 1.0) == set()
            memory_id = stored.structured_content["id"]
            await client.call_tool("smriti_manage", {"action": "forget", "memory_id": memory_id})
            assert await changed(sub, 10) == set(MEMORY_RESOURCES)
            await client.call_tool("smriti_manage", {"action": "consolidate"})
            assert await changed(sub, 10) == set(MEMORY_RESOURCES)

    anyio.run(main)
