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

The store is composed of collaborators built from explicit arguments. A protocol method one
of them carries out alone is handed to it (``handed``, ``stores/operations.py``); the class's
methods are those that coordinate them (e.g. a new engram goes to the table, the search caches
and the fresh-edge memo):

* :class:`~smriti.stores.kuzu.connection.Connection`: the file, queries, transactions, the lock;
* :class:`~smriti.stores.kuzu.engrams.EngramTable` over the row cache
  (:class:`~smriti.stores.kuzu.rows.EngramRows`);
* :class:`~smriti.stores.kuzu.search.SearchIndex`: extensions, indexes, the search caches;
* :class:`~smriti.stores.kuzu.graph.CueMap`, :class:`~smriti.stores.kuzu.graph.FreshEdges`,
  :class:`~smriti.stores.kuzu.graph.GraphReads`, :class:`~smriti.stores.kuzu.batch.GraphWrites`;
* :mod:`~smriti.stores.kuzu.schema` (DDL, migrations), :mod:`~smriti.stores.kuzu.files` (the
  read-only look and the copy before a migration) and :mod:`~smriti.stores.kuzu.export`.

Kuzu and LadybugDB cannot both be loaded into one Python process (see
:func:`~smriti.stores.kuzu.schema.import_backend`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from smriti.stores.base import (
    Capabilities,
    EmbeddingMismatchError,
    Engram,
    EngramState,
    StoreBase,
    StoreStats,
    mismatch_message,
)
from smriti.stores.kuzu import files, schema
from smriti.stores.kuzu.batch import GraphWrites
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.cue_fields import CueFields
from smriti.stores.kuzu.engrams import EngramTable
from smriti.stores.kuzu.export import export_rows
from smriti.stores.kuzu.graph import CueMap, FreshEdges, GraphReads
from smriti.stores.kuzu.rows import EngramRows
from smriti.stores.kuzu.schema import BACKENDS, import_backend
from smriti.stores.kuzu.search import SearchIndex
from smriti.stores.leases import file_lease
from smriti.stores.operations import handed
from smriti.stores.paths import store_path

if TYPE_CHECKING:
    from smriti.config import Settings

logger = logging.getLogger(__name__)

DEFAULT_EXACT_SEARCH_LIMIT = 20_000
# Kuzu's defaults (80% of RAM for the buffer pool, 8 TiB of address space per database)
# allow only ~15 open databases per process and slow every open; a memory store needs far less.
DEFAULT_BUFFER_POOL_SIZE = 512 * 1024**2
DEFAULT_MAX_DB_SIZE = 1 << 37  # 128 GiB, a power of two as Kuzu requires


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


class KuzuStore(StoreBase):
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

    # The collaborators, made in __init__ (declared here: handed() checks the names).
    db: Connection
    index: SearchIndex
    engrams: EngramTable
    reads: GraphReads
    writes: GraphWrites
    cue_fields: CueFields

    # Protocol methods one collaborator carries out alone, by part (stores/parts.py): the
    # collaborator's own method, bound to it when read (no forwarding call; see stores/operations.py).
    # EngramPart
    get_engrams = handed("engrams", EngramTable.get)
    reinforce = handed("engrams", EngramTable.reinforce)
    list_recent = handed("engrams", EngramTable.recent)
    count_engrams = handed("engrams", EngramTable.count)
    # CuePart
    cues_of = handed("reads", GraphReads.cues_of)
    engrams_by_cues = handed("reads", GraphReads.engrams_by_cues)
    cue_engram_counts = handed("reads", GraphReads.cue_engram_counts)
    set_cue_types = handed("cue_fields", CueFields.set_cue_types)
    relations_of = handed("reads", GraphReads.relations_of)
    related_entities = handed("reads", GraphReads.related_entities)
    delete_orphan_cues = handed("reads", GraphReads.delete_orphan_cues)
    upsert_cues = handed("writes", GraphWrites.upsert_cues)
    link_cue_ids = handed("writes", GraphWrites.link_cue_ids)
    link_many = handed("writes", GraphWrites.link_many)
    add_cooccurrences = handed("writes", GraphWrites.add_cooccurrences)
    weaken_cooccurrences = handed("writes", GraphWrites.weaken_cooccurrences)
    add_relations = handed("writes", GraphWrites.add_relations)
    # AssociationPart
    neighbours = handed("reads", GraphReads.neighbours)
    all_associations = handed("reads", GraphReads.all_associations)
    associate_many = handed("writes", GraphWrites.associate_many)
    # ClusterPart
    cluster_ids = handed("engrams", EngramTable.cluster_ids)
    # SearchPart
    vector_search = handed("index", SearchIndex.vector_search)
    fulltext_search = handed("index", SearchIndex.fulltext_search)
    ensure_indexes = handed("index", SearchIndex.ensure_indexes)

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

        self.backup_path = self._back_up_before_migrating(module)
        self.db = Connection(
            self.path,
            module=module,
            backend=backend,
            user=user,
            buffer_pool_size=buffer_pool_size,
            max_db_size=max_db_size,
        )
        self.rows = EngramRows()  # loaded with the vector cache (see SearchIndex)
        self.index = SearchIndex(
            self.db,
            self.rows,
            lambda: self.engrams.count(),  # the table is built next, with the index's vectors
            path=self.path,
            backend=backend,
            dims=dims,
            use_extensions=use_extensions,
            exact_limit=exact_search_limit,
        )
        self.engrams = EngramTable(self.db, self.rows, self.index.vector, dims)
        self.cues = CueMap(self.db)
        self.fresh = FreshEdges()
        self.reads = GraphReads(self.db, self.cues, self.fresh)
        self.writes = GraphWrites(self.db, self.cues, self.fresh, dims)
        self.cue_fields = CueFields(self.db, self.cues)
        try:
            for change in schema.migrate(self.db.run, dims, self.path):
                logger.info("%s: migration: %s", self.path, change)
            self.db.forget_plans()  # plans made before DDL can point at dropped catalog entries
            self.index.open()
        except BaseException:
            self.close()
            raise

    def _back_up_before_migrating(self, module: ModuleType) -> Path | None:
        """Copy the file aside before the migrations change it (a Go server's ``memory.lbug``, an
        older Smriti's file), so the original can be had back as it was; returns the copy's path
        (None: nothing to change, or no file yet).

        Read from a read-only open before the store opens the file: closing a read-write open
        rewrites the file (Kuzu checkpoints), so only a copy made first is the original. A file
        of another dimension is refused here, uncopied. Only runs that keep the memory get this
        far: the refusals the record tells (another embedding model, no model and only an
        offline guess) come before the store opens
        (:func:`smriti.providers.models.check_recorded_embedding`).
        """
        if not self.path.exists():
            return None
        try:
            with files.read_only(self.path, module) as run:
                schema.check_dimensions(run, self.dims, self.path)
                changes = files.pending_changes(run, self.dims)
        except RuntimeError as error:  # locked by a running server: the open says so properly
            logger.debug("%s: not read before opening: %s", self.path, error)
            return None
        if not changes:
            return None
        copy = files.back_up(self.path)
        logger.warning(
            "%s: copied to %s before migrating it (%s)", self.path, copy.name, ", ".join(changes[:6])
        )
        return copy

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        return self.index.capabilities

    # -- lifecycle -----------------------------------------------------------------------------
    def close(self) -> None:
        """Release the file (and its lock); calling it again does nothing."""
        with self.db.lock:
            if self.db.closed:
                return
            self.index.invalidate()
            self.rows.invalidate()
            self.db.close()

    def __enter__(self) -> KuzuStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- meta ----------------------------------------------------------------------------------
    def exclusive(self, name: str, wait: float) -> AbstractContextManager[None]:
        """A lock file beside the database, ``<file>.<name>.lock`` (:func:`.leases.file_lease`)."""
        return file_lease(self.path.with_name(f"{self.path.name}.{name}.lock"), name, wait)

    def get_meta(self, key: str) -> str | None:
        return schema.get_meta(self.db.run, key)

    @locked
    def meta_items(self, prefix: str) -> dict[str, str]:
        rows = self.db.run(
            "MATCH (m:Meta) WHERE starts_with(m.key, $prefix) RETURN m.key, m.value ORDER BY m.key",
            {"prefix": prefix},
        )
        return {key: value for key, value in rows}

    def delete_meta(self, key: str) -> None:
        self.db.run("MATCH (m:Meta {key: $key}) DELETE m", {"key": key})

    def set_meta(self, key: str, value: str) -> None:
        """Set a metadata value; ``embedding_dims`` can only be set to this store's dimension.

        Raises:
            EmbeddingMismatchError: an import from a store with other embeddings.
        """
        if key == "embedding_dims" and str(value) != str(self.dims):
            raise EmbeddingMismatchError(mismatch_message(self.path, self.dims, int(value)))
        schema.set_meta(self.db.run, key, value)

    # -- engrams ---------------------------------------------------------------------------------
    @locked
    def create_engram(self, engram: Engram) -> None:
        """Insert a new engram; an existing id raises StoreError."""
        self.engrams.create(engram)
        self.fresh.start(engram.id)
        self.index.added(engram)

    @locked
    def create_engrams(self, engrams: Sequence[Engram]) -> None:
        # COPY only into a table without a vector index (a fresh import): whether Kuzu keeps
        # its HNSW index through a COPY was not established here.
        self.engrams.create_many(engrams, bulk=not self.index.vector_index)
        for engram in engrams:
            self.fresh.start(engram.id)
            self.index.added(engram)

    @locked
    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        """See :meth:`EngramTable.update`; the search caches follow changed texts and types."""
        changed, retexted = self.engrams.update(updates)
        for engram_id, memory_type, text in retexted:
            self.index.retexted(engram_id, memory_type, text)
        return changed

    @locked
    def remove_engram(self, engram_id: str) -> bool:
        """Delete the engram, its edges and the RelatesTo facts it recorded."""
        if not self.engrams.delete(engram_id):
            return False
        self.fresh.clear()  # other fresh engrams may remember an edge to this one
        self.cues.forget_links()  # its cues lost a link; recounted when next asked
        self.index.removed(engram_id)
        return True

    def unlink_engram(self, engram_id: str) -> None:
        """Its EncodedBy edges and the RelatesTo facts it recorded; the engram stays."""
        self.db.run("MATCH (e:Engram {id: $id})-[r:EncodedBy]->(:Cue) DELETE r", {"id": engram_id})
        self.db.run("MATCH (:Cue)-[r:RelatesTo]->(:Cue) WHERE r.engram_id = $id DELETE r", {"id": engram_id})
        self.fresh.clear()  # the memo would say these edges still exist
        self.cues.forget_links()  # its cues lost a link; recounted when next asked

    def superseded_ids(self, engram_id: str) -> list[str]:
        rows = self.db.run(
            "MATCH (e:Engram) WHERE e.superseded_by = $id RETURN e.id ORDER BY e.id", {"id": engram_id}
        )
        return [row[0] for row in rows]

    def engram_states(self, ids: Sequence[str] | None = None) -> list[EngramState]:
        states = self.engrams.states()
        if ids is None:
            return states
        wanted = set(ids)
        return [state for state in states if state.id in wanted]

    def uncued_engram_ids(self) -> list[str]:
        rows = self.db.run(
            "MATCH (e:Engram) WHERE NOT EXISTS { MATCH (e)-[:EncodedBy]->(:Cue) } RETURN e.id ORDER BY e.id"
        )
        return [row[0] for row in rows]

    # -- search and maintenance -----------------------------------------------------------------
    @locked
    def stats(self) -> StoreStats:
        def count(query: str) -> int:
            return int(self.db.run(query)[0][0])

        return StoreStats(
            engrams=self.count_engrams(),
            cues=count("MATCH (c:Cue) RETURN count(c)"),
            associations=count("MATCH ()-[r:AssociatedWith]->() RETURN count(r)"),
            cue_links=count("MATCH ()-[r:EncodedBy]->() RETURN count(r)"),
            clusters=count("MATCH (e:Engram) WHERE e.cluster_id >= 0 RETURN count(DISTINCT e.cluster_id)"),
            vector_index=self.index.vector_index,
            fulltext_index=self.index.fulltext_index,
            backend=self.backend,
            location=str(self.path),
            extra={
                "co_occurrences": count("MATCH ()-[r:CoOccurs]->() RETURN count(r)"),
                "relations": count("MATCH ()-[r:RelatesTo]->() RETURN count(r)"),
                "embedding_dims": self.dims,
                "schema_version": schema.SCHEMA_VERSION,
                "extensions": self.index.extensions,
                "exact_search_limit": self.index.exact_limit,
            },
        )

    # -- portability -------------------------------------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every node and edge in stores.records.KINDS order, deterministic (sorted) within a kind."""
        yield from export_rows(self.db.run)
