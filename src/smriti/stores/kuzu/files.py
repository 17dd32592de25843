"""Reading a Kuzu/LadybugDB file before the store opens it, and copying it aside.

Everything here opens the file read-only (nothing in it changes) or copies it closed: what the
file records about its embeddings (:func:`read_embedding_meta`, which decides the embedder
before the store opens), what the migrations would change (:func:`pending_changes`) and the
copy a store makes before they do (:func:`back_up`). A Go server's memory is changed only by a
run that keeps it, and never without a copy first (issue 44).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from smriti.stores.kuzu.schema import (
    NODE_TABLES,
    REL_TABLES,
    Runner,
    column_dims,
    column_types,
    get_meta,
    import_backend,
    migrations,
    result_rows,
)
from smriti.stores.migrations import MIGRATIONS_KEY, parse_applied


def read_embedding_meta(path: Path, backend: str) -> dict[str, str] | None:
    """The embedding model and dimension an existing Kuzu/LadybugDB file records, and how many
    memories it holds (``memories``), read from a read-only open: nothing in the file changes.

    A file without the ``Meta`` table (the Go server's ``memory.lbug``/``memory.kuzu``) records
    no model: its dimension is its embedding column's. None when there is no file or it holds
    nothing yet.

    Raises:
        Exception: the engine cannot open or read the file (locked by another process, too old).
    """
    if not path.exists():
        return None
    with read_only(path, import_backend(backend)) as run:
        tables = {row[1] for row in run("CALL SHOW_TABLES() RETURN *", None)}
        meta: dict[str, str] = {}
        if "Meta" in tables:
            keys = "['embedding_model', 'embedding_dims']"
            rows = run(f"MATCH (m:Meta) WHERE m.key IN {keys} RETURN m.key, m.value", None)
            meta = {str(k): str(v) for k, v in rows}
        if "Engram" in tables:
            meta["memories"] = str(run("MATCH (e:Engram) RETURN count(*)", None)[0][0])
            column = column_dims(column_types(run, "Engram").get("embedding", ""))
            if "embedding_dims" not in meta and column is not None:
                meta["embedding_dims"] = str(column)
    return meta or None


def pending_changes(run: Runner, dims: int) -> list[str]:
    """What :func:`migrate` would change in an existing file, read only (empty: nothing, or a
    file with no tables yet: nothing to keep).

    A store copies a file before it changes it (:func:`back_up`), so that a Go server's memory,
    or an older Smriti's, can be had back as it was.
    """
    existing = {row[1] for row in run("CALL SHOW_TABLES() RETURN *", None)}
    if not existing:
        return []
    changes = [f"table {table}" for table in [*NODE_TABLES, *REL_TABLES] if table not in existing]
    tables = {**NODE_TABLES, **{rel: props for rel, (_, _, props) in REL_TABLES.items()}}
    for table, wanted in tables.items():
        if table in existing:
            present = column_types(run, table)
            changes += [f"column {table}.{name}" for name in wanted if name not in present]
    if "Meta" in existing:
        applied = parse_applied(get_meta(run, MIGRATIONS_KEY))
        known = [m.name for m in migrations(run, dims, existing)]
        changes += [f"migration record {name}" for name in known if name not in applied]
        if get_meta(run, "embedding_dims") is None:
            changes.append("embedding_dims record")
    return changes


def back_up(path: Path, now: datetime | None = None) -> Path:
    """Copy the closed database at ``path`` (and its write-ahead log) beside it, as
    ``<name>.bak-<UTC date and time>``; returns the copy's path."""
    import shutil

    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.bak-{stamp}")
    if path.is_dir():  # the folder layout of Kuzu before 0.7
        shutil.copytree(path, target)
    else:
        shutil.copy2(path, target)
    for suffix in (".wal", ".shadow"):
        side = path.with_name(path.name + suffix)
        if side.exists():
            shutil.copy2(side, target.with_name(target.name + suffix))
    return target


@contextlib.contextmanager
def read_only(path: Path, module: ModuleType) -> Iterator[Runner]:
    """A query runner on a read-only open of ``path`` (nothing in the file changes)."""
    db = module.Database(str(path), read_only=True, buffer_pool_size=64 * 1024**2)
    try:
        conn = module.Connection(db)
        try:
            yield lambda query, params: result_rows(conn.execute(query, params or {}))
        finally:
            conn.close()
    finally:
        db.close()
