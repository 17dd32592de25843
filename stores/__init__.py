"""Graph stores: ``make_store(settings)`` opens the accessing user's store on the chosen backend.

Backends are imported lazily so that a Kuzu user never needs the Neo4j driver installed,
and an unknown ``DB_TYPE`` fails loudly instead of falling back to something else.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
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
    "sqlite": "smriti.stores.sqlite:open_sqlite",
}


logger = logging.getLogger(__name__)
_told_to_move: set[Path] = set()  # user folders already told how to move from Kuzu


def available_backends() -> list[str]:
    return sorted(["auto", *_REGISTRY])


def resolve_auto(settings: Settings, user: str) -> str:
    """What ``DB_TYPE=auto`` opens for ``user``: ``sqlite``, unless the user folder holds a
    Kuzu store (``memory.kuzu``) and no ``memory.sqlite`` (a store made before SQLite became
    the default): then ``kuzu``, with a notice on stderr, once per folder, on how to move."""
    folder = Path(settings.storage_location).expanduser() / user
    if (folder / "memory.kuzu").exists() and not (folder / "memory.sqlite").exists():
        if folder not in _told_to_move:
            _told_to_move.add(folder)
            logger.warning(
                "%s holds a Kuzu store (memory.kuzu): opening it with Kuzu. SQLite is the default "
                "embedded store now; to move: `DB_TYPE=kuzu smriti export memories.jsonl`, then "
                "`DB_TYPE=sqlite smriti import memories.jsonl`, then move memory.kuzu aside "
                "(or set DB_TYPE=kuzu to keep Kuzu and silence this notice)",
                folder,
            )
        return "kuzu"
    return "sqlite"


def make_store(settings: Settings, user: str | None = None) -> GraphStore:
    """Open the store of ``user`` (default ACCESSING_USER) on ``settings.db_type``.

    Raises:
        ValueError: unknown backend name.
        UnsafeUserError: the user name cannot be used safely.
        StoreError: the backend could not be opened (locked, unreachable, missing extra).
    """
    name: str = settings.db_type
    if name not in _REGISTRY and name != "auto":
        raise ValueError(f"unknown DB_TYPE {name!r}; choose one of {', '.join(available_backends())}")
    user = validate_user_name(user if user is not None else settings.accessing_user)
    if name == "auto":
        name = resolve_auto(settings, user)
    module_name, factory_name = _REGISTRY[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        extra = {"ladybug": "ladybug", "falkordb": "falkordb", "neo4j": "neo4j"}.get(name, "all")
        raise StoreError(
            f"DB_TYPE={name} needs an optional dependency ({error.name}): pip install 'smriti-graph[{extra}]'"
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
    "resolve_auto",
    "validate_user_name",
]
