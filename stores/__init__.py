"""Graph stores: ``make_store(settings)`` opens the accessing user's store on the chosen backend.

Backends are imported lazily so that a Kuzu user never needs the Neo4j driver installed,
and an unknown ``DB_TYPE`` fails loudly instead of falling back to something else.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from smriti.stores.base import (
    Association,
    Capabilities,
    Cue,
    CueHit,
    Engram,
    EngramState,
    GraphStore,
    Relation,
    ScoredId,
    StoreError,
    StoreStats,
    UnsafeUserError,
    validate_user_name,
)

if TYPE_CHECKING:
    from smriti.config import Settings

# DB_TYPE -> "module:factory"; each factory takes (settings, user) and returns a GraphStore.
_REGISTRY: dict[str, str] = {
    "kuzu": "smriti.stores.kuzu:open_kuzu",
    "ladybug": "smriti.stores.kuzu:open_ladybug",
    "falkordb": "smriti.stores.cypher.falkordb:open_falkordb",
    "neo4j": "smriti.stores.cypher.neo4j:open_neo4j",
}


def available_backends() -> list[str]:
    return sorted(_REGISTRY)


def make_store(settings: Settings, user: str | None = None) -> GraphStore:
    """Open the store of ``user`` (default ACCESSING_USER) on ``settings.db_type``.

    Raises:
        ValueError: unknown backend name.
        UnsafeUserError: the user name cannot be used safely.
        StoreError: the backend could not be opened (locked, unreachable, missing extra).
    """
    name = settings.db_type
    if name not in _REGISTRY:
        raise ValueError(f"unknown DB_TYPE {name!r}; choose one of {', '.join(available_backends())}")
    user = validate_user_name(user if user is not None else settings.accessing_user)
    module_name, factory_name = _REGISTRY[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        extra = {"ladybug": "ladybug", "falkordb": "falkordb", "neo4j": "neo4j"}.get(name, "all")
        raise StoreError(
            f"DB_TYPE={name} needs an optional dependency ({error.name}): pip install 'smriti-mcp[{extra}]'"
        ) from error
    return getattr(module, factory_name)(settings, user)


__all__ = [
    "Association",
    "Capabilities",
    "Cue",
    "CueHit",
    "Engram",
    "EngramState",
    "GraphStore",
    "Relation",
    "ScoredId",
    "StoreError",
    "StoreStats",
    "UnsafeUserError",
    "available_backends",
    "make_store",
    "validate_user_name",
]
