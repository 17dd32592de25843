"""The embedded store: Kuzu (``DB_TYPE=kuzu``) or its fork LadybugDB (``DB_TYPE=ladybug``).

One file per user, ``STORAGE_LOCATION/{user}/memory.kuzu`` (or ``memory.lbug``), opened by
exactly one process: the database's file lock makes a second server fail fast with a
:class:`StoreError` instead of hanging. Because this process is then the only writer, the
store keeps some state in memory beside the file: the cue name -> id map, the engram count
and the search caches of :mod:`smriti.stores.search`, all updated on every write.

Search policy (measured, see smriti.stores.search): exact brute-force cosine over a cached matrix
while the store holds at most ``exact_search_limit`` embeddings (default 20,000: faster than
HNSW at that size, and exact), Kuzu's HNSW index above that once :meth:`ensure_indexes`
built it. Full-text uses Kuzu's FTS index when built, else a BM25 scan. LadybugDB offline
cannot download its extensions: one warning, then the fallbacks, never an error.

Kuzu and LadybugDB cannot both be loaded into one Python process (see
:func:`~smriti.stores.kuzu.schema.import_backend`).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from smriti.stores.base import (
    NO_CLUSTER,
    UPDATABLE_FIELDS,
    Capabilities,
    EmbeddingMismatchError,
    Engram,
    EngramState,
    StoreBase,
    StoreError,
    StoreStats,
)
from smriti.stores.kuzu import schema
from smriti.stores.kuzu.batch import BatchWriteMixin
from smriti.stores.kuzu.graph import CueGraphMixin, CueInfo
from smriti.stores.kuzu.rows import EngramRows
from smriti.stores.kuzu.schema import (
    BACKENDS,
    ENGRAM_RETURN,
    from_db,
    import_backend,
    locked,
    store_path,
    to_db,
)
from smriti.stores.kuzu.search import EXTENSIONS, IndexedSearchMixin
from smriti.stores.search import KeywordIndex, VectorCache, text_of

if TYPE_CHECKING:
    from datetime import datetime

    from smriti.config import Settings

logger = logging.getLogger(__name__)

DEFAULT_EXACT_SEARCH_LIMIT = 20_000
# Kuzu's defaults (80% of RAM for the buffer pool, 8 TiB of address space per database)
# allow only ~15 open databases per process and slow every open; a memory store needs far less.
DEFAULT_BUFFER_POOL_SIZE = 512 * 1024**2
DEFAULT_MAX_DB_SIZE = 1 << 37  # 128 GiB, a power of two as Kuzu requires
FRESH_ENGRAMS = 256  # recently created engrams whose edges are tracked (see _fresh)


def open_kuzu(settings: Settings, user: str, **options: Any) -> KuzuStore:
    """Open ``user``'s Kuzu store; ``options`` go to :class:`KuzuStore`."""
    return _open(settings, user, "kuzu", options)


def open_ladybug(settings: Settings, user: str, **options: Any) -> KuzuStore:
    """Open ``user``'s LadybugDB store; ``options`` go to :class:`KuzuStore`."""
    return _open(settings, user, "ladybug", options)


def _open(settings: Settings, user: str, backend: str, options: dict[str, Any]) -> KuzuStore:
    path = store_path(settings.storage_location, user, BACKENDS[backend][1])
    module = import_backend(backend)
    return KuzuStore(path, user=user, dims=settings.embedding_dims, module=module, backend=backend, **options)


