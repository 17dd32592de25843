"""Tables, migrations and value conversion of the SQLite store.

Schema versions (``meta.schema_version``):
    1. engram, cue, encoded_by, associated_with, co_occurs, relates_to, meta, engram_fts;
       later, in place (no version change: older code reads and writes such a file
       correctly, since the triggers live in the file): ``cue.engram_count``, kept by
       triggers on encoded_by and filled once from it when the column is added;
       ``engram.superseded_by`` ('' = current) and ``engram.facts`` (the stated facts, one per
       line; '' = none), added with their defaults to older files; ``change_log`` and its
       triggers (what each write changed, for the caches of other processes: :mod:`.changes`).

Design choices, and why:

* Nodes have an INTEGER rowid and a TEXT ``id`` (UNIQUE); edges join on the rowids, which
  keeps the edge tables and their indexes small and every join an integer B-tree lookup.
* Edge tables are ``WITHOUT ROWID`` with the edge as primary key and an index on the other
  end, so "edges of X" is an index range in either direction; foreign keys with
  ``ON DELETE CASCADE`` remove the edges of a deleted node in the same statement.
* Times are INTEGER microseconds since the epoch, UTC: exact round trips, and ORDER BY on
  them is numeric.
* Embeddings are little-endian float32 BLOBs (what Kuzu's FLOAT[] held).
* ``cue.engram_count`` is how many engrams a cue encodes, kept by two triggers on
  ``encoded_by`` (cascaded deletes fire them too): recall asks for these counts twice per
  query, and counting index entries grew with the store (a common cue encodes thousands).
* ``engram_fts`` is an FTS5 table over Smriti's own tokenisation
  (:func:`smriti.stores.search.tokenize`: stemmed terms joined by spaces), kept in step by
  every write: a persistent, incremental keyword index, nothing rebuilt at start. It keeps its
  own copy of the terms (not ``content=''``): SQLite 3.40 has no ``contentless_delete``, and a
  contentless table can only delete a row given the exact text it indexed, which would tie
  the index's integrity to the tokeniser never changing.

Migrations only create what is missing (``IF NOT EXISTS``), so they are idempotent.
"""

from __future__ import annotations

import dataclasses
import operator
import typing
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from smriti.stores.base import (
    ENGRAM_FIELDS,
    Association,
    Cue,
    EmbeddingMismatchError,
    Engram,
    mismatch_message,
)
from smriti.stores.migrations import MIGRATIONS_KEY, Migration, parse_applied, run_migrations
from smriti.stores.search import text_of, tokenize

FILE_NAME = "memory.sqlite"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

