"""The ``traced`` decorator: every node appends one trace entry, timed, without boilerplate.

A node returns the state keys it changes; it may add two private keys that the decorator
moves into the trace entry instead of the state:
``_candidates`` (a list of ``{"id", "score"}``) and ``_notes`` (one line of prose).
"""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable
from typing import Any

MAX_TRACE_CANDIDATES = 25


def _entry(name: str, started: float, update: dict[str, Any]) -> dict[str, Any]:
    candidates = update.pop("_candidates", [])[:MAX_TRACE_CANDIDATES]
    notes = update.pop("_notes", "")
    return {
        "node": name,
        "ms": round((time.perf_counter() - started) * 1000, 3),
        "candidates": [{"id": c["id"], "score": round(float(c["score"]), 6)} for c in candidates],
        "notes": notes,
    }


def traced(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a node (sync or async) so it appends ``{"node", "ms", "candidates", "notes"}``."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_node(state: Any, runtime: Any) -> dict[str, Any]:
                started = time.perf_counter()
                update = dict(await func(state, runtime) or {})
                update["trace"] = [_entry(name, started, update)]
                return update

            return async_node

        @functools.wraps(func)
        def node(state: Any, runtime: Any) -> dict[str, Any]:
            started = time.perf_counter()
            update = dict(func(state, runtime) or {})
            update["trace"] = [_entry(name, started, update)]
            return update

        return node

    return decorate
