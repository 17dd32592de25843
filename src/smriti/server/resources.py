"""What the server offers besides its three tools: read-only resources and a prompt.

Statistics sit under ``smriti_manage``, whose ``forget`` makes the tool destructive, so careful
clients ask before every call; here they can be read without asking, as can the most recent
memories (listing reinforces nothing). The prompt hands a client the memories relevant to a
task in one message, for clients that offer prompts as slash commands.

Static resources get no request context from the SDK (only templates and tools do), so they
reach the runtime through ``current()``, held open while they read it: the memory of the
request's authenticated user (the SDK's per-request context variable), or the one user of a
server without authentication.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from pydantic import Field

from smriti.runtime import describe_status

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from smriti.runtime import Runtime

RECENT = 20  # memories in memory://recent
# What a store, a forget or a consolidation changes: the tools notify listeners of these.
MEMORY_RESOURCES = ("memory://stats", "memory://recent", "memory://graph")
PROMPT_MEMORIES = 5
GRAPH_MEMORIES = 300


def register_resources(
    server: MCPServer, current: Callable[[], AbstractAsyncContextManager[Runtime]]
) -> None:
    """Add ``memory://stats``, ``memory://recent``, ``memory://graph`` and the ``relevant_memories``
    prompt."""

    @server.resource(
        "memory://stats",
        name="stats",
        title="Memory statistics",
        description="Counts of memories, cues, associations and clusters; backend and models.",
        mime_type="application/json",
    )
    async def stats() -> str:
        async with current() as runtime:
            details = await anyio.to_thread.run_sync(describe_status, runtime)
        return json.dumps(details, default=str)

    @server.resource(
        "memory://recent",
        name="recent",
        title="Recent memories",
        description=f"The {RECENT} most recently used memories (reading them reinforces nothing).",
        mime_type="application/json",
    )
    async def recent() -> str:
        async with current() as runtime:
            memory = runtime.memory
            result = await anyio.to_thread.run_sync(lambda: memory.recall("", limit=RECENT, mode="list"))
        return json.dumps(result, default=str)

    @server.resource(
        "memory://graph",
        name="graph",
        title="Memory graph",
        description=f"The {GRAPH_MEMORIES} most recently used memories with their cues, associations "
        "and facts, as nodes and edges (what `smriti view` draws).",
        mime_type="application/json",
    )
    async def graph() -> str:
        from smriti.view import collect

        async with current() as runtime:
            view = await anyio.to_thread.run_sync(collect, runtime.memory, GRAPH_MEMORIES)
        return json.dumps({"nodes": view.nodes, "edges": view.edges}, default=str)

    @server.prompt(
        name="relevant_memories",
        title="Memories relevant to a task",
        description="Recall what is remembered about a task and hand it over with the task.",
    )
    async def relevant_memories(
        task: Annotated[str, Field(description="The task or question at hand")],
    ) -> list[dict[str, Any]]:
        async with current() as runtime:
            memory = runtime.memory
            result = await anyio.to_thread.run_sync(
                lambda: memory.recall(task, limit=PROMPT_MEMORIES, mode="recall")
            )
        lines = [f"- {item['text']} (memory {item['id']})" for item in result["results"]]
        remembered = "\n".join(lines) if lines else "(nothing remembered about this yet)"
        text = f"What I remember that may bear on this task:\n{remembered}\n\nThe task: {task}"
        return [{"role": "user", "content": text}]
