"""The embedded default store: SQLite (``DB_TYPE=sqlite``), ``STORAGE_LOCATION/{user}/memory.sqlite``.

Why SQLite: the standard library ships it (no native wheel to trust, no archived engine);
a query costs microseconds rather than Kuzu's 0.2-0.35 ms; B-tree indexes make every
"edges of X" an index range; a transaction makes a store atomic (a failed or killed store
leaves the whole memory or none); the FTS5 keyword index is persistent and incremental.

:class:`SqliteStore` implements the protocol by delegating to collaborators built from
explicit arguments:

* :class:`~.connection.Database`: the file, the writer and reader connections, transactions;
* :class:`~.engrams.EngramTable`: engram rows and their FTS rows;
* :class:`~.graph.Graph`: cues and edges;
* :class:`~.search.SearchIndex`: the vector cache and FTS5 queries;
* :mod:`.schema` (tables, migrations, conversions) and :mod:`.export`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.stores.base import (
    Association,
    Capabilities,
    Cue,
    CueHit,
    EmbeddingMismatchError,
    Engram,
    EngramState,
    RecallRow,
    Relation,
    ScoredId,
    StoreBase,
    StoreStats,
    mismatch_message,
)
from smriti.stores.paths import store_path
from smriti.stores.sqlite import schema
from smriti.stores.sqlite.changes import ChangeFeed
from smriti.stores.sqlite.connection import DEFAULT_BUSY_TIMEOUT, Database
from smriti.stores.sqlite.engrams import NO_CACHES, EngramTable
from smriti.stores.sqlite.export import export_rows
from smriti.stores.sqlite.graph import Graph
from smriti.stores.sqlite.search import SearchIndex

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from datetime import datetime

    from smriti.config import Settings

logger = logging.getLogger(__name__)

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

    Raises:
        StoreError: the file is held by another process, or cannot be opened.
        EmbeddingMismatchError: the file holds embeddings of another dimension.
    """

    backend = "sqlite"
    # FTS5 is always there; the vector "index" is the in-memory cache of stores.search.
    capabilities = Capabilities(vector_index=False, fulltext=True)

    def __init__(
        self,
        path: Path,
        *,
        user: str,
        dims: int,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        shared: bool = False,
    ) -> None:
        self.user, self.path, self.dims = user, Path(path), dims
        self.db = Database(self.path, user=user, busy_timeout=busy_timeout, shared=shared)
        try:
            self.index = SearchIndex(
                self.db,
                lambda: self.engrams.embeddings(),
                self.count_engrams,
                dims,
                ids=lambda: self.engrams.embedded_ids(),
                index_path=self.path.with_name(self.path.name + ".vectors"),
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

    def warm(self) -> None:
        self.index.warm()

    def _reload_caches(self) -> None:
        self.index.invalidate()
        self.graph.cue_cache.clear()

    def finish_indexes(self, on_progress: Callable[[int, int], None] | None = None) -> None:
        self.index.finish(on_progress)

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def transaction(self) -> AbstractContextManager[None]:
        """Everything written inside commits together or not at all (see Database.transaction)."""
        return self.db.transaction()

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

    def create_engrams(self, engrams: Sequence[Engram]) -> None:
        self.engrams.create(engrams)

    def get_engrams(self, ids: Sequence[str]) -> list[Engram]:
        return self.engrams.get(ids)

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        return self.engrams.cluster_ids(ids)

    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        return self.engrams.update(updates)

    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        return self.engrams.reinforce(ids, at, boost)

    def remove_engram(self, engram_id: str) -> bool:
        """Delete the engram, its edges, its FTS row and the RelatesTo facts it recorded."""
        return self.engrams.delete(engram_id)

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

    def latest_of_source(self, source: str, limit: int) -> list[str]:
        """Asked only when shared (another worker may have stored the previous turn)."""
        rows = self.db.read(  # "<> ''" lets the planner use the partial index engram_source
            "SELECT id FROM engram WHERE source = ? AND source <> '' "
            "ORDER BY created_at DESC, id DESC LIMIT ?",
            (source, int(limit)),
        )
        return [row[0] for row in rows]

    def list_recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        return self.engrams.recent(limit, memory_type)

    def engram_states(self, ids: Sequence[str] | None = None) -> list[EngramState]:
        return self.engrams.states(ids)

    def count_engrams(self) -> int:
        return self.engrams.count()

    def uncued_engram_ids(self) -> list[str]:
        return self.engrams.uncued_ids()

    # -- cues, relations, associations -----------------------------------------------------------------
    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]:
        return self.graph.upsert_cues(cues)

    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None:
        self.graph.link_cue_ids(engram_id, cue_ids)

    def link_many(self, links: Mapping[str, Sequence[str]]) -> None:
        self.graph.link_many(links)

    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]:
        return self.graph.cues_of(engram_ids)

    def recall_rows(self, ids: Sequence[str]) -> list[RecallRow]:
        """Two reads: the engram rows (embedding BLOBs decoded straight into arrays) and their cues."""
        found = self.engrams.get_with_vectors(ids)
        cues = self.graph.cue_names_of([engram.id for engram, _ in found]) if found else {}
        return [RecallRow(engram, vector, cues.get(engram.id, [])) for engram, vector in found]

    def engrams_by_cues(self, cue_names: Sequence[str], limit: int) -> list[CueHit]:
        return self.graph.engrams_by_cues(cue_names, limit)

    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        return self.graph.cue_engram_counts(cue_names)

    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]], replace: bool = False) -> None:
        self.graph.add_cooccurrences(pairs, replace)

    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        self.graph.add_relations(relations, cue_type)

    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        return self.graph.relations_of(engram_ids)

    def related_entities(self, cue_names: Sequence[str], limit: int) -> list[Relation]:
        return self.graph.related_entities(cue_names, limit)

    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        self.graph.weaken_cooccurrences(pairs)

    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int:
        return self.graph.delete_orphan_cues(names)

    def associate_many(self, associations: Sequence[Association]) -> None:
        self.graph.associate_many(associations)

    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        return self.graph.neighbours(engram_ids)

    def all_associations(self) -> list[Association]:
        return self.graph.all_associations()

    def association_weights(self) -> list[tuple[str, str, float]]:
        return self.graph.association_weights()

    # -- search and maintenance ------------------------------------------------------------------------
    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        return self.index.vector_search(embedding, k, memory_type)

    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        return self.index.fulltext_search(query, k, memory_type)

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
