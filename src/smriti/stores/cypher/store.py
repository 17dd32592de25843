"""The openCypher implementation of :class:`GraphStore` shared by Neo4j and FalkorDB.

:class:`CypherGraphStore` expresses every protocol method as parameterised Cypher sent
through one abstraction, ``run(query, params) -> list[dict]``. A backend module supplies
only what differs, as a :class:`~smriti.stores.cypher.connection.CypherConnection`: the
connection, the vector literal (FalkorDB's ``vecf32($v)``), and the vector / full-text
index DDL and query procedures.

The store is composed of collaborators, each built from explicit arguments; a protocol
method one of them carries out alone is handed to it (``handed``, ``stores/operations.py``):

* :class:`~smriti.stores.cypher.connection.CypherConnection`: the database's hooks
  (:mod:`.falkordb`, :mod:`.neo4j`); :class:`~smriti.stores.cypher.connection.UserGraph`
  binds ``$user`` to every query.
* :class:`~smriti.stores.cypher.graph.CypherGraphReads` and
  :class:`~smriti.stores.cypher.batch.CypherGraphWrites`: cues, relations and associations.
* :class:`~smriti.stores.cypher.search.CypherSearch`: search and index management.
* this module: engrams, metadata and stats; :mod:`.export`: the record export.

Decisions that hold on every Cypher backend:

* Every node (Engram, Cue, Meta; FalkorDB's EngramVector and EngramTally) carries a ``user``
  property and every MATCH filters by it, whatever the isolation mode. In ``tenant`` mode
  this is the isolation; in ``graph``/``database`` mode it is a second wall, and it lets one
  code path serve both.
  Relationships are only ever created between nodes matched with the same ``$user``.
* Cue names are unique per (user, name), so a cue name two users share never bridges them.
* Timestamps are stored as ISO-8601 strings in UTC (see :mod:`.rows`).
* Embeddings are read and written through the connection's embedding hooks: on the Engram
  node (Neo4j) or on a node of their own beside it (FalkorDB, whose vector index re-indexes
  a node whenever any of its properties is set).
* Query text contains no user input: labels and property names are constants, values are
  parameters; graph and database names derive from a validated user name.
* Semantics follow the embedded (Kuzu) store so results are the same everywhere:
  CoOccurs and AssociatedWith are symmetric (an edge either way is the one updated),
  self-edges are ignored, edges named by cue name create missing cues, vector scores are
  raw cosine similarity in [-1, 1], and every ranking breaks ties by id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from typing import Any

import numpy as np

from smriti.stores.base import (
    NO_CLUSTER,
    UPDATABLE_FIELDS,
    Capabilities,
    Engram,
    EngramState,
    RecallRow,
    StoreBase,
    StoreStats,
    check_update,
    validate_user_name,
)
from smriti.stores.cypher.batch import CypherGraphWrites
from smriti.stores.cypher.connection import ENGRAM_COUNT, CypherConnection, UserGraph
from smriti.stores.cypher.cue_fields import CypherCueFields
from smriti.stores.cypher.export import export_records
from smriti.stores.cypher.graph import CypherGraphReads
from smriti.stores.cypher.nodes import NodeIds
from smriti.stores.cypher.rows import (
    ENGRAM_COLUMNS,
    engram_from_row,
    engram_props,
    from_stored_time,
    number,
    to_stored_time,
)
from smriti.stores.cypher.search import CypherSearch
from smriti.stores.leases import GraphLease
from smriti.stores.migrations import MIGRATIONS_KEY, Migration, parse_applied, run_migrations
from smriti.stores.operations import handed
from smriti.stores.search import SEARCHED_FIELDS

log = logging.getLogger(__name__)


class CypherGraphStore(StoreBase):
    """GraphStore of one user over any openCypher database reachable through a connection.

    Args:
        connection: the database's hooks (a FalkorDB or Neo4j connection).
        user: the user whose memories this store sees (validated).
        dims: embedding dimension; embeddings of another length are refused.
        isolation: the isolation mode ("tenant", "graph" or "database"), for stats.

    Attributes:
        backend: short backend name ("falkordb", "neo4j").
        location: where the data lives, for stats and logs (never with a password).
        connection, graph, reads, writes, search: the collaborators (see the module docstring).
    """

    # shared: several Smriti processes may serve one database (see Capabilities.shared).
    capabilities = Capabilities(vector_index=True, fulltext=True, shared=True)

    # The collaborators, made in __init__ (declared here: handed() checks the names).
    connection: CypherConnection
    graph: UserGraph
    reads: CypherGraphReads
    writes: CypherGraphWrites
    cue_fields: CypherCueFields
    search: CypherSearch

    # Protocol methods one collaborator carries out alone, by part (stores/parts.py): the
    # collaborator's own method, bound to it when read (no forwarding call; see stores/operations.py).
    # CuePart
    cues_of = handed("reads", CypherGraphReads.cues_of)
    engrams_by_cues = handed("reads", CypherGraphReads.engrams_by_cues)
    cue_engram_counts = handed("reads", CypherGraphReads.cue_engram_counts)
    set_cue_types = handed("cue_fields", CypherCueFields.set_cue_types)
    relations_of = handed("reads", CypherGraphReads.relations_of)
    related_entities = handed("reads", CypherGraphReads.related_entities)
    delete_orphan_cues = handed("reads", CypherGraphReads.delete_orphan_cues)
    upsert_cues = handed("writes", CypherGraphWrites.upsert_cues)
    link_cue_ids = handed("writes", CypherGraphWrites.link_cue_ids)
    link_cues = handed("writes", CypherGraphWrites.link_cues)
    link_many = handed("writes", CypherGraphWrites.link_many)
    add_cooccurrences = handed("writes", CypherGraphWrites.add_cooccurrences)
    weaken_cooccurrences = handed("writes", CypherGraphWrites.weaken_cooccurrences)
    add_relations = handed("writes", CypherGraphWrites.add_relations)
    # AssociationPart
    neighbours = handed("reads", CypherGraphReads.neighbours)
    all_associations = handed("reads", CypherGraphReads.all_associations)
    associate_many = handed("writes", CypherGraphWrites.associate_many)
    # SearchPart
    vector_search = handed("search", CypherSearch.vector_search)
    fulltext_search = handed("search", CypherSearch.fulltext_search)
    # lifecycle
    close = handed("connection", CypherConnection.close)
    # A store's writes, queued and sent together at the end: FalkorDB runs them as one
    # MULTI/EXEC, Neo4j as one transaction; reads inside see the graph as it was before.
    write_batch = handed("graph", UserGraph.batch)

    def __init__(self, connection: CypherConnection, *, user: str, dims: int, isolation: str) -> None:
        self.user = validate_user_name(user)
        self.dims = int(dims)
        self.isolation = isolation
        self.connection = connection
        self.backend = connection.backend
        self.location = connection.location
        self.graph = UserGraph(connection, self.user, self.dims)
        self.reads = CypherGraphReads(self.graph)
        self.writes = CypherGraphWrites(self.graph)
        self.cue_fields = CypherCueFields(self.graph)
        self.search = CypherSearch(self.graph, self.capabilities)
        self._migrate()

    def _migrate(self) -> None:
        """The schema through the same runner as the embedded stores (stores/migrations.py).

        A property graph has no tables to alter: its one step, the exact-match indexes and unique
        keys the database hooks declare, is repeatable (derived from the code, cheap when present).
        """

        def indexes_and_keys() -> list[str]:
            self.connection.ensure_schema()
            return []

        steps = [
            Migration("0001_indexes_and_keys", indexes_and_keys, repeatable=True),
            *self.connection.migrations(self.graph),
        ]
        applied = parse_applied(self.get_meta(MIGRATIONS_KEY))
        for change in run_migrations(steps, applied, self.set_meta, self.location):
            log.info("%s: migration: %s", self.location, change)
        # Recorded as the embedded stores do: EMBEDDING_PROVIDER=auto reads it before the next
        # open (smriti.stores.recorded_embedding) to keep the graph on its dimension.
        if self.get_meta("embedding_dims") is None:
            self.set_meta("embedding_dims", str(self.dims))

    def run(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one parameterised query (no ``$user`` binding) and return its rows as dicts."""
        return self.connection.run(query, params)

    def exclusive(self, name: str, wait: float) -> AbstractContextManager[None]:
        """A ``Lease`` node of the user with an expiry, renewed while held
        (:class:`~smriti.stores.leases.GraphLease`): every server process sharing the database sees it."""
        return GraphLease(lambda query, params: self.graph.q(query, **params), name).held(wait)

    # -- key/value metadata -------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        rows = self.graph.q("MATCH (m:Meta {user: $user, key: $key}) RETURN m.value AS value", key=key)
        return rows[0]["value"] if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self.graph.write(
            "MERGE (m:Meta {user: $user, key: $key}) SET m.value = $value", key=key, value=str(value)
        )

    def meta_items(self, prefix: str) -> dict[str, str]:
        rows = self.graph.q(
            "MATCH (m:Meta {user: $user}) WHERE m.key STARTS WITH $prefix "
            "RETURN m.key AS key, m.value AS value ORDER BY key",
            prefix=prefix,
        )
        return {row["key"]: row["value"] for row in rows}

    def delete_meta(self, key: str) -> None:
        self.graph.write("MATCH (m:Meta {user: $user, key: $key}) DELETE m", key=key)

    # -- engrams ------------------------------------------------------------------------------
    def create_engram(self, engram: Engram) -> None:
        self.create_engrams([engram])

    def create_engrams(self, engrams: Sequence[Engram]) -> None:
        """One ``UNWIND ... CREATE`` for the batch (an import's 1,000 memories are one query, not
        1,000 round trips); an existing id fails the whole query on the unique key (StoreError)."""
        if not engrams:
            return
        rows = [
            {
                "id": engram.id,
                "props": engram_props(
                    {name: getattr(engram, name) for name in UPDATABLE_FIELDS | {"created_at"}}
                ),
                "embedding": self.graph.vector_param(engram.embedding),
            }
            for engram in engrams
        ]
        connection = self.graph.connection
        nodes = self.graph.nodes
        query = (
            "UNWIND $rows AS row CREATE (e:Engram {user: $user, id: row.id}) SET e += row.props "
            f"{connection.embedding_create('e', 'row.embedding')} {connection.searchable_text('e')}"
        )
        if nodes is not None:  # during an import, the new engrams' node ids come back (see .nodes)
            made = f"collect({{id: e.id, node: {connection.node_id('e')}}})"
            created = self.graph.q(
                f"{query} WITH {made} AS made {connection.engram_tally('size(made)')} RETURN made", rows=rows
            )
            nodes.remember("Engram", "id", created[0]["made"] if created else [])
            return
        tally = connection.engram_tally("n")
        self.graph.write(query + (f" WITH count(e) AS n {tally}" if tally else ""), rows=rows)

    def get_engrams(self, ids: Sequence[str]) -> list[Engram]:
        if not ids:
            return []
        join = self.graph.connection.embedding_join("e")
        rows = self.graph.q(
            f"MATCH (e:Engram {{user: $user}}) WHERE e.id IN $ids {join.clause} RETURN {ENGRAM_COLUMNS}, "
            f"{join.expression} AS embedding",
            ids=list(dict.fromkeys(ids)),
        )
        by_id = {row["id"]: engram_from_row(row) for row in rows}
        return [by_id[i] for i in ids if i in by_id]

    def recall_rows(
        self, ids: Sequence[str], query: Sequence[float] | np.ndarray | None = None
    ) -> list[RecallRow]:
        """With ``query`` on a database that computes cosines (FalkorDB), each row's similarity
        comes from the database and no embedding is sent: the client parsed a 1,536-float
        vector value by value (3.4 ms a vector, 270 ms of a recall at 10k, measured). Otherwise
        the engrams with their embeddings (:class:`StoreBase`).

        The cues are a second query: read in the same one (an ``OPTIONAL MATCH`` per candidate,
        collected), they cost FalkorDB twice the server time (8.7 against 4.5 ms for 140
        candidates at 10k) for no shorter wait (19.0 against 16.1 ms, measured)."""
        connection = self.graph.connection
        cosine = connection.cosine_to_query("embedding")
        if query is None or cosine is None or not ids:
            return super().recall_rows(ids, query)
        join = connection.embedding_join("e")
        rows = self.graph.q(
            f"MATCH (e:Engram {{user: $user}}) WHERE e.id IN $ids {join.clause} "
            f"WITH e, {join.expression} AS embedding RETURN {ENGRAM_COLUMNS}, {cosine} AS similarity",
            ids=list(dict.fromkeys(ids)),
            q=self.graph.vector_param(np.asarray(query, dtype=np.float32).tolist()),
        )
        by_id = {row["id"]: row for row in rows}
        found = [by_id[i] for i in ids if i in by_id]
        cues = self.reads.cues_of([row["id"] for row in found]) if found else {}
        return [
            RecallRow(
                engram_from_row(row),
                None,
                cues.get(row["id"], []),
                None if row["similarity"] is None else float(row["similarity"]),
            )
            for row in found
        ]

    @contextmanager
    def bulk_import(self, memories: int) -> Iterator[None]:
        """The import's edge rows seek the nodes it created or merged, where the database can
        (see :mod:`.nodes`); nothing is remembered past it."""
        if self.graph.connection.node_id("n") is None or self.graph.nodes is not None:
            yield
            return
        self.graph.nodes = NodeIds()
        try:
            yield
        finally:
            self.graph.nodes = None

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        if not ids:
            return {}
        nodes = self.graph.nodes
        node = f", {self.graph.connection.node_id('e')} AS node" if nodes is not None else ""
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) WHERE e.id IN $ids "
            f"RETURN e.id AS id, e.cluster_id AS cluster_id{node}",
            ids=list(dict.fromkeys(ids)),
        )
        if nodes is not None:  # an import asks which of a batch exist: their edges seek them (.nodes)
            nodes.remember("Engram", "id", rows)
        return {row["id"]: int(number(row, "cluster_id", NO_CLUSTER)) for row in rows}

    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        rows = []
        for engram_id, fields in updates.items():
            check_update(fields)
            rows.append({"id": engram_id, "props": engram_props(fields)})
        if not rows:
            return 0
        # Decay and clustering update thousands of engrams without touching their text.
        texts = any(set(SEARCHED_FIELDS) & set(fields) for fields in updates.values())
        query = "UNWIND $rows AS row MATCH (e:Engram {user: $user, id: row.id}) SET e += row.props " + (
            self.graph.connection.searchable_text("e") if texts else ""
        )
        if self.graph.batching:  # sent at the batch's end: the rows asked for count as changed
            self.graph.write(query, rows=rows)
            return len(rows)
        result = self.graph.q(query + " RETURN count(e) AS n", rows=rows)
        return int(result[0]["n"]) if result else 0

    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        if not ids:
            return {}
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) WHERE e.id IN $ids "
            "SET e.access_count = coalesce(e.access_count, 0) + 1, e.last_accessed_at = $at, "
            "e.decay_factor = CASE WHEN coalesce(e.decay_factor, 1.0) + $boost > 1.0 THEN 1.0 "
            "ELSE coalesce(e.decay_factor, 1.0) + $boost END "
            "RETURN e.id AS id, e.access_count AS access_count, e.decay_factor AS decay_factor",
            ids=list(dict.fromkeys(ids)),
            at=to_stored_time(at),
            boost=float(boost),
        )
        return {row["id"]: (int(row["access_count"]), float(row["decay_factor"])) for row in rows}

    def remove_engram(self, engram_id: str) -> bool:
        """Delete the engram, its edges and the RelatesTo facts it recorded."""
        # The node holding its embedding apart (FalkorDB) goes in the same query: no orphan.
        connection = self.graph.connection
        join = connection.embedding_join("e")
        also = f", {join.node}" if join.node else ""
        # The kept engram count (FalkorDB) changes in the same query.
        rows = self.graph.q(
            f"MATCH (e:Engram {{user: $user, id: $id}}) {join.clause if join.node else ''} "
            f"WITH e{also}, e.id AS id DETACH DELETE e{also} WITH count(id) AS n "
            f"{connection.engram_tally('-n')} RETURN n",
            id=engram_id,
        )
        if not (rows and rows[0]["n"]):
            return False
        # A forgotten memory takes the facts it asserted with it (they once stayed in every
        # export and backup: RelatesTo hangs between cues, so DETACH DELETE never reached it).
        self.writes.delete_relations_of(engram_id)
        return True

    def unlink_engram(self, engram_id: str) -> None:
        """Its EncodedBy edges and the RelatesTo facts it recorded; the engram stays."""
        self.graph.write(
            "MATCH (e:Engram {user: $user, id: $id})-[r:EncodedBy]->(:Cue) DELETE r", id=engram_id
        )
        self.writes.delete_relations_of(engram_id)

    def superseded_ids(self, engram_id: str) -> list[str]:
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) WHERE e.superseded_by = $id RETURN e.id AS id ORDER BY id",
            id=engram_id,
        )
        return [row["id"] for row in rows]

    def list_recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        if limit <= 0:
            return []
        # The newest first, then their embeddings (not every engram's, to sort them).
        join = self.graph.connection.embedding_join("e")
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) WHERE $memory_type IS NULL OR e.memory_type = $memory_type "
            "WITH e ORDER BY e.last_accessed_at DESC, e.created_at DESC, e.id ASC LIMIT $limit "
            f"{join.clause} RETURN {ENGRAM_COLUMNS}, {join.expression} AS embedding "
            "ORDER BY last_accessed_at DESC, created_at DESC, id ASC",
            memory_type=memory_type,
            limit=int(limit),
        )
        return [engram_from_row(row) for row in rows]

    def engram_states(self, ids: Sequence[str] | None = None) -> list[EngramState]:
        # The id filter only when given: "$ids IS NULL OR e.id IN $ids" made FalkorDB scan
        # every engram of the user for each chunk of 250 that decay re-reads (1.05 s a chunk
        # at 100k against 3.5 ms; 400 chunks a consolidation, measured).
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) "
            + ("" if ids is None else "WHERE e.id IN $ids ")
            + "RETURN e.id AS id, e.importance AS importance, "
            "e.access_count AS access_count, e.created_at AS created_at, "
            "e.last_accessed_at AS last_accessed_at, e.decay_factor AS decay_factor, "
            "e.cluster_id AS cluster_id ORDER BY id",
            ids=None if ids is None else list(ids),
        )
        return [
            EngramState(
                id=r["id"],
                importance=number(r, "importance", 0.5),
                access_count=int(number(r, "access_count", 0)),
                created_at=from_stored_time(r["created_at"]),
                last_accessed_at=from_stored_time(r.get("last_accessed_at") or r["created_at"]),
                decay_factor=number(r, "decay_factor", 1.0),
                cluster_id=int(number(r, "cluster_id", NO_CLUSTER)),
            )
            for r in rows
        ]

    def count_engrams(self) -> int:
        # Recall asks at every call: FalkorDB answers from the count it keeps (a scan of the
        # user's engrams cost 4-8 ms of a recall at 10k, measured), Neo4j counts.
        rows = self.graph.q(self.graph.connection.engram_count_query())
        if not rows or rows[0]["n"] is None:
            rows = self.graph.q(ENGRAM_COUNT)
        return int(rows[0]["n"])

    def latest_of_source(self, source: str, limit: int) -> list[str]:
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) WHERE e.source = $source "
            "RETURN e.id AS id ORDER BY e.created_at DESC, id DESC LIMIT $limit",
            source=source,
            limit=int(limit),
        )
        return [row["id"] for row in rows]

    def uncued_engram_ids(self) -> list[str]:
        rows = self.graph.q(
            "MATCH (e:Engram {user: $user}) OPTIONAL MATCH (e)-[:EncodedBy]->(c:Cue) "
            "WITH e, count(c) AS n WHERE n = 0 RETURN e.id AS id ORDER BY id"
        )
        return [row["id"] for row in rows]

    # -- search and maintenance -----------------------------------------------------------------
    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        # The store pipeline asks at every store (a shared database's indexes may change under
        # it): when they exist, skip counting the user's engrams (a scan at 100k).
        state = self.search.indexes()
        if all(state.values()):
            return {"vector_index": state["vector"], "fulltext_index": state["fulltext"]}
        return self.search.ensure_indexes(threshold, self.count_engrams())

    def stats(self) -> StoreStats:
        engrams = self.graph.q(
            "MATCH (e:Engram {user: $user}) RETURN count(e) AS n, "
            "count(DISTINCT CASE WHEN e.cluster_id <> -1 THEN e.cluster_id END) AS clusters"
        )[0]
        cues = self.graph.q("MATCH (c:Cue {user: $user}) RETURN count(c) AS n")[0]["n"]
        links = self.graph.q(
            "MATCH (:Engram {user: $user})-[r:EncodedBy]->(:Cue {user: $user}) RETURN count(r) AS n"
        )[0]["n"]
        associations = self.graph.q(
            "MATCH (:Engram {user: $user})-[r:AssociatedWith]->(:Engram {user: $user}) RETURN count(r) AS n"
        )[0]["n"]
        indexes = self.search.indexes(refresh=True)
        return StoreStats(
            engrams=int(engrams["n"]),
            cues=int(cues),
            associations=int(associations),
            cue_links=int(links),
            clusters=int(engrams["clusters"]),
            vector_index=indexes["vector"],
            fulltext_index=indexes["fulltext"],
            backend=self.backend,
            location=self.location,
            extra={"isolation": self.isolation, "user": self.user, "dims": self.dims},
        )

    def export_records(self) -> Iterator[dict[str, Any]]:
        return export_records(self.graph, self.reads)


__all__ = ["CypherGraphStore", "from_stored_time", "to_stored_time"]
