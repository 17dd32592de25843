"""What an openCypher database supplies, and the user-scoped query runner built on it.

A database module (:mod:`.falkordb`, :mod:`.neo4j`) implements :class:`CypherConnection`:
how a query is sent, how a vector parameter is written, and the index DDL and query
procedures. Everything else of :class:`~smriti.stores.cypher.CypherGraphStore` is shared
and reaches the database only through :class:`UserGraph`, which binds ``$user`` to every
query (the tenant wall every Cypher query keeps, whatever the isolation mode).

A database without multi-statement transactions (FalkorDB) still makes a store atomic: inside
:meth:`UserGraph.batch` the writes sent through :meth:`UserGraph.write` are queued and handed
to :meth:`CypherConnection.run_atomically` together at its end (FalkorDB: one MULTI/EXEC; Neo4j:
one transaction). Reads inside a batch see the graph as it was before it, never its own writes.
"""

from __future__ import annotations

import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, NamedTuple

from smriti.stores.base import EmbeddingMismatchError, StoreError
from smriti.stores.cypher.nodes import NodeIds
from smriti.stores.cypher.rows import floats
from smriti.stores.migrations import Migration

# The user's engrams, counted (what a database that keeps no count answers with).
ENGRAM_COUNT = "MATCH (e:Engram {user: $user}) RETURN count(e) AS n"
# A clause that writes (the query texts are constants of this package, keywords in capitals).
WRITE_CLAUSE = re.compile(r"\b(?:CREATE|MERGE|SET|DELETE|REMOVE)\b")

# One queued write: its query and its parameters ($user bound).
Statement = tuple[str, dict[str, Any]]


class EmbeddingJoin(NamedTuple):
    """Where a query finds the embedding of an engram it has bound (:meth:`CypherConnection.embedding_join`).

    Attributes:
        clause: Cypher to put after the MATCH that binds the engram ("" when the embedding is a
            property of the engram); it never drops a row (an engram without one comes back).
        expression: the embedding there (null when the engram has none).
        node: the variable the clause binds to a node holding the embedding apart from the
            engram (deleting the engram must delete it too), or None.
    """

    clause: str
    expression: str
    node: str | None