class KuzuStore(CueGraphMixin, BatchWriteMixin, IndexedSearchMixin, StoreBase):
    """A :class:`~smriti.stores.base.GraphStore` on an embedded Kuzu or LadybugDB file.

    Args:
        path: the database file (use :func:`store_path`; the factories do).
        user: whose memory this is (for messages; isolation is the file).
        dims: embedding dimension (EMBEDDING_DIMS); a file written with another is refused.
        module: the ``kuzu`` or ``ladybug`` module.
        backend: ``"kuzu"`` or ``"ladybug"``.
        use_extensions: False never loads the vector/FTS extensions (forces the fallbacks).
        exact_search_limit: brute force while at most this many embeddings are stored.
        buffer_pool_size, max_db_size: passed to the database.

    Raises:
        StoreError: locked by another process, or unreadable.
        EmbeddingMismatchError: the file holds embeddings of another dimension.
    """

    def __init__(
        self,
        path: Path,
        *,
        user: str,
        dims: int,
        module: ModuleType,
        backend: str = "kuzu",
        use_extensions: bool = True,
        exact_search_limit: int = DEFAULT_EXACT_SEARCH_LIMIT,
        buffer_pool_size: int = DEFAULT_BUFFER_POOL_SIZE,
        max_db_size: int = DEFAULT_MAX_DB_SIZE,
    ) -> None:
        self.backend, self.user, self.path, self.dims = backend, user, Path(path), dims
        self.capabilities = Capabilities(vector_index=False, fulltext=False)
        self._module = module
        self._use_extensions = use_extensions
        self._exact_limit = exact_search_limit
        self._lock = threading.RLock()
        self._closed = True
        self._prepared: dict[str, Any] = {}
        self._projected: set[str] = set()
        self._extensions: dict[str, bool] = dict.fromkeys(EXTENSIONS, False)
        self._install_tried = False
        self._vector_index = self._fulltext_index = False
        self._vectors = VectorCache(dims)
        self._keywords = KeywordIndex()
        self._engram_rows = EngramRows()  # loaded with _vectors (see _load_exact_caches)
        self._cues: dict[str, CueInfo] | None = None
        self._cue_links: Counter[str] | None = None  # cue id -> engrams it encodes
        self._count: int | None = None
        # Engrams created by this process -> the edges made for them since ("cue", id) or
        # (rel, other id): lets link_cue/associate skip an existence query on the store path.
        self._fresh: OrderedDict[str, set[tuple[str, str]]] = OrderedDict()
        try:
            self._db = module.Database(
                str(self.path), buffer_pool_size=buffer_pool_size, max_db_size=max_db_size
            )
        except RuntimeError as error:
            if "lock" in str(error).lower():
                raise StoreError(
                    f"{self.path.name} is locked by another process (is another smriti server running "
                    f"for user {user!r}?): {self.path}"
                ) from error
            raise StoreError(f"cannot open {self.path}: {error}") from error
        self._conn = module.Connection(self._db)
        self._closed = False
        try:
            for change in schema.migrate(self._run, dims, self.path):
                logger.info("%s: migration: %s", self.path, change)
            self._prepared.clear()  # plans made before DDL can point at dropped catalog entries
            if use_extensions:
                self._load_extensions(install=False)
            self._read_indexes()
        except BaseException:
            self.close()
            raise

    # -- plumbing ----------------------------------------------------------------------------
    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Execute one parameterised query and fetch all rows (prepared once per query text)."""
        with self._lock:
            if self._closed:
                raise StoreError(f"the {self.backend} store of {self.user!r} is closed")
            try:
                if not params:
                    return self._conn.execute(query).get_all()
                statement = self._prepared.get(query)
                if statement is None:
                    statement = self._module.PreparedStatement(self._conn, query)
                    if not statement.is_success():
                        raise RuntimeError(statement.get_error_message())
                    self._prepared[query] = statement
                return self._conn.execute(statement, params).get_all()
            except RuntimeError as error:
                raise StoreError(f"{self.backend} query failed: {error}") from error

    def _ddl(self, query: str) -> None:
        self._run(query)
        self._prepared.clear()

    def _rows_by_ids(self, single: str, many: str, ids: Sequence[str], per_id_up_to: int) -> list[list[Any]]:
        """Rows for the given ids: a primary-key query per id for short lists, one IN scan else.

        Kuzu plans ``UNWIND $ids ... {id: x}`` as a hash join over the whole table, while an
        equality on a parameter is an index lookup: at 10k engrams ~0.4-1 ms per lookup
        against ~4-5 ms for one ``IN`` scan. ``single`` takes ``$id``, ``many`` takes ``$ids``.
        """
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        if len(unique) > per_id_up_to:
            return self._run(many, {"ids": unique})
        rows: list[list[Any]] = []
        for id_ in unique:
            rows.extend(self._run(single, {"id": id_}))
        return rows

    def _check_dims(self, embedding: Sequence[float] | None, what: str) -> None:
        if embedding is not None and len(embedding) != self.dims:
            raise EmbeddingMismatchError(
                f"{what} has {len(embedding)} dimensions but this store holds {self.dims} (EMBEDDING_DIMS)"
            )

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the file (and its lock); calling it again does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._prepared.clear()
            self._vectors.invalidate()
            self._engram_rows.invalidate()
            self._keywords.invalidate()
            try:
                self._conn.close()
            finally:
                self._db.close()

    def __enter__(self) -> KuzuStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- meta ----------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self._run("MATCH (m:Meta {key: $key}) RETURN m.value", {"key": key})
        return rows[0][0] if rows else None

    @locked
    def set_meta(self, key: str, value: str) -> None:
        """Set a metadata value; ``embedding_dims`` can only be set to this store's dimension.

        Raises:
            EmbeddingMismatchError: an import from a store with other embeddings.
        """
        if key == "embedding_dims" and str(value) != str(self.dims):
            raise EmbeddingMismatchError(schema.mismatch_message(self.path, self.dims, int(value)))
        self._run("MERGE (m:Meta {key: $key}) SET m.value = $value", {"key": key, "value": str(value)})

    # -- engrams ---------------------------------------------------------------------------------
    @locked
    def create_engram(self, engram: Engram) -> None:
        """Insert a new engram; an existing id raises StoreError."""
        self._check_dims(engram.embedding, f"the embedding of engram {engram.id}")
        params = schema.engram_params(engram)
        self._run(schema.CREATE_ENGRAM, params)
        if self._count is not None:
            self._count += 1
        self._fresh[engram.id] = set()
        if len(self._fresh) > FRESH_ENGRAMS:
            self._fresh.popitem(last=False)
        if engram.embedding is not None:
            self._vectors.add(engram.id, engram.memory_type, engram.embedding)
        self._engram_rows.put(schema.engram_from_row([params[name] for name in schema.ENGRAM_COLUMNS]))
        self._keywords.add(engram.id, engram.memory_type, text_of(engram.content, engram.summary))

    def get_engrams(self, ids: Sequence[str]) -> list[Engram]:
        with self._lock:
            if self._engram_rows.loaded:
                cached = (self._engram_rows.get(i, self._vectors.vector(i)) for i in ids)
                return [engram for engram in cached if engram is not None]
        rows = self._rows_by_ids(
            f"MATCH (e:Engram {{id: $id}}) RETURN {ENGRAM_RETURN}",
            f"MATCH (e:Engram) WHERE e.id IN $ids RETURN {ENGRAM_RETURN}",
            ids,
            per_id_up_to=12,
        )
        found = {row[0]: schema.engram_from_row(row) for row in rows}
        return [found[i] for i in ids if i in found]

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        with self._lock:
            if self._engram_rows.loaded:
                cached = (self._engram_rows.get(i, None) for i in dict.fromkeys(ids))
                return {e.id: e.cluster_id for e in cached if e is not None}
        rows = self._rows_by_ids(
            "MATCH (e:Engram {id: $id}) RETURN e.id, e.cluster_id",
            "MATCH (e:Engram) WHERE e.id IN $ids RETURN e.id, e.cluster_id",
            ids,
            per_id_up_to=3,
        )
        return {id_: NO_CLUSTER if cluster is None else int(cluster) for id_, cluster in rows}

    @locked
    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        """One UNWIND query per distinct set of field names (a few rows: one lookup each).

        Raises:
            ValueError: a field outside UPDATABLE_FIELDS (the embedding never changes in place:
                Kuzu cannot SET an indexed vector), or a None value.
        """
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for engram_id, fields in updates.items():
            unknown = set(fields) - UPDATABLE_FIELDS
            if unknown:
                allowed = ", ".join(sorted(UPDATABLE_FIELDS))
                raise ValueError(f"cannot update {', '.join(sorted(unknown))}; allowed: {allowed}")
            if any(value is None for value in fields.values()):
                raise ValueError(f"None is not a value for engram fields: {dict(fields)}")
            if fields:
                row = {"id": engram_id} | {name: schema.coerce_field(name, v) for name, v in fields.items()}
                groups.setdefault(tuple(sorted(fields)), []).append(row)
        changed = 0
        for names, rows in groups.items():
            # Field names come from UPDATABLE_FIELDS (checked above), never from the caller's text.
            retext = bool({"content", "summary", "memory_type"} & set(names))
            returned = "e.id, e.memory_type, e.content, e.summary" if retext else "e.id"
            if len(rows) <= 4:  # primary-key lookups; UNWIND ... {id: row.id} scans the table
                sets = ", ".join(f"e.{name} = ${name}" for name in names)
                result = []
                for row in rows:
                    result += self._run(f"MATCH (e:Engram {{id: $id}}) SET {sets} RETURN {returned}", row)
            else:
                sets = ", ".join(f"e.{name} = row.{name}" for name in names)
                result = self._run(
                    f"UNWIND $rows AS row MATCH (e:Engram {{id: row.id}}) SET {sets} RETURN {returned}",
                    {"rows": rows},
                )
            changed += len(result)
            by_id = {row["id"]: row for row in rows}
            for engram_id, *_ in result:
                stored = {name: schema.read_back(name, by_id[engram_id][name]) for name in names}
                self._engram_rows.update(engram_id, stored)
            if retext:
                for engram_id, memory_type, content, summary in result:
                    self._vectors.retype(engram_id, memory_type)
                    self._keywords.add(engram_id, memory_type, text_of(content, summary))
        return changed

    @locked  # the row cache must take these values before another write can land
    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        # One IN scan (~2 ms at 10k engrams) beats per-id updates: each of those is its own
        # write (~0.3 ms) and the batch still has to commit.
        if not ids:
            return {}
        rows = self._run(
            "MATCH (e:Engram) WHERE e.id IN $ids "
            "SET e.access_count = e.access_count + 1, e.last_accessed_at = $at, "
            "e.decay_factor = CASE WHEN e.decay_factor + $boost > 1.0 THEN 1.0 "
            "ELSE e.decay_factor + $boost END "
            "RETURN e.id, e.access_count, e.decay_factor",
            {"ids": list(dict.fromkeys(ids)), "at": to_db(at), "boost": float(boost)},
        )
        accessed = from_db(to_db(at))
        for id_, count, decay in rows:
            self._engram_rows.update(
                id_, {"access_count": count, "decay_factor": decay, "last_accessed_at": accessed}
            )
        return {id_: (int(count), float(decay)) for id_, count, decay in rows}

    @locked
    def delete_engram(self, engram_id: str) -> bool:
        """Delete the engram, its edges and the RelatesTo facts it recorded."""
        rows = self._run("MATCH (e:Engram {id: $id}) DETACH DELETE e RETURN count(e)", {"id": engram_id})
        if not rows[0][0]:
            return False
        # A forgotten memory takes the facts it asserted with it.
        self._run("MATCH (:Cue)-[r:RelatesTo]->(:Cue) WHERE r.engram_id = $id DELETE r", {"id": engram_id})
        self._fresh.clear()  # other fresh engrams may remember an edge to this one
        self._cue_links = None  # its cues lost a link; recounted when next asked
        if self._count is not None:
            self._count -= 1
        self._vectors.remove(engram_id)
        self._engram_rows.remove(engram_id)
        self._keywords.remove(engram_id)
        return True

    def list_recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        if limit <= 0:
            return []
        where = "WHERE e.memory_type = $memory_type " if memory_type is not None else ""
        params: dict[str, Any] = {"limit": limit} | ({"memory_type": memory_type} if memory_type else {})
        rows = self._run(
            f"MATCH (e:Engram) {where}RETURN {ENGRAM_RETURN} "
            "ORDER BY e.last_accessed_at DESC, e.created_at DESC, e.id LIMIT $limit",
            params,
        )
        return [schema.engram_from_row(row) for row in rows]

    def engram_states(self) -> list[EngramState]:
        rows = self._run(
            "MATCH (e:Engram) RETURN e.id, e.importance, e.access_count, e.created_at, "
            "e.last_accessed_at, e.decay_factor, e.cluster_id ORDER BY e.id"
        )
        states = []
        for id_, importance, access_count, created, accessed, decay, cluster in rows:
            created_at = from_db(created)
            states.append(
                EngramState(
                    id_,
                    float(importance),
                    int(access_count),
                    created_at,
                    from_db(accessed, created_at),
                    float(decay),
                    int(cluster),
                )
            )
        return states

    @locked
    def count_engrams(self) -> int:
        if self._count is None:
            self._count = int(self._run("MATCH (e:Engram) RETURN count(e)")[0][0])
        return self._count

    @locked
    def stats(self) -> StoreStats:
        def count(query: str) -> int:
            return int(self._run(query)[0][0])

        return StoreStats(
            engrams=self.count_engrams(),
            cues=count("MATCH (c:Cue) RETURN count(c)"),
            associations=count("MATCH ()-[r:AssociatedWith]->() RETURN count(r)"),
            cue_links=count("MATCH ()-[r:EncodedBy]->() RETURN count(r)"),
            clusters=count("MATCH (e:Engram) WHERE e.cluster_id >= 0 RETURN count(DISTINCT e.cluster_id)"),
            vector_index=self._vector_index,
            fulltext_index=self._fulltext_index,
            backend=self.backend,
            location=str(self.path),
            extra={
                "co_occurrences": count("MATCH ()-[r:CoOccurs]->() RETURN count(r)"),
                "relations": count("MATCH ()-[r:RelatesTo]->() RETURN count(r)"),
                "embedding_dims": self.dims,
                "schema_version": schema.SCHEMA_VERSION,
                "extensions": dict(self._extensions),
                "exact_search_limit": self._exact_limit,
            },
        )

    # -- portability -------------------------------------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every node and edge in stores.records.KINDS order, deterministic (sorted) within a kind."""
        yield from schema.export_rows(self._run)
