"""The Engram table of the embedded store: :class:`EngramTable`.

Reads answer from the row cache (:mod:`smriti.stores.kuzu.rows`) while it is loaded, and every
write keeps it in step; the search caches are the store's to update (it owns both).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from smriti.stores.base import NO_CLUSTER, Engram, EngramState, check_dims, check_update, coerce_field
from smriti.stores.kuzu import copy, schema
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.rows import EngramRows
from smriti.stores.kuzu.schema import ENGRAM_RETURN, from_db, to_db
from smriti.stores.search import REINDEXED_FIELDS, text_of

# (id, memory_type, searchable text: stores.search.text_of) of an engram whose text or type changed
Retexted = tuple[str, str, str]


class EngramTable:
    """Engram reads and writes, with the row cache and the engram count kept in step.

    Args:
        db: the store's connection.
        rows: the Engram row cache (loaded by the search index beside its vector cache).
        embedding_of: the cached embedding of an engram (None when not cached).
        dims: the embedding dimension.
    """

    def __init__(
        self, db: Connection, rows: EngramRows, embedding_of: Callable[[str], list[float] | None], dims: int
    ) -> None:
        self.db, self.rows, self.dims = db, rows, dims
        self._embedding_of = embedding_of
        self._count: int | None = None

    @locked
    def create(self, engram: Engram) -> None:
        """Insert a new engram; an existing id raises StoreError."""
        check_dims(engram.embedding, self.dims, f"the embedding of engram {engram.id}")
        params = schema.engram_params(engram)
        self.db.run(schema.CREATE_ENGRAM, params)
        if self._count is not None:
            self._count += 1
        self.rows.put(schema.engram_from_row([params[name] for name in schema.ENGRAM_COLUMNS]))

    @locked
    def create_many(self, engrams: Sequence[Engram], bulk: bool) -> None:
        """Insert new engrams; ``bulk``: one ``COPY`` from an Arrow table (see stores/kuzu/copy.py)
        when pyarrow is installed and the batch is large enough. An existing id raises StoreError
        and, in the COPY, writes none of the batch."""
        if not bulk or len(engrams) < copy.COPY_MIN or copy.arrow() is None:
            for engram in engrams:
                self.create(engram)
            return
        for engram in engrams:
            check_dims(engram.embedding, self.dims, f"the embedding of engram {engram.id}")
        params = [schema.engram_params(engram) for engram in engrams]
        columns = copy.table_columns(self.db.run, "Engram")
        self.db.run("COPY Engram FROM $rows", {"rows": copy.table_of(columns, params)})
        if self._count is not None:
            self._count += len(engrams)
        for row in params:
            self.rows.put(schema.engram_from_row([row[name] for name in schema.ENGRAM_COLUMNS]))

    def get(self, ids: Sequence[str]) -> list[Engram]:
        with self.db.lock:
            if self.rows.loaded:
                cached = (self.rows.get(i, self._embedding_of(i)) for i in ids)
                return [engram for engram in cached if engram is not None]
        rows = self.db.rows_by_ids(
            f"MATCH (e:Engram {{id: $id}}) RETURN {ENGRAM_RETURN}",
            f"MATCH (e:Engram) WHERE e.id IN $ids RETURN {ENGRAM_RETURN}",
            ids,
            per_id_up_to=12,
        )
        found = {row[0]: schema.engram_from_row(row) for row in rows}
        return [found[i] for i in ids if i in found]

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        with self.db.lock:
            if self.rows.loaded:
                cached = (self.rows.get(i, None) for i in dict.fromkeys(ids))
                return {e.id: e.cluster_id for e in cached if e is not None}
        rows = self.db.rows_by_ids(
            "MATCH (e:Engram {id: $id}) RETURN e.id, e.cluster_id",
            "MATCH (e:Engram) WHERE e.id IN $ids RETURN e.id, e.cluster_id",
            ids,
            per_id_up_to=3,
        )
        return {id_: NO_CLUSTER if cluster is None else int(cluster) for id_, cluster in rows}

    @locked
    def update(self, updates: Mapping[str, Mapping[str, Any]]) -> tuple[int, list[Retexted]]:
        """One UNWIND query per distinct set of field names (a few rows: one lookup each).

        Raises:
            ValueError: a field outside UPDATABLE_FIELDS (the embedding never changes in place:
                Kuzu cannot SET an indexed vector), or a None value.
        """
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for engram_id, fields in updates.items():
            check_update(fields)
            if fields:
                # One list of structs per query, and Kuzu wants every struct in it to have the
                # same field types: each value in its field's type.
                row = {"id": engram_id} | {
                    name: coerce_field(name, v, schema.to_db) for name, v in fields.items()
                }
                groups.setdefault(tuple(sorted(fields)), []).append(row)
        changed = 0
        retexted: list[Retexted] = []
        for names, rows in groups.items():
            # Field names come from UPDATABLE_FIELDS (checked above), never from the caller's text.
            retext = bool(REINDEXED_FIELDS & set(names))
            returned = "e.id, e.memory_type, e.content, e.summary, e.facts" if retext else "e.id"
            if len(rows) <= 4:  # primary-key lookups; UNWIND ... {id: row.id} scans the table
                sets = ", ".join(f"e.{name} = ${name}" for name in names)
                result = []
                for row in rows:
                    result += self.db.run(f"MATCH (e:Engram {{id: $id}}) SET {sets} RETURN {returned}", row)
            else:
                sets = ", ".join(f"e.{name} = row.{name}" for name in names)
                result = self.db.run(
                    f"UNWIND $rows AS row MATCH (e:Engram {{id: row.id}}) SET {sets} RETURN {returned}",
                    {"rows": rows},
                )
            changed += len(result)
            by_id = {row["id"]: row for row in rows}
            for engram_id, *_ in result:
                stored = {name: schema.read_back(name, by_id[engram_id][name]) for name in names}
                self.rows.update(engram_id, stored)
            if retext:
                retexted += [(engram_id, mt, text_of(*texts)) for engram_id, mt, *texts in result]
        return changed, retexted

    @locked  # the row cache must take these values before another write can land
    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        # One IN scan (~2 ms at 10k engrams) beats per-id updates: each of those is its own
        # write (~0.3 ms) and the batch still has to commit.
        if not ids:
            return {}
        rows = self.db.run(
            "MATCH (e:Engram) WHERE e.id IN $ids "
            "SET e.access_count = e.access_count + 1, e.last_accessed_at = $at, "
            "e.decay_factor = CASE WHEN e.decay_factor + $boost > 1.0 THEN 1.0 "
            "ELSE e.decay_factor + $boost END "
            "RETURN e.id, e.access_count, e.decay_factor",
            {"ids": list(dict.fromkeys(ids)), "at": to_db(at), "boost": float(boost)},
        )
        accessed = from_db(to_db(at))
        for id_, count, decay in rows:
            self.rows.update(
                id_, {"access_count": count, "decay_factor": decay, "last_accessed_at": accessed}
            )
        return {id_: (int(count), float(decay)) for id_, count, decay in rows}

    @locked
    def delete(self, engram_id: str) -> bool:
        """Delete the engram, its edges and the RelatesTo facts it recorded."""
        rows = self.db.run("MATCH (e:Engram {id: $id}) DETACH DELETE e RETURN count(e)", {"id": engram_id})
        if not rows[0][0]:
            return False
        # A forgotten memory takes the facts it asserted with it.
        self.db.run("MATCH (:Cue)-[r:RelatesTo]->(:Cue) WHERE r.engram_id = $id DELETE r", {"id": engram_id})
        if self._count is not None:
            self._count -= 1
        self.rows.remove(engram_id)
        return True

    def recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        if limit <= 0:
            return []
        where = "WHERE e.memory_type = $memory_type " if memory_type is not None else ""
        params: dict[str, Any] = {"limit": limit} | ({"memory_type": memory_type} if memory_type else {})
        rows = self.db.run(
            f"MATCH (e:Engram) {where}RETURN {ENGRAM_RETURN} "
            "ORDER BY e.last_accessed_at DESC, e.created_at DESC, e.id LIMIT $limit",
            params,
        )
        return [schema.engram_from_row(row) for row in rows]

    def states(self) -> list[EngramState]:
        rows = self.db.run(
            "MATCH (e:Engram) RETURN e.id, e.importance, e.access_count, e.created_at, "
            "e.last_accessed_at, e.decay_factor, e.cluster_id ORDER BY e.id"
        )
        return [EngramState.from_row(row, from_db) for row in rows]

    @locked
    def count(self) -> int:
        if self._count is None:
            self._count = int(self.db.run("MATCH (e:Engram) RETURN count(e)")[0][0])
        return self._count
