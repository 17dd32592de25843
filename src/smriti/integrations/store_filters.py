"""Filters and namespace conditions of :class:`~smriti.integrations.langgraph_store.SmritiStore`.

The semantics follow LangGraph's reference store (``InMemoryStore``), with two decisions of ours:

* **Dotted keys** reach into nested dicts: ``{"user.access-level": "admin"}`` compares
  ``value["user"]["access-level"]``. A key that exists literally (``{"a.b": 1}`` stored as such)
  is used as it is before the dots are read as a path.
* **Comparisons** (``$gt``, ``$gte``, ``$lt``, ``$lte``) compare numbers (and numeric strings,
  as the reference store's ``float()`` does) numerically, other values of one type (strings, e.g.
  ISO dates) as they are; a missing field or incomparable types never match (like a SQL NULL)
  instead of raising in the middle of a search.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from langgraph.store.base import MatchCondition

_MISSING = object()
OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def field_value(value: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` (a key, or dotted keys into nested dicts); None when missing."""
    found = _lookup(value, path)
    return None if found is _MISSING else found


def _lookup(value: Any, path: str) -> Any:
    if not isinstance(value, Mapping):
        return _MISSING
    if path in value:
        return value[path]
    head, dot, rest = path.partition(".")
    if not dot or head not in value:
        return _MISSING
    return _lookup(value[head], rest)


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether ``value`` satisfies every ``{field: expected}`` of ``filter`` (module docstring).

    Raises:
        ValueError: an operator other than $eq, $ne, $gt, $gte, $lt, $lte.
    """
    return all(_compare(field_value(value, field), expected) for field, expected in (filter or {}).items())


def _compare(actual: Any, expected: Any) -> bool:
    if isinstance(expected, dict):
        if any(k.startswith("$") for k in expected):
            return all(_operator(actual, op, operand) for op, operand in expected.items())
        return isinstance(actual, dict) and all(_compare(actual.get(k), v) for k, v in expected.items())
    if isinstance(expected, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(expected)
            and all(_compare(a, e) for a, e in zip(actual, expected, strict=True))
        )
    return bool(actual == expected)


def _operator(actual: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return _compare(actual, operand)
    if op == "$ne":
        return not _compare(actual, operand)
    if op not in _ORDERINGS:
        raise ValueError(f"unsupported filter operator {op!r} (use {', '.join(OPERATORS)})")
    left, right = _number(actual), _number(operand)
    if left is not None and right is not None:
        return _ORDERINGS[op](left, right)
    if actual is None or isinstance(actual, bool) or type(actual) is not type(operand):
        return False
    try:
        return bool(_ORDERINGS[op](actual, operand))
    except TypeError:  # dicts, lists of mixed types: no order, no match
        return False


def _number(value: Any) -> float | None:
    """A number, or a string that reads as one; booleans are not numbers here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def namespace_matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """A ``MatchCondition`` (prefix or suffix, ``"*"`` matches any one label)."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or n == p for n, p in pairs)
