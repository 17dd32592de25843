"""Input checks: each rule defined once, applied once where a request enters.

One module so the same mistake gets the same message whichever entry point it came
through. Every check raises :class:`smriti.errors.InvalidInput` with a one-line message
and returns the cleaned value.

:func:`check_store` and :func:`check_recall` apply every rule of a request, in one place; the
entry points call them exactly once per request: the MCP tools at the tool boundary
(``server/app.py``), the CLI's commands, :class:`~smriti.memory.Memory` for Python callers, and
the graphs' validate steps for callers that invoke a graph directly. A request checked this
way runs inside :func:`checked_input` and its validate step does not check it again
(``tests/test_validation_once.py`` counts). The mark is a context variable set for that one run,
not a key of the graph's input: nothing a caller puts in a graph's input skips validation.
The MCP tool schemas only advertise the rules
(:func:`importance_schema`, :func:`limit_schema`, :func:`choice_schema`, :func:`text_schema` for
every string's bound): the SDK's argument model checks types, never a rule of its own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TypedDict, get_args

from smriti.errors import InvalidInput

MemoryType = Literal["episodic", "semantic", "procedural"]
"""The memory types, as a type for schemas (re-exported by ``stores.base``)."""
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)

# Control characters (NUL included) become spaces: FalkorDB 4.22 segfaults, taking down a
# server every tenant shares, on a cue name holding one, or longer than ~4,000 bytes, in its
# unique-constraint check. Every backend cleans and bounds names the same way, so an export
# from one imports into any other.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_CUE_NAME = 200  # characters: at most 800 bytes of UTF-8


def clean_label(text: str) -> str:
    """``text`` without control characters (they become spaces), cut to MAX_CUE_NAME characters."""
    return CONTROL_CHARACTERS.sub(" ", text)[:MAX_CUE_NAME]


RecallMode = Literal["recall", "search", "list"]
"""recall: the full pipeline; search: vector similarity only; list: most recently accessed."""
RECALL_MODES: tuple[str, ...] = get_args(RecallMode)

# True while a pipeline runs a request its entry point already checked (see checked_input).
_input_checked: ContextVar[bool] = ContextVar("smriti_input_checked", default=False)


@contextmanager
def checked_input() -> Iterator[None]:
    """Run a pipeline on a request checked with :func:`check_store` or :func:`check_recall`
    where it entered: its validate step does not apply the rules again. Context variables reach
    the nodes through LangGraph, which runs them in a copy of the caller's context."""
    token = _input_checked.set(True)
    try:
        yield
    finally:
        _input_checked.reset(token)


def input_is_checked() -> bool:
    """Whether the running pipeline's request was checked where it entered (:func:`checked_input`)."""
    return _input_checked.get()


def check_content(content: Any, max_chars: int) -> str:
    """A non-empty string of at most ``max_chars`` characters, stripped."""
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be a non-empty string")
    if len(content) > max_chars:
        raise InvalidInput(
            f"content is {len(content)} characters; the limit is {max_chars} (MAX_CONTENT_CHARS)"
        )
    return content.strip()


IMPORTANCE_RANGE = (0.0, 1.0)


def importance_schema() -> dict[str, Any]:
    """The JSON schema of ``importance``: what :func:`check_importance` accepts (advertised only)."""
    return {"type": "number", "minimum": IMPORTANCE_RANGE[0], "maximum": IMPORTANCE_RANGE[1]}


def check_importance(importance: Any) -> float:
    """A finite number in [0, 1] (:data:`IMPORTANCE_RANGE`)."""
    try:
        value = float(importance)
    except (TypeError, ValueError):
        raise InvalidInput(f"importance must be a number in [0, 1], got {importance!r}") from None
    if not math.isfinite(value) or not IMPORTANCE_RANGE[0] <= value <= IMPORTANCE_RANGE[1]:
        raise InvalidInput(f"importance must be a number in [0, 1], got {importance!r}")
    return value


