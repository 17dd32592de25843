"""Input validation nodes: bad requests fail before anything is read or written.

The validators are plain functions too, so the MCP server and the CLI give the same
messages for the same mistakes.
"""

from __future__ import annotations

import math
from typing import Any

from langgraph.runtime import Runtime

from smriti.errors import InvalidInput
from smriti.nodes.trace import traced
from smriti.pipelines.context import MemoryContext
from smriti.pipelines.state import RecallState, StoreState
from smriti.stores.base import MEMORY_TYPES

RECALL_MODES = ("recall", "search", "list")


def check_content(content: Any, max_chars: int) -> str:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be a non-empty string")
    if len(content) > max_chars:
        raise InvalidInput(
            f"content is {len(content)} characters; the limit is {max_chars} (MAX_CONTENT_CHARS)"
        )
    return content.strip()


def check_importance(importance: Any) -> float:
    try:
        value = float(importance)
    except (TypeError, ValueError):
        raise InvalidInput(f"importance must be a number in [0, 1], got {importance!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"importance must be a number in [0, 1], got {importance!r}")
    return value


def normalise_tags(tags: Any) -> str:
    if tags is None:
        return ""
    if not isinstance(tags, str):
        raise InvalidInput("tags must be a comma-separated string")
    parts = [t.strip().lower() for t in tags.split(",")]
    return ",".join(dict.fromkeys(t for t in parts if t))


def check_mode(mode: Any) -> str:
    mode = mode or "recall"
    if mode not in RECALL_MODES:
        raise InvalidInput(f"mode must be one of {', '.join(RECALL_MODES)}, got {mode!r}")
    return mode


def check_memory_type(memory_type: Any) -> str | None:
    if memory_type in (None, ""):
        return None
    if memory_type not in MEMORY_TYPES:
        raise InvalidInput(f"memory_type must be one of {', '.join(MEMORY_TYPES)}, got {memory_type!r}")
    return memory_type


def check_limit(limit: Any, maximum: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidInput(
            f"limit must be an integer from 1 to {maximum} (MEMORY_FABRIC_MAX_RESULTS), got {limit!r}"
        )
    return limit


@traced("validate")
def validate_store(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    settings = runtime.context.settings
    source = state.get("source") or ""
    if not isinstance(source, str):
        raise InvalidInput("source must be a string")
    return {
        "content": check_content(state.get("content"), settings.max_content_chars),
        "importance": check_importance(state.get("importance", 0.5)),
        "tags": normalise_tags(state.get("tags", "")),
        "source": source.strip(),
        "_notes": "input accepted",
    }


@traced("validate")
def validate_recall(state: RecallState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    settings = runtime.context.settings
    query = state.get("query") or ""
    if not isinstance(query, str):
        raise InvalidInput("query must be a string")
    mode = check_mode(state.get("mode"))
    if not query.strip() and mode != "list":
        mode = "list"  # an empty query returns recent memories (Memory Fabric: "empty query")
    return {
        "query": query.strip(),
        "mode": mode,
        "limit": check_limit(state.get("limit", 5), settings.memory_fabric_max_results),
        "memory_type": check_memory_type(state.get("memory_type")),
        "explain": bool(state.get("explain", False)),
        "_notes": f"mode={mode}",
    }
