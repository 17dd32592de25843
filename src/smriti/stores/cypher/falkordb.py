"""FalkorDB backend: the shared openCypher store over the Redis protocol.

Isolation (``FALKOR_ISOLATION``):

* ``tenant`` (default): every user shares the graph ``FALKOR_GRAPH``; each node carries
  a ``user`` property that every query filters by (see :mod:`smriti.stores.cypher`).
* ``graph``: each user gets the graph ``{user}_smriti``; the ``user`` property is kept too.

Connect with ``FALKOR_ADDR`` (``host:port``, or a ``falkor://``/``redis://``/``unix://`` URL)
and ``FALKOR_PASSWORD``, or hand :func:`open_falkordb` an existing client, for example
an embedded server from falkordblite (``from redislite.falkordb_client import FalkorDB``).

What FalkorDB does that the code below accounts for (measured with falkordb 1.8 /
falkordblite 0.11):

* ``db.idx.vector.queryNodes`` returns the cosine *distance* (0 = same direction, 2 =
  opposite), computed in float32; similarity = 1 - distance. A zero query vector yields NaN.
* Vectors of another dimension are stored silently but never indexed, so the store
  refuses them up front (EmbeddingMismatchError).
* Doubles come back with 15 significant digits (hence ISO-string timestamps).
* A string parameter containing NUL cannot be parsed by the server: refused with ValueError.
* Creating an index or constraint that exists is an error, not a no-op; the full-text
  index applies English stemming and stop words and returns every match (no limit).
* ``EXISTS { ... }`` subqueries are not supported; the shared queries avoid them.
* A new index (and the label's whole index, when a field is added to it) fills in the
  background: ``db.indexes()`` says ``[Indexing] 78/20000: UNDER CONSTRUCTION`` and queries
  see only the nodes indexed so far. An index counts as present once OPERATIONAL, and
  ``ensure_indexes`` waits for that, as Neo4j's ``db.awaitIndex`` does.
* Setting *any* property of a node re-inserts its vector into the HNSW index (10 engrams of
  5k: 80 ms with the vector on them, 0.4 ms without; a decay pass over 10k took 192 s). So
  each engram's embedding lives on a node of its own, ``(:EngramVector {user, id,
  embedding})``, found by (user, id) through the range index, and the vector index is on that
  label: reinforcing, decaying or clustering an engram no longer touches its vector. Graphs
  written with the embedding on the Engram are moved at open (migration
  ``0002_engram_vectors_apart``).
* The client parses a returned vector value by value (3.4 ms for 1,536 floats), so recall
  asks for ``vec.cosineDistance`` with the query instead of the embeddings (cosine_to_query).
* Counting a user's engrams walks the (user) index: 4-8 ms at 10k, asked twice per recall.
  Each user's count is kept on a node of its own, ``(:EngramTally {user, engrams})``, changed
  by the very query that creates or deletes engrams (engram_tally). FalkorDB runs a graph's
  write queries one at a time, each atomically, so every process sharing the graph reads the
  same count. Migration ``0003_engram_tally`` counts them at every open (a graph written by an
  older Smriti, which kept no count, is counted right; and such a Smriti then refuses the
  graph, which names a migration it does not know, instead of letting the count drift). The
  tally is not a Meta row: those are exported and imported with the memories.
* A cue's engram count is its EncodedBy in-degree (``indegree``), not a walk of its edges.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from smriti.stores.base import StoreError, validate_user_name
from smriti.stores.cypher.connection import (
    WRITE_CLAUSE,
    CypherConnection,
    EmbeddingJoin,
    Statement,
    UserGraph,
)
from smriti.stores.cypher.falkor_exec import Durability, NotApplied, not_applied, retrying, run_transaction
from smriti.stores.cypher.falkor_params import Vector32, params_header, refuse_nul
from smriti.stores.cypher.falkor_schema import ensure_schema
from smriti.stores.cypher.store import CypherGraphStore
from smriti.stores.migrations import Migration
from smriti.stores.search import SEARCHED_FIELDS

if TYPE_CHECKING:
    from smriti.config import Settings

log = logging.getLogger(__name__)

GRAPH_SUFFIX = "_smriti"
INDEX_WAIT_SECONDS = 300
# The label of the nodes holding the engrams' embeddings (see the module docstring).
VECTOR_LABEL = "EngramVector"
# The label of the node keeping each user's engram count (see the module docstring).
TALLY_LABEL = "EngramTally"
# Engrams whose embeddings one migration query moves (a bounded write: the server is shared).
MOVE_BATCH = 500
# Labels and properties of the exact-match indexes (constants), and the unique keys they back.
# Engram.source: a store with a source asks for the source's latest memories (latest_of_source),
# which walked every engram of the user without it (5.5 ms at 10k; 0.1 ms with it, measured).
_RANGE_INDEXES = (
    ("Engram", ("user", "id", "source")),
    (VECTOR_LABEL, ("user", "id")),
    ("Cue", ("user", "name", "id")),
    ("Meta", ("user", "key")),
    (TALLY_LABEL, ("user",)),
)
# RediSearch, under FalkorDB's full-text index, splits words at spaces, tabs and punctuation but
# not at other whitespace (measured: "alpha\nzebra" indexes one token, found by neither word;
# likewise \r, \v and no-break spaces). The index therefore covers one derived property, the
# searched fields (stores.search.text_of's) with every such character made a space, kept by
# each write that touches them (searchable_text). A graph indexed before it existed (content,
# summary, facts indexed as such) reads as not indexed until ensure_indexes rebuilds it.
SEARCH_TEXT = "search_text"
_FULLTEXT_FIELDS = (SEARCH_TEXT,)
_UNSPLIT_SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace() and c not in " \t")
# Edge property indexes: RelatesTo by the engram that stated it (relations_of, forget).
_EDGE_INDEXES = (("RelatesTo", "engram_id"),)
# The edge types an import writes and checks for (FalkorDBStore.bulk_import).
_EDGE_TYPES = ("EncodedBy", "AssociatedWith", "CoOccurs", "RelatesTo")
_UNIQUE_KEYS = (
    ("Engram", ("user", "id")),
    (VECTOR_LABEL, ("user", "id")),
    ("Cue", ("user", "name")),
    ("Meta", ("user", "key")),
    (TALLY_LABEL, ("user",)),
)


def search_text_expression(var: str) -> str:
    """Cypher for the derived search text of engram ``var`` (raw characters in the literals:
    FalkorDB reads no \\u escapes there)."""
    joined = " + ' ' + ".join(f"coalesce({var}.{name}, '')" for name in SEARCHED_FIELDS)
    spaces = ", ".join(f"'{c}'" for c in _UNSPLIT_SPACES)
    return f"reduce(t = {joined}, c IN [{spaces}] | replace(t, c, ' '))"


def graph_name_for(settings: Settings, user: str) -> str:
    """The graph holding ``user``'s memories under ``settings.falkor_isolation``."""
    if settings.falkor_isolation == "graph":
        return f"{validate_user_name(user)}{GRAPH_SUFFIX}"
    if not settings.falkor_graph.strip():
        raise StoreError("FALKOR_GRAPH is empty: name the shared graph of FALKOR_ISOLATION=tenant")
    return settings.falkor_graph


