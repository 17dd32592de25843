"""The engram table of the SQLite store: :class:`EngramTable`.

Every write keeps the FTS5 row of the engram in step in the same transaction, and tells the
search index (through ``on_change``) what to do to its caches once the transaction commits.
Id lists travel as one JSON parameter (``IN (SELECT value FROM json_each(?))``): one
statement, any length, never text built from input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from smriti.errors import StoreFull
from smriti.stores.base import Engram, EngramState, StoreError, check_dims, check_update, coerce_field
from smriti.stores.search import REINDEXED_FIELDS
from smriti.stores.sqlite import schema
from smriti.stores.sqlite.connection import Database, written
from smriti.stores.sqlite.schema import ENGRAM_SELECT, from_db, fts_terms, to_db

IDS = "(SELECT value FROM json_each(?))"
UPDATE_PARAMS = 30_000  # parameters per UPDATE statement (SQLite allows 32,766)


def id_list(ids: Sequence[str]) -> str:
    """An id list as the one JSON parameter of :data:`IDS`, duplicates dropped."""
    return json.dumps(list(dict.fromkeys(ids)))


class CacheListener(Protocol):
    """What the search index wants to hear about committed engram changes."""

    def added(self, engram_id: str, memory_type: str, embedding: Sequence[float] | None) -> None: ...
    def removed(self, engram_id: str) -> None: ...
    def retyped(self, engram_id: str, memory_type: str) -> None: ...


class _NoCaches:
    """The listener of a shared store, whose caches follow the change log instead (see .changes)."""

    def added(self, engram_id: str, memory_type: str, embedding: Sequence[float] | None) -> None:
        pass

    def removed(self, engram_id: str) -> None:
        pass

    def retyped(self, engram_id: str, memory_type: str) -> None:
        pass


NO_CACHES: CacheListener = _NoCaches()


class EngramTable:
    """Engram reads and writes.

    Args:
        db: the store's database.
        caches: told about each change after it commits.
        dims: the embedding dimension.
    """

    def __init__(self, db: Database, caches: CacheListener, dims: int) -> None:
        self.db, self.caches, self.dims = db, caches, dims

    @written
    def create(self, engrams: Sequence[Engram]) -> None:
        """Insert new engrams and their FTS rows (two ``executemany``: a bulk import writes
        thousands per transaction); an existing id raises StoreError and writes nothing."""
        for engram in engrams:
            check_dims(engram.embedding, self.dims, f"the embedding of engram {engram.id}")
        try:
            self.db.write_many(schema.INSERT_ENGRAM, [schema.engram_params(e) for e in engrams])
        except StoreFull:
            raise  # worded for people already; not an id problem
        except StoreError as error:
            which = engrams[0].id if len(engrams) == 1 else f"{len(engrams)} engrams"
            raise StoreError(f"cannot create engram {which!r}: {error.__cause__ or error}") from error
        ids = id_list([e.id for e in engrams])
        rowids = dict(self.db.read(f"SELECT id, rowid FROM engram WHERE id IN {IDS}", (ids,)))
        self.db.write_many(
            "INSERT INTO engram_fts (rowid, terms) VALUES (?, ?)",
            [(rowids[e.id], fts_terms(e.content, e.summary, e.facts)) for e in engrams],
        )
        added = [(e.id, e.memory_type, e.embedding) for e in engrams]

        def announce() -> None:
            for entry in added:
                self.caches.added(*entry)

        self.db.after_commit(announce)

    def get(self, ids: Sequence[str]) -> list[Engram]:
        if not ids:
            return []
        rows = self.db.read(f"SELECT {ENGRAM_SELECT} FROM engram e WHERE e.id IN {IDS}", (id_list(ids),))
        found = {row[0]: schema.engram_from_row(row) for row in rows}
        return [found[i] for i in ids if i in found]

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        if not ids:
            return {}
        rows = self.db.read(f"SELECT id, cluster_id FROM engram WHERE id IN {IDS}", (id_list(ids),))
        return {id_: int(cluster) for id_, cluster in rows}

    @written
    def update(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        """One ``executemany`` per distinct set of field names.

        Raises:
            ValueError: a field outside UPDATABLE_FIELDS, or a None value (nothing is written).
        """
        groups: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for engram_id, fields in updates.items():
            check_update(fields)
            if fields:
                names = tuple(sorted(fields))
                row = (*(coerce_field(name, fields[name], schema.to_db) for name in names), engram_id)
                groups.setdefault(names, []).append(row)
        changed = 0
        retexted: list[str] = []
        for names, rows in groups.items():
            # Column names come from UPDATABLE_FIELDS (checked above), never from the caller's text.
            # One statement per UPDATE_PARAMS values (a VALUES list joined on id), not one per
            # engram: consolidation updates under the write lock, and each statement of an
            # executemany gives the GIL away and waits up to 5 ms to get it back from a busy
            # recall thread (500 engrams held the lock ~250 ms instead of ~10 ms).
            # (VALUES columns are column1, column2, ...; no WITH: sqlite3 counts rows only for a
            # statement that starts with UPDATE)
            sets = ", ".join(f"{name} = v.column{i}" for i, name in enumerate(names, start=1))
            width = len(names) + 1
            per = max(1, UPDATE_PARAMS // width)
            row_marks = "(" + ", ".join("?" * width) + ")"
            for start in range(0, len(rows), per):
                part = rows[start : start + per]
                changed += self.db.write(
                    f"UPDATE engram SET {sets} FROM (VALUES {', '.join([row_marks] * len(part))}) AS v "
                    f"WHERE engram.id = v.column{width}",
                    [value for row in part for value in row],
                ).rowcount
            if REINDEXED_FIELDS & set(names):
                retexted += [row[-1] for row in rows]
        if retexted:
            rows = self.db.read(
                f"SELECT rowid, id, memory_type, content, summary, facts FROM engram WHERE id IN {IDS}",
                (id_list(retexted),),
            )
            self.db.write_many(
                "UPDATE engram_fts SET terms = ? WHERE rowid = ?",
                [(fts_terms(*texts), rowid) for rowid, _, _, *texts in rows],
            )
            types = [(id_, memory_type) for _, id_, memory_type, *_ in rows]

            def retype() -> None:
                for id_, memory_type in types:
                    self.caches.retyped(id_, memory_type)

            self.db.after_commit(retype)
        return changed

    @written
    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        """One UPDATE computing the new values from the stored ones (two recalls both count)."""
        if not ids:
            return {}
        rows = self.db.write(
            "UPDATE engram SET access_count = access_count + 1, last_accessed_at = ?, "
            f"decay_factor = min(1.0, decay_factor + ?) WHERE id IN {IDS} "
            "RETURNING id, access_count, decay_factor",
            (to_db(at), float(boost), id_list(ids)),
        ).fetchall()
        return {id_: (int(count), float(decay)) for id_, count, decay in rows}

    @written
    def delete(self, engram_id: str) -> bool:
        """Delete the engram, its edges (cascade), its FTS row and the RelatesTo facts it recorded."""
        found = self.db.read("SELECT rowid FROM engram WHERE id = ?", (engram_id,))
        if not found:
            return False
        rowid = found[0][0]
        self.db.write("DELETE FROM engram WHERE rowid = ?", (rowid,))
        self.db.write("DELETE FROM engram_fts WHERE rowid = ?", (rowid,))
        # A forgotten memory takes the facts it asserted with it.
        self.db.write("DELETE FROM relates_to WHERE engram_id = ?", (engram_id,))
        self.db.after_commit(lambda: self.caches.removed(engram_id))
        return True

    def recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        if limit <= 0:
            return []
        where, params = ("WHERE e.memory_type = ? ", [memory_type]) if memory_type is not None else ("", [])
        rows = self.db.read(
            f"SELECT {ENGRAM_SELECT} FROM engram e {where}"
            "ORDER BY e.last_accessed_at DESC, e.created_at DESC, e.id LIMIT ?",
            (*params, limit),
        )
        return [schema.engram_from_row(row) for row in rows]

    def states(self, ids: Sequence[str] | None = None) -> list[EngramState]:
        columns = "id, importance, access_count, created_at, last_accessed_at, decay_factor, cluster_id"
        if ids is None:
            rows = self.db.read(f"SELECT {columns} FROM engram ORDER BY id")
        else:
            rows = self.db.read(
                f"SELECT {columns} FROM engram WHERE id IN {IDS} ORDER BY id", (id_list(ids),)
            )
        return [EngramState.from_row(row, from_db) for row in rows]

    def count(self) -> int:
        return int(self.db.read("SELECT count(*) FROM engram")[0][0])

    def latest_of_source(self, source: str, limit: int) -> list[str]:
        """Ids of the ``limit`` latest engrams of ``source`` (by created_at, newest first): asked
        only when the file is shared (another worker may have stored the previous turn)."""
        rows = self.db.read(  # "<> ''" lets the planner use the partial index engram_source
            "SELECT id FROM engram WHERE source = ? AND source <> '' "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (source, int(limit)),
        )
        return [row[0] for row in rows]

    def uncued_ids(self) -> list[str]:
        """Engrams without an EncodedBy row (one index probe each)."""
        rows = self.db.read(
            "SELECT id FROM engram e WHERE NOT EXISTS (SELECT 1 FROM encoded_by x WHERE x.engram = e.rowid) "
            "ORDER BY id"
        )
        return [row[0] for row in rows]

    def embedded_ids(self) -> list[tuple[str, str]]:
        """(id, memory_type) of every engram with an embedding: enough to open a saved vector index."""
        return self.db.read("SELECT id, memory_type FROM engram WHERE embedding IS NOT NULL")

    def vectors_of(self, ids: list[str]) -> dict[str, np.ndarray]:
        """{id: float32 embedding} of those of ``ids`` that have one (a quantised HNSW graph's
        candidates, re-scored exactly: one indexed read of a few dozen BLOBs)."""
        if not ids:
            return {}
        rows = self.db.read(
            f"SELECT id, embedding FROM engram WHERE id IN {IDS} AND embedding IS NOT NULL", (id_list(ids),)
        )
        return {id_: np.frombuffer(blob, dtype="<f4") for id_, blob in rows}

    def embedded_count(self) -> int:
        return int(self.db.read("SELECT count(*) FROM engram WHERE embedding IS NOT NULL")[0][0])

    def embedding_batches(self) -> Iterator[tuple[list[str], list[str], np.ndarray]]:
        """Ids, memory types and float32 rows of every engram with an embedding, a batch at a
        time from one snapshot (each batch's matrix is its own: 2,000 rows, 12 MB at 1,536)."""
        for batch in self.db.read_batches(
            "SELECT id, memory_type, embedding FROM engram WHERE embedding IS NOT NULL"
        ):
            # One join per batch is a memcpy; a frombuffer per row cost 20 us each.
            block = b"".join(row[2] for row in batch)
            matrix = np.frombuffer(block, dtype="<f4").reshape(len(batch), self.dims)
            yield [row[0] for row in batch], [row[1] for row in batch], matrix

    def embeddings(self) -> tuple[list[str], list[str], np.ndarray]:
        """Ids, memory types and the float32 matrix of every engram with an embedding (the
        cache's load). The batches are copied into one preallocated matrix: holding the
        BLOBs as a list, joining them and copying rows made three copies of 614 MB at 100k."""
        matrix = np.empty((self.embedded_count(), self.dims), dtype=np.float32)
        ids: list[str] = []
        types: list[str] = []
        for batch_ids, batch_types, rows in self.embedding_batches():
            start = len(ids)
            if start + len(rows) > len(matrix):  # rows committed since the count
                matrix = np.concatenate([matrix, np.empty((len(rows), self.dims), dtype=np.float32)])
            matrix[start : start + len(rows)] = rows
            ids.extend(batch_ids)
            types.extend(batch_types)
        return ids, types, matrix[: len(ids)]
