"""Input checks shared by the pipelines' validate nodes, the MCP server and the CLI.

One module so the same mistake gets the same message whichever entry point it came
through. Every check raises :class:`smriti.errors.InvalidInput` with a one-line message
and returns the cleaned value.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal, get_args

from smriti.errors import InvalidInput
from smriti.stores.base import MEMORY_TYPES, clean_label

MemoryType = Literal["episodic", "semantic", "procedural"]
"""The memory types (``stores.base.MEMORY_TYPES``), as a type for schemas."""
assert get_args(MemoryType) == tuple(MEMORY_TYPES), "MemoryType must list stores.base.MEMORY_TYPES"

RecallMode = Literal["recall", "search", "list"]
"""recall: the full pipeline; search: vector similarity only; list: most recently accessed."""
RECALL_MODES: tuple[str, ...] = get_args(RecallMode)


def check_content(content: Any, max_chars: int) -> str:
    """A non-empty string of at most ``max_chars`` characters, stripped."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be a non-empty string")
    if len(content) > max_chars:
        raise InvalidInput(
            f"content is {len(content)} characters; the limit is {max_chars} (MAX_CONTENT_CHARS)"
        )
    return content.strip()


def check_importance(importance: Any) -> float:
    """A finite number in [0, 1]."""
    try:
        value = float(importance)
    except (TypeError, ValueError):
        raise InvalidInput(f"importance must be a number in [0, 1], got {importance!r}") from None
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise InvalidInput(f"importance must be a number in [0, 1], got {importance!r}")
    return value


def normalise_tags(tags: Any) -> str:
    """Comma-separated tags, lower-cased, stripped, unique in their first order; None is ``""``."""
    if tags is None:
        return ""
    if not isinstance(tags, str):
        raise InvalidInput("tags must be a comma-separated string")
    parts = [clean_label(t).strip().lower() for t in tags.split(",")]
    return ",".join(dict.fromkeys(t for t in parts if t))


def check_occurred_at(value: Any) -> datetime | None:
    """When a remembered event happened: an ISO 8601 date ("2023-05-08", midnight UTC) or date-time
    (UTC when it has no zone); empty is None (now)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise InvalidInput("occurred_at must be an ISO 8601 date or date-time string")
    text = value.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"occurred_at must be an ISO 8601 date or date-time (e.g. 2023-05-08 or 2023-05-08T13:56:00Z), "
            f"got {value!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def check_mode(mode: Any) -> str:
    """One of :data:`RECALL_MODES`; empty means ``recall``."""
    mode = mode or "recall"
    if mode not in RECALL_MODES:
        raise InvalidInput(f"mode must be one of {', '.join(RECALL_MODES)}, got {mode!r}")
    return mode


def check_memory_type(memory_type: Any) -> str | None:
    """One of ``stores.base.MEMORY_TYPES``, or None (no filter) for None or ``""``."""
    if memory_type in (None, ""):
        return None
    if memory_type not in MEMORY_TYPES:
        raise InvalidInput(f"memory_type must be one of {', '.join(MEMORY_TYPES)}, got {memory_type!r}")
    return memory_type


LIMIT_MINIMUM = 1  # the fewest results a recall may ask for; the most is MEMORY_FABRIC_MAX_RESULTS


def limit_schema(maximum: int) -> dict[str, Any]:
    """The JSON schema of a recall ``limit``: exactly what :func:`check_limit` accepts."""
    return {"type": "integer", "minimum": LIMIT_MINIMUM, "maximum": maximum}


def check_limit(limit: Any, maximum: int) -> int:
    """An integer (not a bool) from ``LIMIT_MINIMUM`` to ``maximum`` (MEMORY_FABRIC_MAX_RESULTS)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInput(f"limit must be a whole number from {LIMIT_MINIMUM} to {maximum}, got {limit!r}")
    if limit < LIMIT_MINIMUM:
        raise InvalidInput(f"limit must be at least {LIMIT_MINIMUM}, got {limit}")
    if limit > maximum:
        raise InvalidInput(f"limit must be at most {maximum} (MEMORY_FABRIC_MAX_RESULTS), got {limit}")
    return limit