# ----------------------------------------------------------------------------- bounds
# What a client may send, checked before any work and advertised in the tools' input schemas
# (maxLength): fixed, not settings, as nothing a deployment does needs them to vary. The content's
# bound is MAX_CONTENT_CHARS (a setting: an importer of long documents raises it).
MAX_TAGS = 64
"""The most tags one memory has (a near-duplicate's merged tags are cut to it too)."""
MAX_TAG_CHARS = 100
"""The longest tag, in characters."""
MAX_TAGS_CHARS = MAX_TAGS * (MAX_TAG_CHARS + 2)
"""The longest ``tags`` string: ``MAX_TAGS`` tags of ``MAX_TAG_CHARS`` with ", " between them."""
MAX_QUERY_CHARS = 4_000
"""The longest recall query (``smriti context`` cuts a longer prompt to it)."""
MAX_SOURCE_CHARS = 200
"""The longest ``source`` label."""
MAX_ID_CHARS = 64
"""The longest memory id a request may name (ids are 36-character UUIDs; a prefix is shorter)."""
MAX_DATE_CHARS = 64
"""The longest ``occurred_at`` (an ISO 8601 date-time is at most 32)."""


def text_schema(max_chars: int) -> dict[str, Any]:
    """The JSON schema of a bounded string argument (advertised only; its check applies it)."""
    return {"type": "string", "maxLength": max_chars}


def check_length(name: str, value: str, max_chars: int) -> str:
    """``value`` if it has at most ``max_chars`` characters, else a one-line refusal naming ``name``."""
    if len(value) > max_chars:
        raise InvalidInput(f"{name} is {len(value)} characters; the limit is {max_chars}")
    return value


def normalise_tags(tags: Any) -> str:
    """Comma-separated tags, lower-cased, stripped, unique in their first order; None is ``""``.

    At most :data:`MAX_TAGS` tags of :data:`MAX_TAG_CHARS` characters (the whole string at most
    :data:`MAX_TAGS_CHARS`, checked before it is split).
    """
    if tags is None:
        return ""
    if not isinstance(tags, str):
        raise InvalidInput("tags must be a comma-separated string")
    check_length("tags", tags, MAX_TAGS_CHARS)
    parts = [clean_label(t).strip().lower() for t in tags.split(",")]
    unique = list(dict.fromkeys(t for t in parts if t))
    if len(unique) > MAX_TAGS:
        raise InvalidInput(f"{len(unique)} tags; the limit is {MAX_TAGS}")
    for tag in unique:
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(f"tag {tag[:20]!r}... is {len(tag)} characters; the limit is {MAX_TAG_CHARS}")
    return ",".join(unique)


def merge_tags(first: str, second: str) -> str:
    """The union of two normalised tag lists, ``first``'s first, cut to :data:`MAX_TAGS`."""
    tags = dict.fromkeys(t for t in (part.strip() for part in f"{first},{second}".split(",")) if t)
    return ",".join(list(tags)[:MAX_TAGS])


def check_occurred_at(value: Any) -> datetime | None:
    """When a remembered event happened: an ISO 8601 date ("2023-05-08", midnight UTC) or date-time
    (UTC when it has no zone), or a datetime (the library's callers); empty is None (now)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise InvalidInput("occurred_at must be an ISO 8601 date or date-time string")
    text = check_length("occurred_at", value, MAX_DATE_CHARS).strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(
            f"occurred_at must be an ISO 8601 date or date-time (e.g. 2023-05-08 or 2023-05-08T13:56:00Z), "
            f"got {value!r}"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _one_of(choices: tuple[str, ...]) -> str:
    """``'a', 'b' or 'c'``: the words of a choice's error (as the tool errors word a Literal)."""
    quoted = [repr(choice) for choice in choices]
    return f"{', '.join(quoted[:-1])} or {quoted[-1]}" if len(quoted) > 1 else quoted[0]


