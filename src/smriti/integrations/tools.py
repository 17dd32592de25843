"""LangChain tools bound to one user's Smriti memory: ``remember``, ``recall`` and ``forget``.

```python
from langgraph.prebuilt import create_react_agent
import smriti

memory = smriti.Memory.open(settings)
agent = create_react_agent(model, smriti.as_tools(memory))
```

Each tool returns a short text for the model (what it reads in the ``ToolMessage``) and the
full Smriti result as the message's ``artifact`` for the program (``response_format=
"content_and_artifact"``). Invalid requests (an empty memory, an unknown id) come back to the
model as tool errors it can read and correct, instead of ending the run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from smriti.errors import SmritiError

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

    from smriti.memory import Memory
    from smriti.pipelines.context import MemoryContext

REMEMBER_DESCRIPTION = """Save something to long-term memory so it is available in future conversations.

Use it for durable information: facts about the user or their projects, preferences, decisions
and their reasons, instructions, how-tos that worked. Write ONE self-contained memory per call
in plain sentences that name the people, tools and projects involved (no "it" or "this"), not a
transcript. Never store secrets (passwords, keys). Near-identical memories are merged, so
saving something twice is harmless.

Args:
  content: the memory text.
  importance: 0.0-1.0, how much it matters later (default 0.5; 0.8 or more for explicit user
    instructions and anything that must never be forgotten).
  tags: optional comma-separated labels, e.g. "project-x,database".

Returns the new memory's id."""

RECALL_DESCRIPTION = """Search long-term memory for what you already know.

Call it at the start of a task and whenever earlier conversations could matter (the user's
preferences, past decisions, names, project details) BEFORE asking the user to repeat
themselves. Write the query as a question or keywords naming the people, tools or topics you
need. An empty query lists the most recently used memories.

Args:
  query: natural-language question or keywords.
  limit: maximum number of memories to return (default 5).

Returns the best matching memories, best first, each with its id, relevance score and date.
Memories can be outdated: prefer the most recent when two disagree."""

FORGET_DESCRIPTION = """Delete one memory by its id (ids come from recall or remember results).

Use it only when the user asks you to forget something or a memory is clearly wrong; to
correct a memory, forget the wrong one and remember the corrected version.

Args:
  memory_id: the id of the memory to delete."""


def as_memory(memory_or_context: Memory | MemoryContext) -> Memory:
    """The Memory itself, or a Memory wrapping a MemoryContext."""
    from smriti.memory import Memory
    from smriti.pipelines.context import MemoryContext

    if isinstance(memory_or_context, Memory):
        return memory_or_context
    if isinstance(memory_or_context, MemoryContext):
        return Memory(memory_or_context)
    raise TypeError(
        f"as_tools needs a smriti Memory or MemoryContext, got {type(memory_or_context).__name__}"
    )


def format_recall(result: dict[str, Any]) -> str:
    """Render a recall result as short lines for a model: ``[id] (score, date) text``."""
    results = result.get("results", [])
    if not results:
        return "No matching memories."
    lines = [f"{len(results)} {'memory' if len(results) == 1 else 'memories'}, best first:"]
    for item in results:
        date = item.get("timestamp", "")[:10]
        lines.append(f"- [{item['id']}] (score {item['score']:.2f}, {date}) {item['text']}")
    return "\n".join(lines)


def as_tools(memory_or_context: Memory | MemoryContext) -> list[BaseTool]:
    """LangChain tools ``remember``, ``recall`` and ``forget`` bound to one Smriti memory.

    The tools are plain ``StructuredTool`` objects: give them to ``create_react_agent``, a
    ``ToolNode`` or ``model.bind_tools``. They run synchronously on the memory's embedded
    store (async agents call them in a worker thread, as LangChain does for sync tools).

    Args:
        memory_or_context: a :class:`smriti.memory.Memory` or a ``MemoryContext`` (wrapped in
            a Memory). The caller keeps ownership and closes it.

    Returns:
        ``[remember, recall, forget]``.
    """
    from langchain_core.tools import StructuredTool, ToolException

    memory = as_memory(memory_or_context)
    maximum = memory.context.settings.memory_fabric_max_results

    @contextmanager
    def reported_to_the_model() -> Iterator[None]:
        # The model reads the message and can correct its call (or tell the user the store
        # failed) instead of the agent run ending; anything else is a bug and propagates.
        try:
            yield
        except SmritiError as error:
            raise ToolException(str(error)) from error

    def remember(content: str, importance: float = 0.5, tags: str = "") -> tuple[str, dict[str, Any]]:
        with reported_to_the_model():
            output = memory.store(content, importance=importance, tags=tags, source="agent")
        artifact = {k: v for k, v in output.items() if k != "trace"}
        if output["deduplicated"]:
            return f"Already known; reinforced memory {output['id']}.", artifact
        return f"Remembered as {output['id']} ({output['memory_type']}).", artifact

    def recall(query: str = "", limit: int = 5) -> tuple[str, dict[str, Any]]:
        with reported_to_the_model():
            result = memory.recall(query, limit=max(1, min(int(limit), maximum)))
        return format_recall(result), result

    def forget(memory_id: str) -> tuple[str, dict[str, Any]]:
        with reported_to_the_model():
            output = memory.forget(memory_id)
        return f"Forgot memory {output['forgotten']}.", output

    tools: list[BaseTool] = [
        StructuredTool.from_function(
            remember,
            name="remember",
            description=REMEMBER_DESCRIPTION,
            response_format="content_and_artifact",
        ),
        StructuredTool.from_function(
            recall, name="recall", description=RECALL_DESCRIPTION, response_format="content_and_artifact"
        ),
        StructuredTool.from_function(
            forget, name="forget", description=FORGET_DESCRIPTION, response_format="content_and_artifact"
        ),
    ]
    for tool in tools:
        tool.handle_tool_error = True  # the model reads the message and can correct its call
    return tools
