"""Graph stores: ``make_store(settings)`` opens the accessing user's store on the chosen backend.

Backends are imported lazily so that a Kuzu user never needs the Neo4j driver installed,
and an unknown ``DB_TYPE`` fails loudly instead of falling back to something else.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field
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
from smriti.stores.paths import KUZU_FILE, LADYBUG_FILE, SQLITE_FILE, user_folder

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
    """What ``DB_TYPE=auto`` opens for ``user``: ``sqlite``, unless the user folder holds an
    older embedded store and no ``memory.sqlite``: a Kuzu store (``memory.kuzu``, made before
    SQLite became the default) opens with Kuzu, a LadybugDB store (``memory.lbug``, the Go
    server's users) with LadybugDB. Never a new, empty SQLite beside a user's memory: that
    would look like the memory was gone. A notice on stderr, once per folder, says how to move."""
    folder = user_folder(settings.storage_location, user)
    if (folder / SQLITE_FILE).exists():
        return "sqlite"
    for file_name, backend, engine in ((KUZU_FILE, "kuzu", "Kuzu"), (LADYBUG_FILE, "ladybug", "LadybugDB")):
        if (folder / file_name).exists():
            if folder not in _told_to_move:
                _told_to_move.add(folder)
                logger.warning(
                    "%s holds a %s store (%s): opening it with %s. SQLite is the default embedded "
                    "store now; to move: `DB_TYPE=%s smriti export memories.jsonl`, then "
                    "`DB_TYPE=sqlite smriti import memories.jsonl`, then move %s aside "
                    "(or set DB_TYPE=%s to keep it and silence this notice)",
                    folder,
                    engine,
                    file_name,
                    engine,
                    backend,
                    file_name,
                    backend,
                )
            return backend
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
    if name in ("kuzu", "ladybug") and settings.http_workers > 1:
        raise StoreError(
            f"{name} opens a database in one process only, and {settings.http_workers} HTTP workers "
            f"serve this memory: run one worker, or move user {user!r} to SQLite "
            f"(`DB_TYPE={name} smriti export FILE`, then `DB_TYPE=sqlite smriti import FILE`)"
        )
    module_name, factory_name = _REGISTRY[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        extra = {"ladybug": "ladybug", "falkordb": "falkordb", "neo4j": "neo4j"}.get(name, "all")
        raise StoreError(
            f"DB_TYPE={name} needs an optional dependency ({error.name}): pip install 'smriti-graph[{extra}]'"
        ) from error
    return getattr(module, factory_name)(settings, user)


@dataclass(frozen=True)
class RecordedEmbedding:
    """What an existing store records about its embeddings (``known`` False: it cannot be read
    before the store opens, as on the server backends, or the file could not be read)."""

    model: str | None = None
    dims: int | None = None
    known: bool = True
    # Not part of what a store records (equality): how many memories it holds (None: not read)
    # and the embedded file read, for the refusals made before it opens.
    memories: int | None = field(default=None, compare=False)
    path: Path | None = field(default=None, compare=False)


def recorded_embedding(settings: Settings, user: str | None = None) -> RecordedEmbedding | None:
    """The embedding model and dimension ``user``'s store was made with, before it is opened.

    ``EMBEDDING_PROVIDER=auto`` reads this to keep an existing store on its embedder and give a
    new one the best local model: the embedding columns are fixed-size, so the dimension must be
    known when the store opens. The embedded files are read read-only (nothing is created), and
    so is a FalkorDB graph; Neo4j is not asked (its stores answer as unknown).

    Returns:
        None for a store that does not exist yet or records nothing; else what it records.
    """
    user = validate_user_name(user if user is not None else settings.accessing_user)
    name: str = settings.db_type
    if name == "auto":
        name = resolve_auto(settings, user)
    folder = user_folder(settings.storage_location, user)
    path = None
    try:
        if name == "sqlite":
            from smriti.stores.sqlite.schema import read_embedding_meta

            path = folder / SQLITE_FILE
            meta = read_embedding_meta(path)
        elif name in ("kuzu", "ladybug"):
            from smriti.stores.kuzu.files import read_embedding_meta as read_kuzu_meta

            path = folder / (KUZU_FILE if name == "kuzu" else LADYBUG_FILE)
            meta = read_kuzu_meta(path, name)
        elif name == "falkordb":
            from smriti.stores.cypher.falkordb import read_embedding_meta as read_falkor_meta

            meta = read_falkor_meta(settings, user)
        else:
            return RecordedEmbedding(known=False)
    except Exception as error:  # why: the store's own open reports a broken file properly
        logger.debug("could not read the embedding metadata of %s: %s", folder, error)
        return RecordedEmbedding(known=False)
    if meta is None:
        return None
    dims, memories = meta.get("embedding_dims"), meta.get("memories")
    return RecordedEmbedding(
        model=meta.get("embedding_model"),
        dims=int(dims) if dims else None,
        memories=int(memories) if memories is not None else None,
        path=path,
    )


__all__ = [
    "Association",
    "Capabilities",
    "Cue",
    "CueHit",
    "Engram",
    "EngramState",
    "GraphStore",
    "RecordedEmbedding",
    "Relation",
    "ScoredId",
    "StoreError",
    "StoreStats",
    "UnsafeUserError",
    "available_backends",
    "make_store",
    "recorded_embedding",
    "resolve_auto",
    "validate_user_name",
]