class CypherConnection(ABC):
    """The hooks of one openCypher database.

    Attributes:
        backend: short backend name ("falkordb", "neo4j").
        location: where the data lives, for stats and logs (never with a password).
    """

    backend: str
    location: str

    @abstractmethod
    def run(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Run one parameterised query and return its rows as dicts keyed by column name."""

    @abstractmethod
    def run_atomically(self, statements: Sequence[Statement]) -> None:
        """Run the write queries in order so that all of them take effect or none does, and
        nothing else runs between them (a write batch: see :meth:`UserGraph.batch`).

        Raises:
            StoreError: the database failed or could not be reached; when the batch's fate is
                unknown (the connection dropped after it was sent) the message says so.
        """

    def failover_window(self) -> AbstractContextManager[None]:
        """A span of calls (a store: its reads and its write batch) that share one deadline for
        retrying while the database has no primary; none by default (the driver retries)."""
        return nullcontext()

    @abstractmethod
    def close(self) -> None:
        """Release what this connection owns (a client handed in stays open)."""

    @abstractmethod
    def ensure_schema(self) -> None:
        """Create the exact-match indexes and unique keys; idempotent."""

    def vector_of(self, expression: str) -> str:
        """Cypher expression turning ``expression`` (a list of floats or null) into a vector."""
        return expression

    def vector_literal(self, param: str) -> str:
        """:meth:`vector_of` parameter ``param``."""
        return self.vector_of(f"${param}")

    def vector_param(self, values: Sequence[float] | None) -> Any:
        """A vector (a checked sequence of floats, or None) as this database's query parameter value."""
        return floats(values)

    # -- where an engram's embedding lives -------------------------------------------------------
    # By default on the Engram node itself (Neo4j). FalkorDB keeps it on a node of its own
    # (falkordb.py says why) and overrides these hooks; the shared store's queries read, write
    # and delete embeddings only through them.
    def embedding_join(self, engram: str) -> EmbeddingJoin:
        """How a query reads the embedding of the engram bound to ``engram`` (see EmbeddingJoin)."""
        return EmbeddingJoin("", f"{engram}.embedding", None)

    def embedding_create(self, engram: str, value: str) -> str:
        """A clause storing the vector expression ``value`` (a list of floats or null) as the
        embedding of the engram ``engram``, just created."""
        return f"SET {engram}.embedding = {self.vector_of(value)}"

    def cosine_to_query(self, vector: str) -> str | None:
        """Cypher for the cosine similarity of the vector expression ``vector`` with the vector
        parameter ``$q``, computed by the database (0 when either is zero, null when ``vector``
        is), or None: the database sends vectors back and the caller computes it."""
        return None

    def node_id(self, var: str) -> str | None:
        """Cypher for the database's own id of the node bound to ``var``, one a query can seek
        cheaply (``MATCH (n) WHERE <id> = $x``), or None: nodes are found by their keys only
        (Neo4j's ``id()`` is deprecated). An import uses it (see :mod:`.nodes`)."""
        return None

    # -- counts the database keeps instead of counting ----------------------------------------------
    # By default counted when asked (Neo4j). FalkorDB keeps the user's engram count on a node,
    # changed by the query that creates or deletes engrams, and reads a cue's engrams from its
    # degree (falkordb.py says why).
    def engram_tally(self, delta: str) -> str:
        """A clause adding the integer ``delta`` (an expression over variables bound before it)
        to the user's kept engram count, in the query that created or deleted them; "" where
        the count is not kept. The clause keeps every variable bound before it."""
        return ""

    def engram_count_query(self) -> str:
        """A query answering the user's engram count as ``n`` (no row: count them instead)."""
        return ENGRAM_COUNT

    def encoded_count(self, cue: str) -> str | None:
        """Cypher for how many engrams encode the cue bound to ``cue`` (its EncodedBy edges), or
        None: counted by matching them."""
        return None

    def searchable_text(self, var: str) -> str:
        """A clause that runs after the engram ``var``'s content, summary or facts were written,
        keeping a derived property keyword search reads; none by default (Neo4j's full-text
        index reads the fields themselves)."""
        return ""

    @abstractmethod
    def index_state(self) -> dict[str, bool]:
        """Which of the ``vector`` and ``fulltext`` indexes exist and answer queries."""

    @abstractmethod
    def index_create(self, kind: str, dims: int) -> None:
        """Create the ``vector`` (of ``dims``) or ``fulltext`` index, idempotently."""

    @abstractmethod
    def index_vector_call(self) -> tuple[str, Callable[[float], float]]:
        """(``CALL ...`` using ``$k`` and ``$q`` that binds ``e``, the engram of each hit (null
        if a hit has none), and its ``score``; score -> cosine function)."""

    def migrations(self, graph: UserGraph) -> list[Migration]:
        """The database's own schema migrations of ``graph``'s user, after the shared ones."""
        return []

    @abstractmethod
    def index_fulltext_call(self, terms: list[str]) -> tuple[str, str]:
        """(``CALL ... YIELD node, score`` using ``$q``, the value of ``$q`` for these terms)."""


class UserGraph:
    """One user's view of a :class:`CypherConnection`: queries with ``$user`` bound.

    Args:
        connection: the database hooks.
        user: the validated user name.
        dims: the embedding dimension; embeddings of another length are refused.
    """

    def __init__(self, connection: CypherConnection, user: str, dims: int) -> None:
        self.connection = connection
        self.user = user
        self.dims = dims
        # The node ids an import has seen (see .nodes): set only around an import, and only on
        # a database with seekable node ids (CypherConnection.node_id); None otherwise.
        self.nodes: NodeIds | None = None
        # The writes queued by the calling thread's open batch (another thread's reads and
        # writes, a recall's reinforcement, go straight to the database).
        self._local = threading.local()

    @property
    def backend(self) -> str:
        return self.connection.backend

    def q(self, query: str, **params: Any) -> list[dict[str, Any]]:
        """Run ``query`` with ``$user`` always bound to this user.

        Raises:
            StoreError: ``query`` writes and a batch is open: a write whose rows are needed
                cannot wait for the batch's end (an internal error, caught by the tests).
        """
        if self.batching and WRITE_CLAUSE.search(query):
            raise StoreError("internal error: a write that returns rows was run inside a write batch")
        params["user"] = self.user
        return self.connection.run(query, params)

    def write(self, query: str, **params: Any) -> None:
        """Run the write ``query`` (``$user`` bound) now, or at the end of the open batch."""
        params["user"] = self.user
        queued: list[Statement] | None = getattr(self._local, "queued", None)
        if queued is None:
            self.connection.run(query, params)
        else:
            queued.append((query, params))

    @property
    def batching(self) -> bool:
        """True while the calling thread has a batch open."""
        return getattr(self._local, "queued", None) is not None

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Queue the calling thread's :meth:`write` calls and run them atomically at the end
        (:meth:`CypherConnection.run_atomically`); an error inside drops them all. Nested
        batches join the outer one."""
        if self.batching:
            yield
            return
        # The batch's reads and its writes share one failover deadline (falkor_exec).
        with self.connection.failover_window():
            self._local.queued = []
            try:
                yield
                queued: list[Statement] = self._local.queued
            finally:
                self._local.queued = None
            if queued:
                self.connection.run_atomically(queued)

    def vector_literal(self, param: str) -> str:
        return self.connection.vector_literal(param)

    def vector_of(self, expression: str) -> str:
        return self.connection.vector_of(expression)

    def vector_param(self, embedding: Sequence[float] | None) -> Any:
        """The embedding, checked (:meth:`check_embedding`), as the value of a vector parameter
        (see vector_of). The database's hook reads the sequence as it is (an import's
        ``array("d")``: turned into 1,536 Python floats first, 1.4 s of a 10k import, measured)."""
        self._check_dims(embedding)
        return self.connection.vector_param(embedding)

    def check_embedding(self, embedding: Sequence[float] | None) -> list[float] | None:
        """The embedding as plain floats (None stays None).

        Raises:
            EmbeddingMismatchError: it has another dimension than the store.
        """
        self._check_dims(embedding)
        return floats(embedding)

    def _check_dims(self, embedding: Sequence[float] | None) -> None:
        if embedding is not None and len(embedding) != self.dims:
            raise EmbeddingMismatchError(
                f"an embedding of {len(embedding)} dimensions cannot go into this {self.backend} store of "
                f"{self.dims} (EMBEDDING_DIMS); use the embedding model the store was written with"
            )
