"""Neo4j backend: the shared openCypher store over Bolt (official ``neo4j`` driver 5.x/6.x).

Isolation (``NEO4J_ISOLATION``):

* ``tenant`` (default): every user shares the database ``NEO4J_DATABASE``; each node
  carries a ``user`` property that every query filters by (see :mod:`smriti.stores.cypher`).
* ``database``: each user gets the database ``smriti-{user}``, created on first use on
  the ``system`` database (Neo4j Enterprise). Neo4j folds database names to lower case
  and allows only ``[a-z0-9.-]``, so a user name that cannot map one-to-one onto such a
  name (capitals, ``_``, a trailing ``.``/``-``, too long) is refused rather than merged
  with somebody else's database.

Vector similarity: ``db.index.vector.queryNodes`` returns (1 + cosine) / 2 for a cosine
index; the store converts back to cosine. Full-text queries are built from the user's
words, lower-cased (so AND/OR/NOT are never operators) and Lucene-escaped.

Transient failures (``TransientError``, ``SessionExpired``, ``ServiceUnavailable``) are
retried a few times with tenacity, the driver's own retry being switched off so there is
one policy; a commit whose outcome is unknown (``IncompleteCommit``) is never retried. A
server that is down at start gives one :class:`StoreError` naming NEO4J_URI.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential

from smriti.stores.base import StoreError, UnsafeUserError, validate_user_name
from smriti.stores.cypher.connection import CypherConnection, Statement
from smriti.stores.cypher.store import CypherGraphStore

if TYPE_CHECKING:
    from smriti.config import Settings

log = logging.getLogger(__name__)

DATABASE_PREFIX = "smriti-"
VECTOR_INDEX = "engram_embedding"
FULLTEXT_INDEX = "engram_content"
INDEX_WAIT_SECONDS = 300
_DATABASE_NAME = re.compile(r"^[a-z][a-z0-9.-]{1,61}[a-z0-9]$")
_LUCENE_SPECIAL = re.compile(r'([+\-!(){}\[\]^"~*?:\\/&|])')
_SCHEMA = (
    "CREATE CONSTRAINT smriti_engram_key IF NOT EXISTS FOR (e:Engram) REQUIRE (e.user, e.id) IS UNIQUE",
    "CREATE CONSTRAINT smriti_cue_key IF NOT EXISTS FOR (c:Cue) REQUIRE (c.user, c.name) IS UNIQUE",
    "CREATE CONSTRAINT smriti_meta_key IF NOT EXISTS FOR (m:Meta) REQUIRE (m.user, m.key) IS UNIQUE",
    "CREATE INDEX smriti_engram_user IF NOT EXISTS FOR (e:Engram) ON (e.user)",
    "CREATE INDEX smriti_cue_user IF NOT EXISTS FOR (c:Cue) ON (c.user)",
    "CREATE INDEX smriti_cue_id IF NOT EXISTS FOR (c:Cue) ON (c.user, c.id)",
    "CREATE INDEX smriti_relates_engram IF NOT EXISTS FOR ()-[r:RelatesTo]-() ON (r.engram_id)",
)


def database_name_for(user: str) -> str:
    """The Neo4j database of ``user`` in ``database`` isolation: ``smriti-{user}``.

    Raises:
        UnsafeUserError: when no database name maps one-to-one onto the user name.
    """
    user = validate_user_name(user)
    name = f"{DATABASE_PREFIX}{user}"
    if user != user.lower():
        raise UnsafeUserError(
            f"user name {user!r} has capitals; Neo4j folds database names to lower case, so "
            "NEO4J_ISOLATION=database needs lower-case user names"
        )
    if not _DATABASE_NAME.match(name):
        raise UnsafeUserError(
            f"user name {user!r} cannot name a Neo4j database (letters, digits, '.', '-' only, "
            f"not ending in '.' or '-', at most {63 - len(DATABASE_PREFIX)} characters)"
        )
    return name


def escape_lucene(term: str) -> str:
    """Backslash-escape Lucene query syntax characters in ``term``."""
    return _LUCENE_SPECIAL.sub(r"\\\1", term)


def _retryable(error: BaseException) -> bool:
    from neo4j.exceptions import IncompleteCommit, ServiceUnavailable, SessionExpired, TransientError

    if isinstance(error, IncompleteCommit):
        return False  # the commit may have happened: retrying could apply a write twice
    return isinstance(error, TransientError | SessionExpired | ServiceUnavailable)


_with_retries = retry(
    retry=retry_if_exception(_retryable),
    stop=stop_after_attempt(4),
    wait=wait_exponential(multiplier=0.25, max=2.0),
    reraise=True,
)


class Neo4jConnection(CypherConnection):
    """The :class:`CypherConnection` of one Neo4j database.

    Args:
        driver: a ``neo4j.Driver``.
        database: the database to query.
        uri: NEO4J_URI, for messages.
        owns_driver: close the driver in :meth:`close`.
    """

    backend = "neo4j"

    def __init__(self, driver: Any, database: str, *, uri: str, owns_driver: bool = False) -> None:
        self.driver = driver
        self.database = database
        self.uri = uri
        self.location = f"{uri}/{database}"
        self._owns_driver = owns_driver

    def ensure_schema(self) -> None:
        for statement in _SCHEMA:
            self.run_autocommit(statement)

    # -- execution ----------------------------------------------------------------------------
    @_with_retries
    def _run_once(self, query: str, params: Mapping[str, Any], database: str) -> list[dict[str, Any]]:
        # An explicit transaction, so a connection lost during commit surfaces as
        # IncompleteCommit (not retried) instead of an ambiguous auto-commit failure.
        with self.driver.session(database=database) as session, session.begin_transaction() as tx:
            rows = tx.run(query, dict(params)).data()
            tx.commit()
            return rows

    @_with_retries
    def _run_all_once(self, statements: Sequence[Statement], database: str) -> None:
        # A write batch (UserGraph.batch): every statement in one transaction, committed once.
        with self.driver.session(database=database) as session, session.begin_transaction() as tx:
            for query, params in statements:
                tx.run(query, dict(params)).consume()
            tx.commit()

    @_with_retries
    def _autocommit_once(self, query: str, params: Mapping[str, Any], database: str) -> list[dict[str, Any]]:
        with self.driver.session(database=database) as session:
            return session.run(query, dict(params)).data()

    def _call(
        self,
        runner: Callable[..., list[dict[str, Any]]],
        query: str,
        params: Mapping[str, Any] | None,
        database: str | None = None,
    ) -> list[dict[str, Any]]:
        from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable, SessionExpired

        try:
            return runner(query, params or {}, database or self.database)
        except AuthError as error:
            raise StoreError(f"Neo4j at NEO4J_URI={self.uri} refused the credentials: {error}") from error
        except (ServiceUnavailable, SessionExpired) as error:
            raise StoreError(f"Neo4j at NEO4J_URI={self.uri} is unavailable: {error}") from error
        except (Neo4jError, DriverError) as error:
            raise StoreError(f"Neo4j query failed on database {self.database!r}: {error}") from error

    def run(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        return self._call(self._run_once, query, params)

    def run_atomically(self, statements: Sequence[Statement]) -> None:
        """The statements in one explicit transaction: all are committed, or none."""

        def runner(_query: str, _params: Mapping[str, Any], database: str) -> list[dict[str, Any]]:
            self._run_all_once(statements, database)
            return []

        self._call(runner, "", None)

    def run_autocommit(self, query: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """Schema commands (and db.awaitIndex) must run outside explicit transactions."""
        return self._call(self._autocommit_once, query, params)

    def close(self) -> None:
        if self._owns_driver:
            self.driver.close()

    # -- index hooks --------------------------------------------------------------------------
    def index_state(self) -> dict[str, bool]:
        rows = self.run_autocommit("SHOW INDEXES YIELD name, state RETURN name, state")
        online = {row["name"] for row in rows if row["state"] == "ONLINE"}
        return {"vector": VECTOR_INDEX in online, "fulltext": FULLTEXT_INDEX in online}

    def index_create(self, kind: str, dims: int) -> None:
        if kind == "vector":
            # The dimension is a validated integer setting, never user input.
            self.run_autocommit(
                f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (e:Engram) ON e.embedding "
                f"OPTIONS {{indexConfig: {{`vector.dimensions`: {int(dims)}, "
                "`vector.similarity_function`: 'cosine'}}"
            )
            name = VECTOR_INDEX
        else:
            # An index created before facts existed keeps covering content and summary only
            # (IF NOT EXISTS leaves it as is); drop it to have it rebuilt with the facts.
            self.run_autocommit(
                f"CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS "
                "FOR (e:Engram) ON EACH [e.content, e.summary, e.facts]"
            )
            name = FULLTEXT_INDEX
        # Indexes populate in the background; wait so the next query can use it.
        self.run_autocommit(
            "CALL db.awaitIndex($name, $seconds)", {"name": name, "seconds": INDEX_WAIT_SECONDS}
        )

    def index_vector_call(self) -> tuple[str, Callable[[float], float]]:
        call = (
            f"CALL db.index.vector.queryNodes('{VECTOR_INDEX}', $k, $q) YIELD node, score "
            "WITH node AS e, score"
        )
        return call, lambda score: 2.0 * score - 1.0

    def index_fulltext_call(self, terms: list[str]) -> tuple[str, str]:
        expression = " OR ".join(escape_lucene(term) for term in terms)
        return f"CALL db.index.fulltext.queryNodes('{FULLTEXT_INDEX}', $q) YIELD node, score", expression


class Neo4jStore(CypherGraphStore):
    """The :class:`CypherGraphStore` of one user on one Neo4j database.

    Attributes:
        driver: the ``neo4j.Driver`` in use.
        database: the database holding this user's nodes.
        uri: NEO4J_URI, for messages.
    """

    def __init__(
        self,
        driver: Any,
        database: str,
        *,
        uri: str,
        user: str,
        dims: int,
        isolation: str,
        owns_driver: bool = False,
    ) -> None:
        self.driver = driver
        self.database = database
        self.uri = uri
        connection = Neo4jConnection(driver, database, uri=uri, owns_driver=owns_driver)
        super().__init__(connection, user=user, dims=dims, isolation=isolation)


def _ensure_database(driver: Any, name: str, uri: str) -> None:
    """Create database ``name`` on the system database unless it exists (Enterprise only)."""
    from neo4j.exceptions import ClientError, Neo4jError

    try:
        with driver.session(database="system") as session:
            if session.run("SHOW DATABASES YIELD name WHERE name = $name RETURN name", {"name": name}).data():
                return
            log.info("creating Neo4j database %s", name)
            session.run("CREATE DATABASE $name IF NOT EXISTS WAIT", {"name": name}).consume()
    except ClientError as error:
        code = getattr(error, "code", "") or ""
        hint = " (NEO4J_ISOLATION=database needs Neo4j Enterprise)" if "Unsupported" in code else ""
        raise StoreError(
            f"cannot create Neo4j database {name!r} at NEO4J_URI={uri}{hint}: {error}"
        ) from error
    except Neo4jError as error:
        raise StoreError(f"cannot create Neo4j database {name!r} at NEO4J_URI={uri}: {error}") from error


def _connect(settings: Settings) -> Any:
    """A driver for NEO4J_URI whose connectivity has been verified, or one clear StoreError."""
    import neo4j
    from neo4j.exceptions import AuthError, ConfigurationError, DriverError, Neo4jError

    uri = settings.neo4j_uri
    password = settings.neo4j_password.get_secret_value() if settings.neo4j_password else ""
    auth = None if settings.neo4j_auth == "none" else (settings.neo4j_username, password)
    try:
        # max_transaction_retry_time=0: retries are ours (tenacity), one policy only.
        driver = neo4j.GraphDatabase.driver(
            uri, auth=auth, connection_timeout=10, max_transaction_retry_time=0
        )
    except (ConfigurationError, ValueError) as error:
        raise StoreError(f"NEO4J_URI={uri!r} is not a usable Neo4j address: {error}") from error
    try:
        driver.verify_connectivity()
    except AuthError as error:
        driver.close()
        raise StoreError(
            f"Neo4j at NEO4J_URI={uri} refused the credentials (NEO4J_USERNAME/NEO4J_PASSWORD): {error}"
        ) from error
    except (DriverError, Neo4jError, OSError) as error:
        driver.close()
        raise StoreError(f"cannot reach Neo4j at NEO4J_URI={uri}: {error}") from error
    return driver


def open_neo4j(settings: Settings, user: str, *, driver: Any = None) -> Neo4jStore:
    """Open ``user``'s Neo4j store.

    Args:
        settings: NEO4J_URI, NEO4J_USERNAME, NEO4J_PASSWORD, NEO4J_DATABASE, NEO4J_ISOLATION
            and EMBEDDING_DIMS.
        user: the user name (validated, and mapped to a database name, before connecting).
        driver: an existing ``neo4j.Driver``; it is left open by :meth:`Neo4jStore.close`.

    Raises:
        UnsafeUserError: the user name cannot be used (or cannot name a database).
        StoreError: NEO4J_URI is missing or unreachable, the credentials are refused, or
            the per-user database cannot be created.
    """
    user = validate_user_name(user)
    database = database_name_for(user) if settings.neo4j_isolation == "database" else settings.neo4j_database
    uri = settings.neo4j_uri
    if not uri:
        raise StoreError("NEO4J_URI is not set (e.g. bolt://localhost:7687)")
    owns = driver is None
    if driver is None:
        driver = _connect(settings)
    try:
        if settings.neo4j_isolation == "database":
            _ensure_database(driver, database, uri)
        return Neo4jStore(
            driver,
            database,
            uri=uri,
            user=user,
            dims=settings.embedding_dims,
            isolation=settings.neo4j_isolation,
            owns_driver=owns,
        )
    except Exception:
        if owns:
            driver.close()
        raise


__all__ = [
    "DATABASE_PREFIX",
    "FULLTEXT_INDEX",
    "VECTOR_INDEX",
    "Neo4jConnection",
    "Neo4jStore",
    "database_name_for",
    "escape_lucene",
    "open_neo4j",
]
