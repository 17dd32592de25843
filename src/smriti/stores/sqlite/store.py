"""The embedded default store: SQLite (``DB_TYPE=sqlite``), ``STORAGE_LOCATION/{user}/memory.sqlite``.

Why SQLite: the standard library ships it (no native wheel to trust, no archived engine);
a query costs microseconds rather than Kuzu's 0.2-0.35 ms; B-tree indexes make every
"edges of X" an index range; a transaction makes a store atomic (a failed or killed store
leaves the whole memory or none); the FTS5 keyword index is persistent and incremental.

:class:`SqliteStore` implements the protocol with collaborators built from explicit
arguments; a protocol method one of them carries out alone is handed to it (``handed``,
``stores/operations.py``), and the class body's methods are those that combine them:

* :class:`~.connection.Database`: the file, the writer and reader connections, transactions;
* :class:`~.engrams.EngramTable`: engram rows and their FTS rows;
* :class:`~.graph.Graph`: cues and edges;
* :class:`~.search.SearchIndex`: the vector cache and FTS5 queries;
* :mod:`.schema` (tables, migrations, conversions) and :mod:`.export`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from smriti.config import DEFAULT_VECTOR_INDEX_DTYPE
from smriti.stores.base import (
    Capabilities,
    EmbeddingMismatchError,
    Engram,
    RecallRow,
    StoreBase,
    StoreStats,
    mismatch_message,
)
from smriti.stores.leases import file_lease
from smriti.stores.operations import handed
from smriti.stores.paths import store_path
from smriti.stores.sqlite import schema
from smriti.stores.sqlite.changes import ChangeFeed
from smriti.stores.sqlite.connection import DEFAULT_BUSY_TIMEOUT, Database
from smriti.stores.sqlite.engrams import IDS, NO_CACHES, EngramTable, id_list
from smriti.stores.sqlite.export import export_rows
from smriti.stores.sqlite.graph import Graph
from smriti.stores.sqlite.search import SearchIndex

if TYPE_CHECKING:
    from smriti.config import Settings

logger = logging.getLogger(__name__)

# recall_rows' statement: each engram's columns, then its cues' rowids (in key order, as a join reads them).
RECALL_ROWS = (
    f"SELECT {schema.ENGRAM_SELECT}, (SELECT group_concat(x.cue) FROM encoded_by x WHERE x.engram = e.rowid) "
    f"FROM engram e WHERE e.id IN {IDS}"
)

# An import of more memories than this (and at least as many as the store holds) defers the
# secondary indexes; a smaller one would spend more rebuilding them than it saves.
BULK_MIN_MEMORIES = 1000


def sqlite_path(settings: Settings, user: str) -> Path:
    """``STORAGE_LOCATION/{user}/memory.sqlite`` (the user name checked, the folder created)."""
    return store_path(settings.storage_location, user, schema.FILE_NAME)


def open_sqlite(settings: Settings, user: str, **options: Any) -> SqliteStore:
    """Open ``user``'s SQLite store (shared when several HTTP workers serve it: HTTP_WORKERS > 1);
    ``options`` go to :class:`SqliteStore`."""
    options.setdefault("shared", settings.http_workers > 1)
    options.setdefault("vector_dtype", settings.vector_index_dtype)
    return SqliteStore(sqlite_path(settings, user), user=user, dims=settings.embedding_dims, **options)


class SqliteStore(StoreBase):
    """A :class:`~smriti.stores.base.GraphStore` on one SQLite file.

    Args:
        path: the database file (see :func:`sqlite_path`).
        user: whose memory this is (for messages; isolation is the file).
        dims: embedding dimension (EMBEDDING_DIMS); a file written with another is refused.
        busy_timeout: seconds a statement waits for a lock.
        shared: other processes opened with ``shared`` write the file too (the HTTP workers of
            ``smriti-mcp --workers N``): the caches follow every process's commits through the
            change log (:mod:`.changes`), and ``capabilities.shared`` tells the pipelines.
        vector_dtype: what the HNSW graph keeps of each vector past 20k memories
            (VECTOR_INDEX_DTYPE: f32, f16 or i8; quantised candidates are re-scored from the BLOBs).

    Raises:
        StoreError: the file is held by another process, or cannot be opened.
        EmbeddingMismatchError: the file holds embeddings of another dimension.
    """

    backend = "sqlite"
    # FTS5 is always there; the vector "index" is the in-memory cache of stores.search.
    capabilities = Capabilities(vector_index=False, fulltext=True)

    # The collaborators, made in __init__ (declared here: handed() checks the names).
    db: Database
    index: SearchIndex
    engrams: EngramTable
    graph: Graph

    # Protocol methods one collaborator carries out alone, by part (stores/parts.py): the
    # collaborator's own method, bound to it when read (no forwarding call; see stores/operations.py).
    # EngramPart
    create_engrams = handed("engrams", EngramTable.create)
    get_engrams = handed("engrams", EngramTable.get)
    update_engrams = handed("engrams", EngramTable.update)
    reinforce = handed("engrams", EngramTable.reinforce)
    remove_engram = handed("engrams", EngramTable.delete)
    list_recent = handed("engrams", EngramTable.recent)
    count_engrams = handed("engrams", EngramTable.count)
    uncued_engram_ids = handed("engrams", EngramTable.uncued_ids)
    latest_of_source = handed("engrams", EngramTable.latest_of_source)  # asked only when shared
    # CuePart
    upsert_cues = handed("graph", Graph.upsert_cues)
    link_cue_ids = handed("graph", Graph.link_cue_ids)
    link_many = handed("graph", Graph.link_many)
    cues_of = handed("graph", Graph.cues_of)
    engrams_by_cues = handed("graph", Graph.engrams_by_cues)
    cue_engram_counts = handed("graph", Graph.cue_engram_counts)
    set_cue_types = handed("graph", Graph.set_cue_types)
    add_cooccurrences = handed("graph", Graph.add_cooccurrences)
    add_relations = handed("graph", Graph.add_relations)
    relations_of = handed("graph", Graph.relations_of)
    related_entities = handed("graph", Graph.related_entities)
    weaken_cooccurrences = handed("graph", Graph.weaken_cooccurrences)
    delete_orphan_cues = handed("graph", Graph.delete_orphan_cues)
    # AssociationPart
    associate_many = handed("graph", Graph.associate_many)
    neighbours = handed("graph", Graph.neighbours)
    all_associations = handed("graph", Graph.all_associations)
    # ClusterPart
    cluster_ids = handed("engrams", EngramTable.cluster_ids)
    engram_states = handed("engrams", EngramTable.states)
    association_weights = handed("graph", Graph.association_weights)
    # SearchPart
    warm = handed("index", SearchIndex.warm)
    finish_indexes = handed("index", SearchIndex.finish)
    vector_search = handed("index", SearchIndex.vector_search)
    fulltext_search = handed("index", SearchIndex.fulltext_search)
    # lifecycle
    transaction = handed("db", Database.transaction)

    def __init__(
        self,
        path: Path,
        *,
        user: str,
        dims: int,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        shared: bool = False,
        vector_dtype: str = DEFAULT_VECTOR_INDEX_DTYPE,
    ) -> None:
        self.user, self.path, self.dims = user, Path(path), dims
        self.db = Database(self.path, user=user, busy_timeout=busy_timeout, shared=shared)
        try:
            self.index = SearchIndex(
                self.db,
                lambda: self.engrams.embeddings(),
                lambda: self.engrams.count(),
                dims,
                ids=lambda: self.engrams.embedded_ids(),
                index_path=self.path.with_name(self.path.name + ".vectors"),
                vector_dtype=vector_dtype,
                exact=lambda ids: self.engrams.vectors_of(ids),
                batches=lambda: (self.engrams.embedded_count(), self.engrams.embedding_batches()),
            )
            # Shared, the vector cache follows the change log only (this process's commits too:
            # one path, in commit order), not the commit hooks.
            self.engrams = EngramTable(self.db, NO_CACHES if shared else self.index, dims)
            self.graph = Graph(self.db, dims)
            with self.db.transaction():
                for change in schema.migrate(self.db.write, dims, self.path):
                    logger.info("%s: migration: %s", self.path, change)
            self.index.fulltext_index = self.get_meta("fulltext_index") == "1"
            if shared:
                self.capabilities = Capabilities(vector_index=False, fulltext=True, shared=True)
                self.index.feed = self.graph.feed = ChangeFeed(
                    self.db, self.index.follow, self.graph.cue_cache.clear, self._reload_caches
                )
        except BaseException:
            self.db.close()
            raise

    # -- lifecycle -------------------------------------------------------------------------------
    def close(self) -> None:
        """Save the vector index, release the file; calling it again does nothing."""
        self.index.close()
        self.db.close()

    def _reload_caches(self) -> None:
        """Drop the vector and cue caches (the change log no longer reaches back far enough)."""
        self.index.invalidate()
        self.graph.cue_cache.clear()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def exclusive(self, name: str, wait: float) -> AbstractContextManager[None]:
        """A lock file beside the database, ``<file>.<name>.lock`` (:func:`.leases.file_lease`)."""
        return file_lease(self.path.with_name(f"{self.path.name}.{name}.lock"), name, wait)

    @contextmanager
    def bulk_import(self, memories: int) -> Iterator[None]:
        """A larger cache and rarer checkpoints throughout; when the import is at least as large
        as the store (and more than one batch), the secondary indexes are dropped first and
        built again at the end (see schema.DEFERRED_INDEXES)."""
        defer = memories > BULK_MIN_MEMORIES and memories >= self.count_engrams()
        with self.db.bulk_settings():
            if defer:
                with self.db.transaction():
                    for name in schema.DEFERRED_INDEXES:
                        self.db.write(f"DROP INDEX IF EXISTS {name}")
            try:
                yield
            finally:
                if defer:
                    with self.db.transaction():
                        for statement in schema.CREATE_INDEXES:
                            self.db.write(statement)

    # -- meta --------------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.db.read("SELECT value FROM meta WHERE key = ?", (key,))
        return rows[0][0] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        """Set a metadata value; ``embedding_dims`` can only be set to this store's dimension.

        Raises:
            EmbeddingMismatchError: an import from a store with other embeddings.
        """
        if key == "embedding_dims" and str(value) != str(self.dims):
            raise EmbeddingMismatchError(mismatch_message(self.path, self.dims, int(value)))
        with self.db.transaction():
            self.db.write(schema.SET_META, (key, str(value)))

    def meta_items(self, prefix: str) -> dict[str, str]:
        # A key range, not LIKE: the prefix is data (an underscore or % must match itself).
        rows = self.db.read(
            "SELECT key, value FROM meta WHERE key >= ? AND key < ? ORDER BY key", (prefix, prefix + "\uffff")
        )
        return dict(rows)

    def delete_meta(self, key: str) -> None:
        with self.db.transaction():
            self.db.write("DELETE FROM meta WHERE key = ?", (key,))

    # -- engrams -------------------------------------------------------------------------------------
    def create_engram(self, engram: Engram) -> None:
        """Insert a new engram; an existing id raises StoreError."""
        self.engrams.create([engram])

    def unlink_engram(self, engram_id: str) -> None:
        """Its EncodedBy rows (the cue counts follow by trigger) and the RelatesTo facts it recorded."""
        with self.db.transaction():
            self.db.write(
                "DELETE FROM encoded_by WHERE engram = (SELECT rowid FROM engram WHERE id = ?)", (engram_id,)
            )
            self.db.write("DELETE FROM relates_to WHERE engram_id = ?", (engram_id,))

    def superseded_ids(self, engram_id: str) -> list[str]:
        rows = self.db.read(  # "<> ''" lets the planner use the partial index engram_superseded
            "SELECT id FROM engram WHERE superseded_by = ? AND superseded_by <> '' ORDER BY id", (engram_id,)
        )
        return [row[0] for row in rows]

    # -- recall's rows: engrams with their cues -------------------------------------------------------
    def recall_rows(
        self, ids: Sequence[str], query: Sequence[float] | np.ndarray | None = None
    ) -> list[RecallRow]:
        """One statement: the engram rows (embedding BLOBs decoded straight into arrays) with
        the rowids of their cues (resolved by the graph's cue cache, see Graph.read_with_cues);
        the similarity to ``query`` is left to recall (it has the vectors). Two statements (the
        rows, then the edges) cost 0.3 ms more at ~80 engrams, and a tuple per edge."""
        if not ids:
            return []
        rows, cues = self.graph.read_with_cues(RECALL_ROWS, (id_list(ids),))
        found = {}
        for row, engram_cues in zip(rows, cues, strict=True):
            engram, vector = schema.engram_and_vector_from_row(row[:-1])
            found[engram.id] = RecallRow(engram, vector, engram_cues)
        return [found[i] for i in ids if i in found]

    # -- search and maintenance ------------------------------------------------------------------------
    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        was = self.index.fulltext_index
        state = self.index.ensure_indexes(threshold)
        if state["fulltext_index"] and not was:
            self.set_meta("fulltext_index", "1")
        return state

    def stats(self) -> StoreStats:
        def count(query: str) -> int:
            return int(self.db.read(query)[0][0])

        return StoreStats(
            engrams=self.count_engrams(),
            cues=count("SELECT count(*) FROM cue"),
            associations=count("SELECT count(*) FROM associated_with"),
            cue_links=count("SELECT count(*) FROM encoded_by"),
            clusters=count("SELECT count(DISTINCT cluster_id) FROM engram WHERE cluster_id >= 0"),
            vector_index=bool(getattr(self.index.vectors, "approximate", False)),
            fulltext_index=self.index.fulltext_index,
            backend=self.backend,
            location=str(self.path),
            extra={
                "co_occurrences": count("SELECT count(*) FROM co_occurs"),
                "relations": count("SELECT count(*) FROM relates_to"),
                "embedding_dims": self.dims,
                "schema_version": schema.SCHEMA_VERSION,
                "file_bytes": self.path.stat().st_size if self.path.exists() else 0,
            },
        )

    # -- portability ---------------------------------------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every node and edge in stores.records.KINDS order, sorted within a kind (as Kuzu's)."""
        yield from export_rows(self.db)
