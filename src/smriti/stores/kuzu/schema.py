"""Files, schema, migrations, row conversion and export of the embedded Kuzu / LadybugDB store.

Kept apart from :mod:`smriti.stores.kuzu.store` so the store class reads as behaviour, not DDL.
Everything here is plain data and functions over a ``run(query, params)`` callable, so the
same code drives Kuzu and its fork LadybugDB.

Migrations are named and recorded (:mod:`smriti.stores.migrations`, as on SQLite):
``0001_tables`` creates what is missing (the original layout had no ``Meta`` table), and
``0002_dataclass_columns`` (repeatable: it runs at every open) adds every column the
dataclasses have and the file lacks (``Engram.cluster_id``, the edges' ``created_at``,
``superseded_by``, ``facts``, and whatever field comes next), with the field's default. Both
only ever add what is missing, so a file from before the record runs them once and safely.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import sys
import typing
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from smriti.stores.base import (
    ENGRAM_FIELDS,
    FIELD_TYPES,
    Association,
    Cue,
    EmbeddingMismatchError,
    Engram,
    StoreError,
    mismatch_message,
)
from smriti.stores.migrations import MIGRATIONS_KEY, Migration, parse_applied, run_migrations

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
VECTOR_INDEX = "engram_vec"
FULLTEXT_INDEX = "engram_fts"

Runner = Callable[[str, dict[str, Any] | None], list[list[Any]]]

# backend -> (import name, file name, native module whose presence marks it as loaded)
BACKENDS: dict[str, tuple[str, str, str]] = {
    "kuzu": ("kuzu", "memory.kuzu", "kuzu._kuzu"),
    "ladybug": ("ladybug", "memory.lbug", "ladybug._lbug"),
}


# -- files and modules ---------------------------------------------------------------------
def import_backend(backend: str) -> ModuleType:
    """Import ``kuzu`` or ``ladybug``, refusing to mix the two in one process.

    Their pybind11 modules both register a type named ``Database``: loading the second one
    fails and the interpreter then crashes at exit, so the clash is reported up front.

    Raises:
        StoreError: the other engine is loaded, or the package is not installed.
    """
    module_name = BACKENDS[backend][0]
    for other, (other_name, _, native) in BACKENDS.items():
        if other != backend and native in sys.modules:
            raise StoreError(
                f"cannot open a {backend} store in a process that already loaded {other_name}: "
                "their native modules clash; use one embedded backend per process"
            )
    try:
        return importlib.import_module(module_name)
    except ImportError as error:
        raise StoreError(
            f"DB_TYPE={backend} needs the {module_name} package: pip install 'smriti-graph[{backend}]'"
        ) from error


# Kuzu's column type of each Python type of an Engram field.
_KUZU_TYPES: dict[Any, str] = {
    str: "STRING",
    float: "DOUBLE",
    int: "INT64",
    datetime: "TIMESTAMP",
    list[float] | None: "FLOAT[{dims}]",
}


def _default_literal(value: Any, kind: Any) -> str | None:
    """The DDL DEFAULT an old row gets when a column is added (None: no default)."""
    if value is dataclasses.MISSING and kind is str:
        return "''"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    return None


def _engram_columns() -> dict[str, tuple[str, str | None]]:
    """name -> (Kuzu type, DEFAULT literal or None), from the Engram dataclass, id first."""
    hints = typing.get_type_hints(Engram)
    defaults = {f.name: f.default for f in dataclasses.fields(Engram)}
    names = ("id", *(name for name in ENGRAM_FIELDS if name != "id"))
    return {
        name: (
            _KUZU_TYPES[hints[name]],
            None if name == "id" else _default_literal(defaults[name], hints[name]),
        )
        for name in names
    }


# name -> (Kuzu type, DEFAULT literal or None). Order is the RETURN order of ENGRAM_RETURN.
# "{dims}" is filled in per store; defaults are what an old row gets when a column is added.
# Derived from the dataclass: a field added to Engram gets a column (and a migration).
ENGRAM_COLUMNS: dict[str, tuple[str, str | None]] = _engram_columns()
CUE_COLUMNS: dict[str, tuple[str, str | None]] = {
    "id": ("STRING", None),
    "name": ("STRING", None),
    "cue_type": ("STRING", "'keyword'"),
    "embedding": ("FLOAT[{dims}]", None),
}
META_COLUMNS: dict[str, tuple[str, str | None]] = {"key": ("STRING", None), "value": ("STRING", None)}

NODE_TABLES = {"Engram": ENGRAM_COLUMNS, "Cue": CUE_COLUMNS, "Meta": META_COLUMNS}
PRIMARY_KEYS = {"Engram": "id", "Cue": "id", "Meta": "key"}
# rel name -> (from, to, properties)
REL_TABLES: dict[str, tuple[str, str, dict[str, tuple[str, str | None]]]] = {
    "EncodedBy": ("Engram", "Cue", {}),
    "AssociatedWith": (
        "Engram",
        "Engram",
        {
            "strength": ("DOUBLE", "0.0"),
            "relation_type": ("STRING", "'similar'"),
            "created_at": ("TIMESTAMP", None),
        },
    ),
    "CoOccurs": ("Cue", "Cue", {"strength": ("DOUBLE", "0.0")}),
    "RelatesTo": (
        "Cue",
        "Cue",
        {"relation": ("STRING", "''"), "engram_id": ("STRING", "''"), "created_at": ("TIMESTAMP", None)},
    ),
}

ENGRAM_RETURN = ", ".join(f"e.{name}" for name in ENGRAM_COLUMNS)
CUE_RETURN = "c.id, c.name, c.cue_type, c.embedding"


# -- timestamps ----------------------------------------------------------------------------
def to_db(value: datetime) -> datetime:
    """Kuzu drops tzinfo and keeps the wall clock, so store naive UTC (naive input is UTC)."""
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def from_db(value: datetime | None, fallback: datetime = EPOCH) -> datetime:
    """Kuzu returns naive datetimes; they are UTC by construction (see :func:`to_db`)."""
    if value is None:
        return fallback
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def read_back(name: str, value: Any) -> Any:
    """What reading a field written as ``value`` (already coerced) returns: times come back aware."""
    return from_db(value) if FIELD_TYPES[name] is datetime else value


# -- rows ----------------------------------------------------------------------------------
# Field name -> the Python type its column reads back as (timestamps are special-cased).
_ENGRAM_TYPES: dict[str, Any] = typing.get_type_hints(Engram)
_ENGRAM_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(Engram) if f.default is not dataclasses.MISSING
}


def engram_from_row(row: Sequence[Any]) -> Engram:
    """Build an Engram from a row in ENGRAM_RETURN order (None-safe for migrated rows)."""
    values = dict(zip(ENGRAM_COLUMNS, row, strict=True))
    created = from_db(values["created_at"])
    fields: dict[str, Any] = {}
    for name, value in values.items():
        kind = _ENGRAM_TYPES[name]
        if kind is datetime:
            value = created if name == "created_at" else from_db(value, created)
        elif name == "embedding":
            value = list(value) if value is not None else None
        elif value is None or (kind is str and not value):
            value = _ENGRAM_DEFAULTS.get(name, "" if kind is str else value)
        else:
            value = kind(value)
        fields[name] = value
    return Engram(**fields)


def engram_params(engram: Engram) -> dict[str, Any]:
    """Query parameters of an Engram, one per column."""
    params: dict[str, Any] = {}
    for name in ENGRAM_COLUMNS:
        value, kind = getattr(engram, name), _ENGRAM_TYPES[name]
        if kind is datetime:
            value = to_db(value)
        elif name == "embedding":
            value = [float(v) for v in value] if value is not None else None
        elif kind in (int, float):
            value = kind(value)
        params[name] = value
    return params


CREATE_ENGRAM = "CREATE (e:Engram {" + ", ".join(f"{name}: ${name}" for name in ENGRAM_COLUMNS) + "})"


def association_from_row(row: Sequence[Any]) -> Association:
    source, target, strength, relation_type, created_at = row
    return Association(source, target, float(strength), relation_type or "similar", from_db(created_at))


def cue_from_row(row: Sequence[Any]) -> Cue:
    id_, name, cue_type, embedding = row
    return Cue(
        id=id_,
        name=name,
        cue_type=cue_type or "keyword",
        embedding=list(embedding) if embedding is not None else None,
    )


# -- DDL and migrations -----------------------------------------------------------------------
def _column_ddl(name: str, spec: tuple[str, str | None], dims: int) -> str:
    kind, default = spec
    kind = kind.format(dims=dims)
    return f"{name} {kind}" + (f" DEFAULT {default}" if default is not None else "")


def create_statements(dims: int) -> list[str]:
    """CREATE ... IF NOT EXISTS for every table (identifiers and types are constants)."""
    statements = []
    for table, columns in NODE_TABLES.items():
        body = ", ".join(_column_ddl(name, spec, dims) for name, spec in columns.items())
        statements.append(
            f"CREATE NODE TABLE IF NOT EXISTS {table}({body}, PRIMARY KEY ({PRIMARY_KEYS[table]}))"
        )
    for rel, (source, target, props) in REL_TABLES.items():
        body = "".join(", " + _column_ddl(name, spec, dims) for name, spec in props.items())
        statements.append(f"CREATE REL TABLE IF NOT EXISTS {rel}(FROM {source} TO {target}{body})")
    return statements


def column_types(run: Runner, table: str) -> dict[str, str]:
    # TABLE_INFO takes a literal table name, never user input: the names are our constants.
    rows = run(f"CALL TABLE_INFO('{table}') RETURN *", None)
    return {row[1]: str(row[2]) for row in rows}


def column_dims(column_type: str) -> int | None:
    match = re.fullmatch(r"FLOAT\[(\d+)\]", column_type.strip())
    return int(match.group(1)) if match else None


def migrations(run: Runner, dims: int, existing: set[str]) -> list[Migration]:
    """The Kuzu/LadybugDB file's schema history, oldest first (see :mod:`smriti.stores.migrations`).

    Kuzu has no transactional DDL worth relying on, so each step checks what is there first."""

    def tables() -> list[str]:
        for statement in create_statements(dims):
            run(statement, None)
        every = [*NODE_TABLES, *REL_TABLES]
        return [f"created table {t}" for t in every if existing and t not in existing]

    def columns() -> list[str]:
        # Fields added to Engram and the edges since (cluster_id, created_at, superseded_by, facts):
        # derived from the dataclasses, added with the field's default.
        changes = []
        tables = {**NODE_TABLES, **{rel: props for rel, (_, _, props) in REL_TABLES.items()}}
        for table, wanted in tables.items():
            if table not in existing:
                continue
            present = column_types(run, table)
            for name, spec in wanted.items():
                if name not in present:
                    run(f"ALTER TABLE {table} ADD {_column_ddl(name, spec, dims)}", None)
                    changes.append(f"added {table}.{name}")
        return changes

    return [Migration("0001_tables", tables), Migration("0002_dataclass_columns", columns, repeatable=True)]


# What a store records as schema_version: the number of named migrations.
SCHEMA_VERSION = len(migrations(lambda query, params: [], 0, set()))


def check_dimensions(run: Runner, dims: int, path: Path) -> set[str]:
    """Refuse a file whose embedding columns have another dimension than ``dims`` (read only);
    returns the file's tables.

    Raises:
        EmbeddingMismatchError: the columns have another dimension.
        StoreError: an embedding column has a type this code cannot use.
    """
    existing = {row[1] for row in run("CALL SHOW_TABLES() RETURN *", None)}
    for table in ("Engram", "Cue"):
        if table in existing:
            column_type = column_types(run, table).get("embedding")
            if column_type is None:
                continue  # added by the migrations with the store's dims
            stored = column_dims(column_type)
            if stored is None:
                raise StoreError(f"{path}: {table}.embedding has type {column_type}, expected FLOAT[n]")
            if stored != dims:
                raise EmbeddingMismatchError(mismatch_message(path, stored, dims))
    return existing


def migrate(run: Runner, dims: int, path: Path) -> list[str]:
    """Bring the file at ``path`` to the newest schema; return what was changed (for the log).

    Raises:
        EmbeddingMismatchError: the file's embedding columns have another dimension.
        StoreError: the embedding column has a type this code cannot use, or a newer Smriti
            migrated the file.
    """
    existing = check_dimensions(run, dims, path)
    recorded = get_meta(run, MIGRATIONS_KEY) if "Meta" in existing else None

    def record(key: str, value: str) -> None:
        run("MERGE (m:Meta {key: $key}) SET m.value = $value", {"key": key, "value": value})

    changes = run_migrations(migrations(run, dims, existing), parse_applied(recorded), record, str(path))
    stored_dims = get_meta(run, "embedding_dims")
    if stored_dims is not None and stored_dims != str(dims):
        raise EmbeddingMismatchError(mismatch_message(path, int(stored_dims), dims))
    if stored_dims is None:
        record("embedding_dims", str(dims))
    return changes


# -- small helpers shared by the collaborators ---------------------------------------------------


def get_meta(run: Runner, key: str) -> str | None:
    rows = run("MATCH (m:Meta {key: $key}) RETURN m.value", {"key": key})
    return rows[0][0] if rows else None


def set_meta(run: Runner, key: str, value: str) -> None:
    run("MERGE (m:Meta {key: $key}) SET m.value = $value", {"key": key, "value": str(value)})


def result_rows(result: Any) -> list[list[Any]]:
    rows = []
    while result.has_next():
        rows.append(result.get_next())
    return rows