# The token characters of Smriti's terms besides letters and digits (see smriti.text._WORD).
FTS_TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '''-_'"

TABLES = [
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    """CREATE TABLE IF NOT EXISTS engram (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        content TEXT NOT NULL,
        summary TEXT NOT NULL DEFAULT '',
        memory_type TEXT NOT NULL DEFAULT 'episodic',
        importance REAL NOT NULL DEFAULT 0.5,
        access_count INTEGER NOT NULL DEFAULT 0,
        created_at INTEGER NOT NULL,
        last_accessed_at INTEGER NOT NULL,
        decay_factor REAL NOT NULL DEFAULT 1.0,
        embedding BLOB,
        source TEXT NOT NULL DEFAULT '',
        tags TEXT NOT NULL DEFAULT '',
        cluster_id INTEGER NOT NULL DEFAULT -1,
        superseded_by TEXT NOT NULL DEFAULT '',
        facts TEXT NOT NULL DEFAULT '')""",
    # list_recent's order, read straight off an index
    "CREATE INDEX IF NOT EXISTS engram_recent ON engram (last_accessed_at DESC, created_at DESC, id)",
    # stats' cluster count without reading every row (cluster_id lies past the embedding BLOB,
    # in its overflow pages: the scan read the whole file, 30 ms at 10k)
    "CREATE INDEX IF NOT EXISTS engram_cluster ON engram (cluster_id)",
    """CREATE TABLE IF NOT EXISTS cue (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL UNIQUE,
        cue_type TEXT NOT NULL DEFAULT 'keyword',
        embedding BLOB,
        engram_count INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS encoded_by (
        engram INTEGER NOT NULL REFERENCES engram (rowid) ON DELETE CASCADE,
        cue INTEGER NOT NULL REFERENCES cue (rowid) ON DELETE CASCADE,
        PRIMARY KEY (engram, cue)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS encoded_by_cue ON encoded_by (cue, engram)",
    # (the cue.engram_count triggers are created by migrate, after the column exists)
    # Symmetric: one row per unordered pair, in the direction it was first made.
    """CREATE TABLE IF NOT EXISTS associated_with (
        a INTEGER NOT NULL REFERENCES engram (rowid) ON DELETE CASCADE,
        b INTEGER NOT NULL REFERENCES engram (rowid) ON DELETE CASCADE,
        strength REAL NOT NULL,
        relation_type TEXT NOT NULL DEFAULT 'similar',
        created_at INTEGER NOT NULL,
        PRIMARY KEY (a, b)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS associated_with_b ON associated_with (b, a)",
    """CREATE TABLE IF NOT EXISTS co_occurs (
        a INTEGER NOT NULL REFERENCES cue (rowid) ON DELETE CASCADE,
        b INTEGER NOT NULL REFERENCES cue (rowid) ON DELETE CASCADE,
        strength REAL NOT NULL,
        PRIMARY KEY (a, b)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS co_occurs_b ON co_occurs (b, a)",
    # engram_id is not a foreign key: a fact may name no engram ('') or one not stored yet.
    """CREATE TABLE IF NOT EXISTS relates_to (
        source INTEGER NOT NULL REFERENCES cue (rowid) ON DELETE CASCADE,
        relation TEXT NOT NULL,
        target INTEGER NOT NULL REFERENCES cue (rowid) ON DELETE CASCADE,
        engram_id TEXT NOT NULL DEFAULT '',
        created_at INTEGER NOT NULL,
        PRIMARY KEY (source, relation, target, engram_id)) WITHOUT ROWID""",
    "CREATE INDEX IF NOT EXISTS relates_to_target ON relates_to (target)",
    "CREATE INDEX IF NOT EXISTS relates_to_engram ON relates_to (engram_id)",
    f'CREATE VIRTUAL TABLE IF NOT EXISTS engram_fts USING fts5 (terms, tokenize="{FTS_TOKENIZE}")',
]

# Secondary indexes a bulk import drops and builds again at its end: one sort each, rather than
# a random B-tree insert per row that rewrites most of their pages at every batch's commit.
# Never a UNIQUE one (they check the data) nor a primary key. An import that is killed leaves
# them missing, and migrate (run at every open) creates them again.
DEFERRED_INDEXES = (
    "engram_recent",
    "encoded_by_cue",
    "associated_with_b",
    "co_occurs_b",
    "relates_to_target",
    "relates_to_engram",
)
CREATE_INDEXES = [statement for statement in TABLES if statement.startswith("CREATE INDEX")]

SUPERSEDED_INDEX = (
    "CREATE INDEX IF NOT EXISTS engram_superseded ON engram (superseded_by) WHERE superseded_by <> ''"
)
SOURCE_INDEX = (
    "CREATE INDEX IF NOT EXISTS engram_source ON engram (source, created_at DESC, id DESC) WHERE source <> ''"
)
ENGRAM_COLUMNS: tuple[str, ...] = ("id", *(name for name in ENGRAM_FIELDS if name != "id"))
ENGRAM_SELECT = ", ".join(f"e.{name}" for name in ENGRAM_COLUMNS)
INSERT_ENGRAM = (
    f"INSERT INTO engram ({', '.join(ENGRAM_COLUMNS)}) VALUES ({', '.join('?' for _ in ENGRAM_COLUMNS)})"
)
CUE_SELECT = "c.id, c.name, c.cue_type, c.embedding"
SET_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)


# -- values --------------------------------------------------------------------------------------
def to_db(value: datetime) -> int:
    """Microseconds since the epoch, UTC (a naive datetime is taken as UTC)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (aware - EPOCH) // _MICROSECOND


def from_db(value: int | None, fallback: datetime = EPOCH) -> datetime:
    return fallback if value is None else EPOCH + timedelta(microseconds=int(value))


def to_blob(embedding: Sequence[float] | None) -> bytes | None:
    return None if embedding is None else np.asarray(embedding, dtype="<f4").tobytes()


def from_blob(blob: bytes | None) -> list[float] | None:
    return None if blob is None else np.frombuffer(blob, dtype="<f4").tolist()


def fts_terms(content: str | None, summary: str | None, facts: str | None = "") -> str:
    """The text the FTS5 table indexes: the same terms the in-memory BM25 index counts."""
    return " ".join(tokenize(text_of(content, summary, facts)))


_FIELD_TYPES: dict[str, Any] = typing.get_type_hints(Engram)


def engram_params(engram: Engram) -> tuple[Any, ...]:
    """INSERT_ENGRAM's parameters."""
    values = []
    for name in ENGRAM_COLUMNS:
        value = getattr(engram, name)
        if _FIELD_TYPES[name] is datetime:
            value = to_db(value)
        elif name == "embedding":
            value = to_blob(value)
        elif _FIELD_TYPES[name] in (int, float):
            value = _FIELD_TYPES[name](value)
        values.append(value)
    return tuple(values)


# Where each Engram field (in the dataclass's order) is in a row of ENGRAM_COLUMNS, and the
# columns a row's conversion touches.
_FIELD_ORDER = operator.itemgetter(*(ENGRAM_COLUMNS.index(f.name) for f in dataclasses.fields(Engram)))
_CREATED, _ACCESSED, _EMBEDDING = (
    ENGRAM_COLUMNS.index(n) for n in ("created_at", "last_accessed_at", "embedding")
)


def _engram(row: Sequence[Any], embedding: list[float] | None) -> Engram:
    """An Engram from a row in ENGRAM_COLUMNS order, with ``embedding`` in place of its BLOB.

    Built by position: recall builds ~250 engrams per question, and a keyword dict of the
    columns cost 6.3 us a row against ~3.5 us."""
    if len(row) != len(ENGRAM_COLUMNS):
        raise ValueError(f"an engram row has {len(ENGRAM_COLUMNS)} columns, not {len(row)}")
    values = list(row)
    created = values[_CREATED] = from_db(values[_CREATED])
    values[_ACCESSED] = from_db(values[_ACCESSED], created)
    values[_EMBEDDING] = embedding
    return Engram(*_FIELD_ORDER(values))


def engram_from_row(row: Sequence[Any]) -> Engram:
    """An Engram from a row in ENGRAM_COLUMNS order."""
    return _engram(row, from_blob(row[_EMBEDDING]))


def engram_and_vector_from_row(row: Sequence[Any]) -> tuple[Engram, np.ndarray | None]:
    """An Engram without its embedding list, and the embedding as a read-only float32 array
    over the BLOB (recall's form: no 1,536 Python floats per engram)."""
    blob = row[_EMBEDDING]
    return _engram(row, None), None if blob is None else np.frombuffer(blob, dtype="<f4")


def cue_from_row(row: Sequence[Any]) -> Cue:
    id_, name, cue_type, embedding = row
    return Cue(id=id_, name=name, cue_type=cue_type or "keyword", embedding=from_blob(embedding))


def association_from_row(row: Sequence[Any]) -> Association:
    source, target, strength, relation_type, created_at = row
    return Association(source, target, float(strength), relation_type or "similar", from_db(created_at))


COUNT_TRIGGERS = [
    "CREATE TRIGGER IF NOT EXISTS encoded_by_counted AFTER INSERT ON encoded_by BEGIN "
    "UPDATE cue SET engram_count = engram_count + 1 WHERE rowid = NEW.cue; END",
    "CREATE TRIGGER IF NOT EXISTS encoded_by_uncounted AFTER DELETE ON encoded_by BEGIN "
    "UPDATE cue SET engram_count = engram_count - 1 WHERE rowid = OLD.cue; END",
]

# What other processes changed, for the caches of HTTP workers sharing the file (see .changes).
CHANGE_LOG_KEEP = 20_000  # log rows kept: a worker more than this many changes behind reloads its caches

CHANGE_LOG = [
    # AUTOINCREMENT: a seq is never reused after the trim, so "seq > seen" can never skip a row.
    "CREATE TABLE IF NOT EXISTS change_log ("
    "seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, engram TEXT NOT NULL DEFAULT '')",
    "CREATE TRIGGER IF NOT EXISTS engram_logged_insert AFTER INSERT ON engram BEGIN "
    "INSERT INTO change_log (kind, engram) VALUES ('engram', NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS engram_logged_delete AFTER DELETE ON engram BEGIN "
    "INSERT INTO change_log (kind, engram) VALUES ('engram', OLD.id); END",
    # Reinforcement and consolidation (access counts, decay, cluster ids) are not logged: no
    # cache holds them.
    "CREATE TRIGGER IF NOT EXISTS engram_logged_update AFTER UPDATE OF embedding, memory_type ON engram "
    "BEGIN INSERT INTO change_log (kind, engram) VALUES ('engram', NEW.id); END",
    "CREATE TRIGGER IF NOT EXISTS cue_logged_delete AFTER DELETE ON cue BEGIN "
    "INSERT INTO change_log (kind) VALUES ('cue'); END",
    # the cue cache holds names and types too (an LLM analysis retypes cues: set_cue_types)
    "CREATE TRIGGER IF NOT EXISTS cue_logged_update AFTER UPDATE OF name, cue_type ON cue BEGIN "
    "INSERT INTO change_log (kind) VALUES ('cue'); END",
    f"CREATE TRIGGER IF NOT EXISTS change_log_trimmed AFTER INSERT ON change_log WHEN NEW.seq % 1000 = 0 "
    f"BEGIN DELETE FROM change_log WHERE seq <= NEW.seq - {CHANGE_LOG_KEEP}; END",
]


# -- migrations -----------------------------------------------------------------------------------


def migrations(conn: Any) -> list[Migration]:
    """The SQLite file's schema history, oldest first (see :mod:`smriti.stores.migrations`)."""

    def tables() -> list[str]:  # every CREATE is IF NOT EXISTS: a new file gets them all
        for statement in TABLES:
            conn(statement)
        return []

    def cue_engram_count() -> list[str]:
        if "engram_count" in _columns(conn, "cue"):
            return []
        conn("ALTER TABLE cue ADD COLUMN engram_count INTEGER NOT NULL DEFAULT 0")
        conn("UPDATE cue SET engram_count = (SELECT count(*) FROM encoded_by x WHERE x.cue = cue.rowid)")
        return ["cue.engram_count added and counted"]

    def count_triggers() -> list[str]:
        for statement in COUNT_TRIGGERS:
            conn(statement)
        return []

    def superseded_by() -> list[str]:  # a file written before corrections existed
        if "superseded_by" in _columns(conn, "engram"):
            return []
        conn("ALTER TABLE engram ADD COLUMN superseded_by TEXT NOT NULL DEFAULT ''")
        return ["engram.superseded_by added"]

    def facts() -> list[str]:  # a file written before the LLM analysis stated facts
        # (its FTS rows need no rebuild: an older memory has no facts to index)
        if "facts" in _columns(conn, "engram"):
            return []
        conn("ALTER TABLE engram ADD COLUMN facts TEXT NOT NULL DEFAULT ''")
        return ["engram.facts added"]

    def superseded_index() -> list[str]:
        # Forget asks which memories a memory superseded: without an index that read every row's
        # overflow pages (the column lies past the embedding BLOB). Partial: only corrected ones.
        conn(SUPERSEDED_INDEX)
        return []

    def change_log() -> list[str]:
        for statement in CHANGE_LOG:
            conn(statement)
        # the latest memories of a source, which HTTP workers sharing the file ask at every
        # store (source lies past the embedding BLOB: a scan would read every row's overflow pages)
        conn(SOURCE_INDEX)
        return []

    return [
        # Repeatable: CREATE ... IF NOT EXISTS, cheap, and what brings back the indexes and
        # triggers a killed bulk import left out (it drops them to load faster).
        Migration("0001_tables", tables, repeatable=True),
        Migration("0002_cue_engram_count", cue_engram_count),
        Migration("0003_cue_count_triggers", count_triggers, repeatable=True),
        Migration("0004_engram_superseded_by", superseded_by),
        Migration("0005_engram_facts", facts),
        Migration("0006_superseded_index", superseded_index, repeatable=True),
        Migration("0007_change_log", change_log, repeatable=True),
    ]


# What a store records as schema_version: the number of named migrations.
SCHEMA_VERSION = len(migrations(lambda *_: None))


def _columns(conn: Any, table: str) -> set[str]:
    return {row[1] for row in conn(f"PRAGMA table_info({table})").fetchall()}


def migrate(conn: Any, dims: int, path: Path) -> list[str]:
    """Bring the file to the newest schema inside the caller's transaction; returns what changed.

    ``conn`` is the writer's ``write`` callable. Raises EmbeddingMismatchError when the file
    holds embeddings of another dimension, StoreError when a newer Smriti migrated it.
    """
    has_meta = conn("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
    recorded = (
        conn("SELECT value FROM meta WHERE key = ?", (MIGRATIONS_KEY,)).fetchone() if has_meta else None
    )
    changes = run_migrations(
        migrations(conn),
        parse_applied(recorded[0] if recorded else None),
        lambda key, value: conn(SET_META, (key, value)),
        str(path),
    )
    stored = conn("SELECT value FROM meta WHERE key = 'embedding_dims'").fetchone()
    if stored is not None and stored[0] != str(dims):
        raise EmbeddingMismatchError(mismatch_message(path, int(stored[0]), dims))
    if stored is None:
        conn(SET_META, ("embedding_dims", str(dims)))
    return changes


def read_embedding_meta(path: Path) -> dict[str, str] | None:
    """The embedding model and dimension an existing file records, read without opening the store.

    A read-only connection, so it works beside a running writer (WAL) and never creates the
    file. None when there is no file or it records nothing yet (a new store).

    Raises:
        sqlite3.Error: the file cannot be read.
    """
    import sqlite3

    if not path.is_file():
        return None
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone():
            return None
        rows = conn.execute(
            "SELECT key, value FROM meta WHERE key IN ('embedding_model', 'embedding_dims')"
        ).fetchall()
    finally:
        conn.close()
    return dict(rows) or None
