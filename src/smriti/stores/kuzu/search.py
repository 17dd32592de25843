"""Vector and full-text search of the embedded store: :class:`SearchIndex`.

Which path answers (measured at 10k engrams x 1536 dims on the development machine):

* vector: exact cosine over :class:`~smriti.stores.search.VectorCache` (~1.6 ms) while
  the store holds at most ``exact_search_limit`` embeddings; Kuzu's HNSW index above that
  (~10 ms at efs 200, so it only pays off on larger stores), brute force when no index.
* full text: Kuzu's FTS index (BM25, English stemming) when built, else
  :class:`~smriti.stores.search.KeywordIndex` (BM25, no stemming). Both are divided by
  the best score, so hits lie in (0, 1].

Kuzu 0.11.3 links the ``vector`` and ``fts`` extensions statically; LadybugDB downloads
them on ``INSTALL`` and fails offline, in which case one warning is logged per process and
the fallbacks answer. Indexes are never dropped: in Kuzu 0.11.3 ``DROP_VECTOR_INDEX`` leaves
the table unable to take inserts, and a re-created FTS index comes back empty. Both indexes
follow inserts, deletes and (FTS) content updates by themselves.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from smriti.stores.base import MEMORY_TYPES, Capabilities, Engram, ScoredId, StoreError, check_dims
from smriti.stores.kuzu import schema
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.rows import EngramRows
from smriti.stores.kuzu.schema import ENGRAM_RETURN, FULLTEXT_INDEX, VECTOR_INDEX
from smriti.stores.search import SEARCHED_FIELDS, KeywordIndex, VectorCache, normalise_scores, text_of

logger = logging.getLogger(__name__)

EXTENSIONS = ("vector", "fts")
# The columns the FTS index covers (stores.search.text_of's fields). An index built before
# facts existed covers content and summary only and is kept (a re-created FTS index comes back
# empty, see above): such a store answers keyword queries with the BM25 scan instead, which
# reads all three, so a memory is still found by the facts it states.
FULLTEXT_COLUMNS = SEARCHED_FIELDS
FULLTEXT_FIELDS = "[" + ", ".join(f"'{name}'" for name in FULLTEXT_COLUMNS) + "]"
_warned: set[str] = set()  # one warning per process and cause, not one per store opened


class SearchIndex:
    """Extensions, index state and the in-memory caches: ``vector_search``, ``fulltext_search``,
    ``ensure_indexes``.

    Args:
        db: the store's connection.
        rows: the Engram row cache, loaded and dropped together with the vector cache.
        count: the store's engram count (which path answers depends on it).
        path, backend: for messages.
        dims: the embedding dimension.
        use_extensions: False never loads the vector/FTS extensions (forces the fallbacks).
        exact_limit: brute force while at most this many embeddings are stored.

    The caches follow the store's writes through :meth:`added`, :meth:`retexted` and :meth:`removed`.
    """

    def __init__(
        self,
        db: Connection,
        rows: EngramRows,
        count: Callable[[], int],
        *,
        path: Path,
        backend: str,
        dims: int,
        use_extensions: bool,
        exact_limit: int,
    ) -> None:
        self.db, self.rows, self.path, self.backend = db, rows, path, backend
        self.use_extensions = use_extensions
        self.exact_limit = exact_limit
        self.capabilities = Capabilities(vector_index=False, fulltext=False)
        self._count = count
        self._extensions: dict[str, bool] = dict.fromkeys(EXTENSIONS, False)
        self._install_tried = False
        self._vector_index = self._fulltext_index = False
        self._fulltext_complete = False  # the FTS index covers every FULLTEXT_COLUMNS (see there)
        self._projected: set[str] = set()
        self._vectors = VectorCache(dims)
        self._keywords = KeywordIndex()

    def open(self) -> None:
        """Load the extensions (without installing) and read which indexes the file has."""
        if self.use_extensions:
            self._load_extensions(install=False)
        self._read_indexes()

    @property
    def vector_index(self) -> bool:
        return self._vector_index

    @property
    def fulltext_index(self) -> bool:
        return self._fulltext_index

    @property
    def extensions(self) -> dict[str, bool]:
        return dict(self._extensions)

    # -- the caches follow the store's writes ------------------------------------------------
    def vector(self, engram_id: str) -> list[float] | None:
        """The cached embedding of ``engram_id`` (None when not cached)."""
        return self._vectors.vector(engram_id)

    def added(self, engram: Engram) -> None:
        if engram.embedding is not None:
            self._vectors.add(engram.id, engram.memory_type, engram.embedding)
        text = text_of(engram.content, engram.summary, engram.facts)
        self._keywords.add(engram.id, engram.memory_type, text)

    def retexted(self, engram_id: str, memory_type: str, text: str) -> None:
        """``text`` is the engram's searchable text (:func:`text_of`) after the change."""
        self._vectors.retype(engram_id, memory_type)
        self._keywords.add(engram_id, memory_type, text)

    def removed(self, engram_id: str) -> None:
        self._vectors.remove(engram_id)
        self._keywords.remove(engram_id)

    def invalidate(self) -> None:
        self._vectors.invalidate()
        self._keywords.invalidate()

    def _load_exact_caches(self) -> None:
        """Read the Engram table once: embeddings into the vector cache, other columns into
        the row cache (one scan, as the vectors alone would need)."""
        engrams = [
            schema.engram_from_row(row) for row in self.db.run(f"MATCH (e:Engram) RETURN {ENGRAM_RETURN}")
        ]
        self._vectors.load((e.id, e.memory_type, e.embedding) for e in engrams if e.embedding is not None)
        self.rows.load(engrams)

    def _warn_once(self, cause: str, message: str, *args: Any) -> None:
        if cause not in _warned:
            _warned.add(cause)
            logger.warning(message, *args)

    def _load_extensions(self, install: bool) -> None:
        """LOAD (and with ``install``, INSTALL) the vector and FTS extensions; never raises."""
        missing, reason = [], ""
        for name in EXTENSIONS:
            if self._extensions[name]:
                continue
            commands = [[f"LOAD {name}"]] + ([[f"INSTALL {name}", f"LOAD {name}"]] if install else [])
            for attempt in commands:
                try:
                    for command in attempt:
                        self.db.command(command)
                    self._extensions[name] = True
                    break
                except RuntimeError as error:
                    reason = str(error).splitlines()[0] if install else reason
            if not self._extensions[name]:
                missing.append(name)
        if install and missing:
            what = " and ".join(missing) + (" extensions" if len(missing) > 1 else " extension")
            self._warn_once(
                f"{self.backend}:extensions",
                "%s cannot load its %s (%s): using brute-force vector search and a keyword scan instead",
                self.backend,
                what,
                reason,
            )
        self._install_tried = self._install_tried or install
        self.capabilities = replace(
            self.capabilities, vector_index=self._extensions["vector"], fulltext=self._extensions["fts"]
        )

    def _read_indexes(self) -> None:
        try:
            rows = self.db.run("CALL SHOW_INDEXES() RETURN *")
        except StoreError:
            rows = []
        names = {row[1] for row in rows}
        # (table_name, index_name, index_type, property_names, ...): which columns the FTS covers
        covered = next((set(row[3] or ()) for row in rows if row[1] == FULLTEXT_INDEX), set())
        self._fulltext_complete = set(FULLTEXT_COLUMNS) <= covered
        usable = all(self._extensions.values())
        if {VECTOR_INDEX, FULLTEXT_INDEX} & names and self.use_extensions and not usable:
            self._load_extensions(install=True)  # the file has indexes this process cannot use yet
        self._vector_index = VECTOR_INDEX in names and self._extensions["vector"]
        self._fulltext_index = FULLTEXT_INDEX in names and self._extensions["fts"]
        self._sync_index_meta()

    def _sync_index_meta(self) -> None:
        for key, value in (("vector_index", self._vector_index), ("fulltext_index", self._fulltext_index)):
            if schema.get_meta(self.db.run, key) != str(value).lower():
                schema.set_meta(self.db.run, key, str(value).lower())

    # -- search ----------------------------------------------------------------------------
    def _use_hnsw(self) -> bool:
        if not self._vector_index:
            return False
        size = len(self._vectors) if self._vectors.loaded else self._count()
        if size <= self.exact_limit:
            return False
        self._vectors.invalidate()  # past the limit: free the matrix, the index takes over
        self.rows.invalidate()
        return True

    @locked
    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        """Cosine similarity (raw, -1..1), best first; exact below ``exact_search_limit``.

        Raises:
            EmbeddingMismatchError: the query has another dimension than the store.
        """
        check_dims(embedding, self._vectors.dims, "the query embedding")
        query = np.asarray(embedding, dtype=np.float32)
        if k <= 0 or not np.any(query):
            return []
        if self._use_hnsw():
            return self._hnsw_search(query, k, memory_type)
        if not self._vectors.loaded:
            self._load_exact_caches()
        return [ScoredId(id_, score) for id_, score in self._vectors.search(query, k, memory_type)]

    def _hnsw_search(self, query: np.ndarray, k: int, memory_type: str | None) -> list[ScoredId]:
        graph, fetch, where = "Engram", k, ""
        params: dict[str, Any] = {"q": query.tolist(), "k": int(k)}
        if memory_type in MEMORY_TYPES:
            # Kuzu filters inside the HNSW search through a projected graph. Its filter takes no
            # parameters, so only the known memory types (our constants) get one.
            graph = f"engram_{memory_type}"
            if graph not in self._projected:
                node_filter = f"n.memory_type = '{memory_type}'"
                self.db.run(f"CALL PROJECT_GRAPH('{graph}', {{'Engram': \"{node_filter}\"}}, [])")
                self._projected.add(graph)
        elif memory_type is not None:
            # A WHERE after the call only filters the rows the index returned: ask for more.
            fetch, where = max(10 * k, 100), "WHERE node.memory_type = $memory_type "
            params["memory_type"] = memory_type
        params["fetch"] = int(fetch)
        rows = self.db.run(
            f"CALL QUERY_VECTOR_INDEX('{graph}', '{VECTOR_INDEX}', $q, $fetch) WITH node, distance {where}"
            "RETURN node.id AS id, distance ORDER BY distance, id LIMIT $k",
            params,
        )
        return [ScoredId(id_, 1.0 - float(distance)) for id_, distance in rows]

    @locked
    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        """BM25 over content, summary and facts, divided by the best score (so in (0, 1]).

        Below ``exact_search_limit`` engrams the in-memory BM25 (stemmed terms, a broad stop
        list) answers even when Kuzu's FTS index exists: on LoCoMo it ranks evidence better
        (recall@10 0.52 against 0.44 for the index on the same turns) and is as fast there.
        """
        if k <= 0 or not query.strip():
            return []
        if self._fulltext_index and self._fulltext_complete and self._count() > self.exact_limit:
            where = "WHERE node.memory_type = $memory_type " if memory_type is not None else ""
            params: dict[str, Any] = {"q": query, "k": int(k)}
            if memory_type is not None:
                params["memory_type"] = memory_type
            try:
                rows = self.db.run(
                    f"CALL QUERY_FTS_INDEX('Engram', '{FULLTEXT_INDEX}', $q) WITH node, score {where}"
                    "RETURN node.id AS id, score ORDER BY score DESC, id LIMIT $k",
                    params,
                )
                return [ScoredId(id_, s) for id_, s in normalise_scores([(r[0], float(r[1])) for r in rows])]
            except StoreError as error:  # odd query syntax: the scan still answers
                logger.debug("full-text index query failed, scanning instead: %s", error)
        if not self._keywords.loaded:
            rows = self.db.run("MATCH (e:Engram) RETURN e.id, e.memory_type, e.content, e.summary, e.facts")
            self._keywords.load((id_, mt, text_of(*texts)) for id_, mt, *texts in rows)
        return [ScoredId(id_, score) for id_, score in self._keywords.search(query, k, memory_type)]

    @locked
    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        """Build the HNSW and FTS indexes once the store holds more than ``threshold`` engrams.

        Idempotent; never drops an index (in Kuzu 0.11.3 DROP_VECTOR_INDEX leaves the table
        unable to take inserts). Without the extensions nothing is built and the fallbacks serve.
        """
        wanted = self.use_extensions and self._count() > threshold
        if wanted and not (self._vector_index and self._fulltext_index):
            if not all(self._extensions.values()) and not self._install_tried:
                self._load_extensions(install=True)
            builds = (
                (
                    "_vector_index",
                    "vector",
                    f"CALL CREATE_VECTOR_INDEX('Engram', '{VECTOR_INDEX}', 'embedding', metric := 'cosine')",
                ),
                (
                    "_fulltext_index",
                    "fts",
                    f"CALL CREATE_FTS_INDEX('Engram', '{FULLTEXT_INDEX}', {FULLTEXT_FIELDS})",
                ),
            )
            for attribute, extension, statement in builds:
                able = self.capabilities.vector_index if extension == "vector" else self.capabilities.fulltext
                if getattr(self, attribute) or not able:
                    continue
                try:
                    self.db.ddl(statement)
                    setattr(self, attribute, True)
                    self._fulltext_complete = self._fulltext_complete or extension == "fts"
                    logger.info("%s: built the %s index at %d engrams", self.path, extension, self._count())
                except StoreError as error:
                    cause = f"{self.backend}:build:{extension}"
                    self._warn_once(cause, "could not build the %s index: %s", extension, error)
            self._sync_index_meta()
        return {"vector_index": self._vector_index, "fulltext_index": self._fulltext_index}