def _connect(settings: Settings) -> tuple[Any, str]:
    """A ``falkordb.FalkorDB`` client for FALKOR_ADDR and a printable address (no password)."""
    try:
        import falkordb
    except ImportError as error:  # pragma: no cover - the extra is installed in tests
        raise StoreError(
            "DB_TYPE=falkordb needs the falkordb client: pip install 'smriti-graph[falkordb]'"
        ) from error
    from redis.exceptions import RedisError

    addr = settings.falkor_addr.strip()
    password = settings.falkor_password.get_secret_value() if settings.falkor_password else None
    try:
        if "://" in addr:
            kwargs = {"password": password} if password else {}
            return falkordb.FalkorDB.from_url(addr, **kwargs), addr.split("@")[-1]
        nodes = [_host_port(part) for part in addr.split(",") if part.strip()]
        if not nodes:
            raise StoreError(f"FALKOR_ADDR={addr!r} is not host:port (e.g. localhost:6379)")
        return _first_answering(falkordb, nodes, password), addr
    except (RedisError, OSError, ValueError) as error:
        raise StoreError(f"cannot reach FalkorDB at FALKOR_ADDR={addr!r}: {error}") from error


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.strip().rpartition(":")
    host = host.strip("[]")  # "[::1]:6379"
    if not host or not port.isdigit():
        raise StoreError(f"FALKOR_ADDR part {text.strip()!r} is not host:port (e.g. localhost:6379)")
    return host, int(port)