def choice_schema(choices: tuple[str, ...], *, nullable: bool = False) -> dict[str, Any]:
    """The JSON schema of a choice (mode, memory_type): what its check accepts (advertised only)."""
    schema: dict[str, Any] = {"enum": list(choices), "type": "string"}
    return {"anyOf": [schema, {"type": "null"}]} if nullable else schema


def check_mode(mode: Any) -> str:
    """One of :data:`RECALL_MODES`; empty means ``recall``."""
    mode = mode or "recall"
    if mode not in RECALL_MODES:
        raise InvalidInput(f"mode must be one of {_one_of(RECALL_MODES)}, got {mode!r}")
    return mode


def check_memory_type(memory_type: Any) -> str | None:
    """One of :data:`MEMORY_TYPES`, or None (no filter) for None or ``""``."""
    if memory_type in (None, ""):
        return None
    if memory_type not in MEMORY_TYPES:
        raise InvalidInput(f"memory_type must be one of {_one_of(tuple(MEMORY_TYPES))}, got {memory_type!r}")
    return memory_type


def check_text(name: str, value: Any, max_chars: int) -> str:
    """An optional string argument (a query, a source label) of at most ``max_chars``
    characters, stripped; None is ``""``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    return check_length(name, value, max_chars).strip()


def check_memory_id(value: Any) -> str:
    """A memory id (or the start of one), stripped: at most :data:`MAX_ID_CHARS` characters."""
    return check_text("memory_id", value, MAX_ID_CHARS)


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


# ----------------------------------------------------------------------------- whole requests
class StoreRequest(TypedDict):
    """A store request every rule accepted: the store graph's input, cleaned."""

    content: str
    importance: float
    tags: str
    source: str
    occurred_at: str  # ISO 8601, "" for now
    supersedes: str  # an id, checked against the store by the graph's validate step (it reads it)


class RecallRequest(TypedDict):
    """A recall request every rule accepted: the recall graph's input, cleaned."""

    query: str
    limit: int
    mode: str  # an empty query is mode list
    memory_type: str | None
    explain: bool
    include_superseded: bool


def check_store(
    content: Any = None,
    *,
    max_chars: int,
    importance: Any = 0.5,
    tags: Any = "",
    source: Any = "",
    occurred_at: Any = None,
    supersedes: Any = "",
) -> StoreRequest:
    """Apply every rule of a store request (MAX_CONTENT_CHARS is ``max_chars``).

    Raises:
        InvalidInput: the first rule the request breaks; nothing has been read or written.
    """
    text = check_content(content, max_chars)
    weight = check_importance(importance)
    occurred = check_occurred_at(occurred_at)
    return {
        "content": text,
        "importance": weight,
        "tags": normalise_tags(tags),
        "source": check_text("source", source, MAX_SOURCE_CHARS),
        "occurred_at": occurred.isoformat() if occurred else "",
        # Its length here; whether it names a memory in nodes/supersede.check_supersedes (needs the store).
        "supersedes": (
            check_length("supersedes", supersedes, MAX_ID_CHARS)
            if isinstance(supersedes, str)
            else supersedes
        ),
    }


def check_recall(
    query: Any = "",
    *,
    max_results: int,
    limit: Any = 5,
    mode: Any = "recall",
    memory_type: Any = None,
    explain: Any = False,
    include_superseded: Any = False,
) -> RecallRequest:
    """Apply every rule of a recall request (MEMORY_FABRIC_MAX_RESULTS is ``max_results``); an
    empty query becomes mode ``list`` (Memory Fabric: "empty query").

    Raises:
        InvalidInput: the first rule the request breaks; nothing has been read.
    """
    text = check_text("query", query, MAX_QUERY_CHARS)
    mode = check_mode(mode)
    return {
        "query": text,
        "limit": check_limit(limit, max_results),
        "mode": mode if text else "list",
        "memory_type": check_memory_type(memory_type),
        "explain": bool(explain),
        "include_superseded": bool(include_superseded),
    }