def _first_answering(falkordb: Any, nodes: list[tuple[str, int]], password: str | None) -> Any:
    """A client of the first of ``nodes`` that answers. The client talks to the server while
    it is constructed (its sentinel and cluster probe) and becomes a cluster client when the
    server is a Redis Cluster node; every node listed is then a startup node, so a client can
    start, and find the cluster again, while some of them are down (docs/cluster.md)."""
    from redis.cluster import ClusterNode
    from redis.exceptions import RedisError

    startup = [ClusterNode(host, port) for host, port in nodes] if len(nodes) > 1 else None
    failure: Exception | None = None
    for host, port in nodes:
        try:
            return falkordb.FalkorDB(
                host=host, port=port, password=password, socket_connect_timeout=10, startup_nodes=startup
            )
        except (RedisError, OSError) as error:
            failure = error
    assert failure is not None
    raise failure


def read_embedding_meta(settings: Settings, user: str) -> dict[str, str] | None:
    """The embedding model and dimension ``user``'s graph records, read without opening the store
    (a read-only query: nothing is created), so ``EMBEDDING_PROVIDER=auto`` can keep an existing
    graph on its embedder and give a new one the local semantic model, as on SQLite.

    None when the graph does not exist or records nothing yet (a new store).

    Raises:
        StoreError: FalkorDB cannot be reached (or the query fails).
    """
    from redis.exceptions import RedisError, ResponseError

    graph = graph_name_for(settings, validate_user_name(user))
    client, address = _connect(settings)
    try:
        result = client.select_graph(graph).ro_query(
            "MATCH (m:Meta {user: $user}) WHERE m.key IN ['embedding_model', 'embedding_dims'] "
            "RETURN m.key, m.value",
            {"user": user},
        )
    except ResponseError as error:
        if "empty key" in str(error):  # no such graph yet: a new store
            return None
        raise StoreError(f"FalkorDB at {address} could not be read: {error}") from error
    except RedisError as error:
        raise StoreError(f"FalkorDB at {address} is unreachable: {error}") from error
    finally:
        with contextlib.suppress(Exception):
            client.connection.close()
    return {str(key): str(value) for key, value in result.result_set} or None


class FalkorDBConnection(CypherConnection):
    """The :class:`CypherConnection` of one FalkorDB graph.

    Args:
        client: a ``falkordb.FalkorDB`` (or falkordblite) client.
        graph_name: the FalkorDB graph (a Redis key) to query.
        location: where the graph lives, for messages (never with a password).
        owns_client: close the client's connection in :meth:`close`.
    """

    backend = "falkordb"

    def __init__(
        self,
        client: Any,
        graph_name: str,
        *,
        location: str,
        owns_client: bool = False,
        durability: Durability | None = None,
    ) -> None:
        self.client = client
        self.graph_name = graph_name
        self.location = location
        self.durability = durability or Durability()
        self._graph = client.select_graph(graph_name)
        self._owns_client = owns_client
        self._local = threading.local()  # the calling thread's failover window (its deadline)

    # -- hooks --------------------------------------------------------------------------------
    @contextmanager
    def failover_window(self) -> Iterator[None]:
        """Every call of the calling thread inside shares one deadline, FALKOR_FAILOVER_SECONDS
        from now, for its retries while the server or shard has no primary (a store: its reads
        and its write batch; see falkor_exec). Nested windows join the outer one."""
        if getattr(self._local, "deadline", None) is not None:
            yield
            return
        self._local.deadline = time.monotonic() + self.durability.failover_seconds
        try:
            yield
        finally:
            self._local.deadline = None

    def _deadline(self) -> float:
        """The open window's deadline, or FALKOR_FAILOVER_SECONDS from now for a lone call."""
        deadline: float | None = getattr(self._local, "deadline", None)
        return deadline if deadline is not None else time.monotonic() + self.durability.failover_seconds

    def run(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import RedisError, TimeoutError

        header = params_header(params) if params else ""
        if header is None:  # a value the fast form cannot carry: the client's own encoding
            refuse_nul(params or {})

        def once() -> Any:
            if header is None:
                return self._graph.query(query, dict(params or {}))
            return self._graph.query(header + query)

        read = not WRITE_CLAUSE.search(query)
        try:
            result = retrying(
                self.client.connection, once, deadline=self._deadline(), read=read, what="query"
            )
        except (RedisConnectionError, TimeoutError, OSError, NotApplied) as error:
            raise StoreError(f"FalkorDB at {self.location} is unreachable: {error}") from error
        except RedisError as error:
            if not_applied(error, read=True):  # no primary until the deadline
                raise StoreError(f"FalkorDB at {self.location} is unreachable: {error}") from error
            raise StoreError(f"FalkorDB query failed on graph {self.graph_name!r}: {error}") from error
        names = [column[1] for column in result.header]
        return [dict(zip(names, row, strict=True)) for row in result.result_set]

    def run_atomically(self, statements: Sequence[Statement]) -> None:
        """One MULTI/EXEC of the statements' GRAPH.QUERY commands (``falkor_exec``), then WAIT
        for FALKOR_WAIT_REPLICAS replicas when set."""
        commands = []
        for query, params in statements:
            header = params_header(params) if params else ""
            if header is None:  # a value the fast form cannot carry: the client's own encoding
                refuse_nul(params)
                header = self._graph._build_params_header(dict(params))
            commands.append(("GRAPH.QUERY", self.graph_name, header + query, "--compact"))
        try:
            run_transaction(
                self.client.connection, self.graph_name, commands, self.durability, self._deadline()
            )
        except StoreError as error:
            raise StoreError(f"{error} ({self.location})") from error

    def close(self) -> None:
        if self._owns_client:
            try:
                self.client.connection.close()
            except Exception:  # closing a dead connection must not mask the caller's error
                log.debug("closing the FalkorDB connection failed", exc_info=True)

    def vector_of(self, expression: str) -> str:
        return f"vecf32({expression})"

    def vector_param(self, values: Sequence[float] | None) -> Any:
        return None if values is None else Vector32(values)

    def searchable_text(self, var: str) -> str:
        return f"WITH {var} SET {var}.{SEARCH_TEXT} = {search_text_expression(var)}"

    def embedding_join(self, engram: str) -> EmbeddingJoin:
        clause = f"OPTIONAL MATCH (v:{VECTOR_LABEL} {{user: {engram}.user, id: {engram}.id}})"
        return EmbeddingJoin(clause, "v.embedding", "v")

    def embedding_create(self, engram: str, value: str) -> str:
        return (
            f"CREATE (:{VECTOR_LABEL} {{user: {engram}.user, id: {engram}.id, "
            f"embedding: {self.vector_of(value)}}})"
        )

    def node_id(self, var: str) -> str | None:
        return f"id({var})"

    def engram_tally(self, delta: str) -> str:
        return (
            f"OPTIONAL MATCH (tally:{TALLY_LABEL} {{user: $user}}) "
            f"SET tally.engrams = tally.engrams + ({delta})"
        )

    def engram_count_query(self) -> str:
        return f"MATCH (t:{TALLY_LABEL} {{user: $user}}) RETURN t.engrams AS n"

    def encoded_count(self, cue: str) -> str | None:
        return f"indegree({cue}, 'EncodedBy')"

    def cosine_to_query(self, vector: str) -> str | None:
        # vec.cosineDistance is 1 - cosine in float32, NaN for a zero vector (0 here, as recall's
        # own cosine), null for a null one; the list binds the distance once.
        distance = f"vec.cosineDistance({vector}, {self.vector_literal('q')})"
        return f"[d IN [{distance}] | CASE WHEN d IS NULL THEN null WHEN d = d THEN 1 - d ELSE 0.0 END][0]"

    def index_state(self) -> dict[str, bool]:
        # An index still filling answers with the nodes indexed so far: count it only once
        # the label's index is OPERATIONAL, so search falls back to brute force meanwhile.
        indexes = self._label_indexes()
        vectors, vectors_ready = indexes.get(VECTOR_LABEL, ({}, False))
        texts, texts_ready = indexes.get("Engram", ({}, False))
        return {
            "vector": vectors_ready and "VECTOR" in vectors.get("embedding", ()),
            "fulltext": texts_ready and all("FULLTEXT" in texts.get(field, ()) for field in _FULLTEXT_FIELDS),
        }

    def index_create(self, kind: str, dims: int) -> None:
        if kind == "vector":
            self._create_vector_index(dims)
            self._await_index(VECTOR_LABEL)
            return
        types, _ = self._label_indexes().get("Engram", ({}, False))
        if any("FULLTEXT" in kinds and name not in _FULLTEXT_FIELDS for name, kinds in types.items()):
            # Indexed before the derived text: the graph's whole full-text index is rebuilt
            # (every user's memories, in tenant isolation), after filling the text in.
            self.run("MATCH (e:Engram) WHERE e.search_text IS NULL " + self.searchable_text("e"))
            self._schema_call("CALL db.idx.fulltext.drop('Engram')")
            types = {name: kinds for name, kinds in types.items() if "FULLTEXT" not in kinds}
        # One call per missing field: naming an already indexed field fails the whole call.
        for field in _FULLTEXT_FIELDS:
            if "FULLTEXT" not in types.get(field, ()):
                self._schema_call(f"CALL db.idx.fulltext.createNodeIndex('Engram', '{field}')")
        self._await_index("Engram")

    def _create_vector_index(self, dims: int) -> None:
        query = (
            f"CREATE VECTOR INDEX FOR (v:{VECTOR_LABEL}) ON (v.embedding) "
            "OPTIONS {dimension: $dims, similarityFunction: 'cosine'}"
        )
        self._schema_call(query, {"dims": dims})

    def index_vector_call(self) -> tuple[str, Callable[[float], float]]:
        call = (
            f"CALL db.idx.vector.queryNodes('{VECTOR_LABEL}', 'embedding', $k, vecf32($q)) YIELD node, score "
            "OPTIONAL MATCH (e:Engram {user: node.user, id: node.id})"
        )
        return call, lambda distance: 1.0 - distance

    def index_fulltext_call(self, terms: list[str]) -> tuple[str, str]:
        # RediSearch syntax: terms are plain words (query_terms keeps only \w+), "|" is OR.
        return "CALL db.idx.fulltext.queryNodes('Engram', $q) YIELD node, score", " | ".join(terms)

    # -- schema -------------------------------------------------------------------------------
    def _index_types(self) -> dict[str, dict[str, list[str]]]:
        """label -> property -> index kinds ("RANGE", "VECTOR", "FULLTEXT")."""
        rows = self.run("CALL db.indexes() YIELD label, types RETURN label, types")
        return {row["label"]: {prop: list(kinds) for prop, kinds in row["types"].items()} for row in rows}

    def _label_indexes(self) -> dict[str, tuple[dict[str, list[str]], bool]]:
        """label -> (property -> index kinds, whether the label's index is OPERATIONAL, not filling).

        While a field is being added, FalkorDB lists a label twice: the index being built (with
        the new field, UNDER CONSTRUCTION) and the one still answering (OPERATIONAL, without
        it). The rows are merged: the fields of both, operational only once none is filling
        (reading the second row alone once made an import end while its indexes still filled).
        """
        rows = self.run("CALL db.indexes() YIELD label, types, status RETURN label, types, status")
        found: dict[str, tuple[dict[str, list[str]], bool]] = {}
        for row in rows:
            types, operational = found.get(row["label"], ({}, True))
            for prop, kinds in row["types"].items():
                types[prop] = sorted({*types.get(prop, ()), *kinds})
            found[row["label"]] = (types, operational and "UNDER CONSTRUCTION" not in str(row["status"]))
        return found

    def _await_index(self, label: str) -> None:
        """Wait until ``label``'s index has taken every node: FalkorDB fills a new index (and
        rebuilds the label's index when a field is added) in the background, and a query
        meanwhile sees only the nodes indexed so far (a vector search under load once
        returned fewer than k hits that way).

        Past INDEX_WAIT_SECONDS it is left to fill, with a warning: what was written stays
        written, and searches are exact (brute force, then the keyword scan) until the index
        answers (an import of 100k once failed at its very end here, at load 9, every memory in).
        """
        deadline = time.monotonic() + INDEX_WAIT_SECONDS
        while not self._label_indexes().get(label, ({}, False))[1]:
            if time.monotonic() > deadline:
                log.warning(
                    "FalkorDB's %s index on %s is still filling after %s s: searched without it "
                    "until it is ready",
                    label,
                    self.location,
                    INDEX_WAIT_SECONDS,
                )
                return
            time.sleep(0.02)

    def _schema_call(self, query: str, params: Mapping[str, Any] | None = None) -> None:
        """Run DDL, treating "already exists" (or, for a drop, "no such index") as success:
        another process may have won."""
        try:
            self.run(query, params)
        except StoreError as error:
            if not any(said in str(error) for said in ("already indexed", "already exists", "no such index")):
                raise

    def migrations(self, graph: UserGraph) -> list[Migration]:
        return [
            Migration("0002_engram_vectors_apart", lambda: self._move_vectors(graph)),
            Migration("0003_engram_tally", lambda: self._count_engrams(graph), repeatable=True),
        ]

    def _count_engrams(self, graph: UserGraph) -> list[str]:
        """Set the user's kept engram count to a count of them: one write query, so no other
        write of the graph runs between the count and the set (see the module docstring)."""
        count = "MATCH (e:Engram {user: $user}) WITH count(e) AS n"
        # A read first (one snapshot): most opens find the count right and write nothing.
        tally = f"(t:{TALLY_LABEL} {{user: $user}})"
        rows = graph.q(f"{count} OPTIONAL MATCH {tally} RETURN n, t.engrams AS kept")
        kept = rows[0]["kept"]
        if kept == rows[0]["n"]:
            return []
        rows = graph.q(f"{count} MERGE {tally} SET t.engrams = n RETURN n")
        return [f"counted {rows[0]['n']} engrams (the kept count was {kept})"]

    def _move_vectors(self, graph: UserGraph) -> list[str]:
        """Move the user's embeddings from their Engram nodes onto EngramVector nodes (a graph
        written before they were kept apart); idempotent, in bounded batches.

        The old vector index on Engram goes first (every engram whose embedding is removed
        would be re-indexed otherwise), for every user of the graph: the others' embeddings
        are moved when their stores open, before anything searches them. It is created on
        EngramVector and fills in the background (search is brute force until it is ready).
        """
        changes = []
        indexes = self._label_indexes()
        had_index = "VECTOR" in indexes.get("Engram", ({}, False))[0].get("embedding", ())
        if had_index:
            self._schema_call("DROP VECTOR INDEX FOR (e:Engram) ON (e.embedding)")
            changes.append("dropped the vector index of Engram.embedding")
        moved = 0
        while True:
            rows = graph.q(
                "MATCH (e:Engram {user: $user}) WHERE e.embedding IS NOT NULL WITH e LIMIT $batch "
                f"MERGE (v:{VECTOR_LABEL} {{user: $user, id: e.id}}) SET v.embedding = e.embedding "
                "REMOVE e.embedding RETURN count(e) AS n",
                batch=MOVE_BATCH,
            )
            count = int(rows[0]["n"]) if rows else 0
            moved += count
            if count < MOVE_BATCH:
                break
        if moved:
            changes.append(f"moved {moved} embeddings onto {VECTOR_LABEL} nodes")
        if had_index and "VECTOR" not in indexes.get(VECTOR_LABEL, ({}, False))[0].get("embedding", ()):
            self._create_vector_index(graph.dims)
            changes.append(f"created the vector index of {VECTOR_LABEL}.embedding")
        return changes

    def ensure_schema(self) -> None:
        """Exact-match indexes and unique keys: once per graph, one graph at a time per server
        (falkor_schema says why: FalkorDB crashed on concurrent constraint creation)."""
        ensure_schema(self, _RANGE_INDEXES, _EDGE_INDEXES, _UNIQUE_KEYS)


class FalkorDBStore(CypherGraphStore):
    """The :class:`CypherGraphStore` of one user on one FalkorDB graph.

    Attributes:
        graph_name: the FalkorDB graph (a Redis key) holding this user's nodes.
        client: the ``falkordb.FalkorDB`` (or falkordblite) client in use.
    """

    def __init__(
        self,
        client: Any,
        graph_name: str,
        *,
        user: str,
        dims: int,
        isolation: str,
        location: str,
        owns_client: bool = False,
        durability: Durability | None = None,
    ) -> None:
        self.client = client
        self.graph_name = graph_name
        connection = FalkorDBConnection(
            client, graph_name, location=location, owns_client=owns_client, durability=durability
        )
        super().__init__(connection, user=user, dims=dims, isolation=isolation)

    @contextmanager
    def bulk_import(self, memories: int) -> Iterator[None]:
        """Before an import's edge writes: the graph knows every edge type they check for.

        FalkorDB checks "is there an edge of type T between these two nodes" ~5x slower while
        no edge of type T was ever created in the graph (95k co-occurrence rows of a first
        import: 3.0 s against 0.65 s of server time, measured; an edge created and deleted once
        is enough), which is every first import into a fresh graph. So the types are made
        known by creating and deleting one edge on the user's Meta node, in one query (nothing
        of it stays but the type's name)."""
        types = self.run("CALL db.relationshipTypes() YIELD relationshipType AS t RETURN t")
        known = {row["t"] for row in types}
        for edge_type in sorted(set(_EDGE_TYPES) - known):
            self.graph.q(
                f"MATCH (m:Meta {{user: $user}}) WITH m LIMIT 1 CREATE (m)-[r:{edge_type}]->(m) DELETE r"
            )
        with super().bulk_import(memories):
            yield


def _describe(client: Any) -> str:
    """host:port or unix socket path of a client handed in (never its password)."""
    try:
        kwargs = client.connection.connection_pool.connection_kwargs
    except AttributeError:
        return type(client).__name__
    if kwargs.get("path"):
        return f"unix:{kwargs['path']}"
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"


def open_falkordb(settings: Settings, user: str, *, client: Any = None) -> FalkorDBStore:
    """Open ``user``'s FalkorDB store.

    Args:
        settings: FALKOR_ADDR, FALKOR_PASSWORD, FALKOR_GRAPH, FALKOR_ISOLATION and EMBEDDING_DIMS.
        user: the user name (validated before anything is contacted).
        client: an existing ``falkordb.FalkorDB``-compatible client (for example a
            falkordblite embedded server); it is left open by :meth:`FalkorDBStore.close`.

    Raises:
        UnsafeUserError: the user name cannot be used safely.
        StoreError: the server cannot be reached or the schema cannot be prepared.
    """
    user = validate_user_name(user)
    graph = graph_name_for(settings, user)
    owns = client is None
    if client is None:
        client, address = _connect(settings)
        location = f"falkordb://{address}/{graph}"
    else:
        location = f"falkordb://{_describe(client)}/{graph}"
    try:
        client.connection.ping()
    except Exception as error:
        if owns:
            client.connection.close()
        raise StoreError(f"cannot reach FalkorDB at FALKOR_ADDR={settings.falkor_addr!r}: {error}") from error
    try:
        return FalkorDBStore(
            client,
            graph,
            user=user,
            dims=settings.embedding_dims,
            isolation=settings.falkor_isolation,
            location=location,
            owns_client=owns,
            durability=Durability(
                settings.falkor_wait_replicas, settings.falkor_wait_ms, settings.falkor_failover_seconds
            ),
        )
    except Exception:
        if owns:
            client.connection.close()
        raise


__all__ = [
    "GRAPH_SUFFIX",
    "FalkorDBConnection",
    "FalkorDBStore",
    "graph_name_for",
    "open_falkordb",
    "read_embedding_meta",
]
