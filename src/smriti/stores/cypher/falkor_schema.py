"""A FalkorDB graph's exact-match indexes and unique keys: created once, one graph at a time per server.

Why serialised: FalkorDB crashed (SIGSEGV) when several new graphs got their unique constraints
while queries ran (issue 42; the reproduction, with redis-py alone, is
``bench/falkor_schema_crash.py``, the report in ``docs/cluster.md``). Every memory opening with
``FALKOR_ISOLATION=graph`` creates its graph's schema, so nine users arriving together was
enough. Now:

* **once per graph**: the graph's own index and constraint listing is the marker. An open
  that finds every index and every unique key OPERATIONAL reads two lists and takes no lock
  (no separate marker key that could outlive a deleted graph);
* **serialised per server**: whatever is missing is created under one Redis lock on the same
  server (``SET NX PX`` via redis-py's :class:`redis.lock.Lock`, released by token), so the
  several Smriti processes and HTTP workers sharing a FalkorDB never create two graphs'
  schemas at once. On a cluster the lock key lives on the graph's own shard (a key hashed
  into that primary's first slot), since each shard is its own FalkorDB process;
* **finished before use**: the holder waits until the new constraints are OPERATIONAL (FalkorDB
  builds them in the background) before it lets go, and the memory's first query runs only
  after that;
* **retried**: every statement goes through the failover retry (falkor_exec.retrying): a
  server restarting or a shard failing over meanwhile is waited for, up to
  FALKOR_FAILOVER_SECONDS. A process killed while holding the lock frees it after
  LOCK_SECONDS (its PX expiry).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import TYPE_CHECKING, Any

from smriti.stores.base import StoreError
from smriti.stores.cypher.falkor_exec import is_cluster, retrying

if TYPE_CHECKING:
    from smriti.stores.cypher.falkordb import FalkorDBConnection

log = logging.getLogger(__name__)

# The lock key's prefix (one lock per server; on a cluster, per shard).
LOCK_KEY = "smriti:schema-lock"
# The lock's expiry: a holder killed -9 blocks the others at most this long (seconds).
LOCK_SECONDS = 60.0
# How long an open waits for another graph's schema step before it fails (seconds).
LOCK_WAIT_SECONDS = 120.0
# How long the holder waits for its new constraints to become OPERATIONAL (seconds).
CONSTRAINT_WAIT_SECONDS = 60.0


def ensure_schema(
    connection: FalkorDBConnection,
    range_indexes: tuple[tuple[str, tuple[str, ...]], ...],
    edge_indexes: tuple[tuple[str, str], ...],
    unique_keys: tuple[tuple[str, tuple[str, ...]], ...],
) -> None:
    """Create the graph's missing exact-match indexes and unique keys (see the module docstring).

    Args:
        connection: the graph's connection.
        range_indexes: (label, properties) of the node exact-match indexes.
        edge_indexes: (edge type, property) of the edge exact-match indexes.
        unique_keys: (label, properties) of the unique constraints (each backed by indexes).

    Raises:
        StoreError: FalkorDB could not be reached, refused a statement, or another process held
            the schema lock past LOCK_WAIT_SECONDS.
    """

    def missing() -> tuple[list[str], list[tuple[str, tuple[str, ...]]], bool]:
        indexed = connection._index_types()
        statements = [
            f"CREATE INDEX FOR (n:{label}) ON (n.{prop})"
            for label, props in range_indexes
            for prop in props  # FalkorDB indexes attributes one by one
            if "RANGE" not in indexed.get(label, {}).get(prop, ())
        ]
        statements += [
            f"CREATE INDEX FOR ()-[r:{label}]-() ON (r.{prop})"
            for label, prop in edge_indexes
            if "RANGE" not in indexed.get(label, {}).get(prop, ())
        ]
        constraints = _constraints(connection)
        keys = [key for key in unique_keys if key not in constraints]
        building = any(status != "OPERATIONAL" for status in constraints.values())
        return statements, keys, building

    statements, keys, building = missing()
    if not statements and not keys and not building:
        return
    with schema_lock(connection):
        statements, keys, _ = missing()  # another process may have done it meanwhile
        for statement in statements:
            connection._schema_call(statement)
        for label, props in keys:
            _create_unique(connection, label, props)
        _await_constraints(connection, unique_keys)


@contextmanager
def schema_lock(connection: FalkorDBConnection) -> Iterator[None]:
    """Hold the server's (the graph's shard's) schema lock: one schema step at a time."""
    from redis.exceptions import LockError, LockNotOwnedError, RedisError

    client = connection.client.connection
    name = _lock_key(client, connection.graph_name)
    lock = client.lock(name, timeout=LOCK_SECONDS, sleep=0.05, blocking_timeout=LOCK_WAIT_SECONDS)

    def acquire() -> bool:
        return bool(lock.acquire())

    try:
        acquired = retrying(client, acquire, deadline=connection._deadline(), read=True, what="schema lock")
    except (RedisError, OSError) as error:
        raise StoreError(f"FalkorDB at {connection.location} is unreachable: {error}") from error
    if not acquired:
        raise StoreError(
            f"FalkorDB at {connection.location}: another process held the schema lock {name!r} for "
            f"{LOCK_WAIT_SECONDS:.0f} s; try again"
        )
    try:
        yield
    finally:
        try:
            lock.release()
        except (LockError, LockNotOwnedError, RedisError, OSError) as error:
            # Expired (LOCK_SECONDS) or the server went away: it frees itself either way.
            log.warning("FalkorDB schema lock %r not released: %s", name, error)


def _constraints(connection: FalkorDBConnection) -> dict[tuple[str, tuple[str, ...]], str]:
    """(label, properties) -> status of the graph's unique node constraints."""
    rows = connection.run(
        "CALL db.constraints() YIELD type, label, properties, entitytype, status "
        "RETURN type, label, properties, entitytype, status"
    )
    return {
        (row["label"], tuple(row["properties"])): str(row["status"])
        for row in rows
        if row["type"] == "UNIQUE" and row["entitytype"] == "NODE"
    }


def _create_unique(connection: FalkorDBConnection, label: str, props: tuple[str, ...]) -> None:
    from redis.exceptions import RedisError

    graph = connection.graph_name
    client = connection.client.connection

    def create() -> None:
        try:
            client.execute_command(
                "GRAPH.CONSTRAINT", "CREATE", graph, "UNIQUE", "NODE", label, "PROPERTIES", len(props), *props
            )
        except RedisError as error:
            if "already exists" not in str(error):  # another process won (or a resend)
                raise

    try:
        retrying(client, create, deadline=connection._deadline(), read=True, what="unique key")
    except (RedisError, OSError) as error:
        raise StoreError(
            f"FalkorDB could not create the {label} unique key on {connection.location}: {error}"
        ) from error


def _await_constraints(connection: FalkorDBConnection, keys: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """Wait until every unique key is OPERATIONAL (FalkorDB builds them in the background)."""
    deadline = time.monotonic() + CONSTRAINT_WAIT_SECONDS
    while True:
        statuses = _constraints(connection)
        failed = [key for key in keys if statuses.get(key) == "FAILED"]
        if failed:
            label, props = failed[0]
            raise StoreError(
                f"FalkorDB could not build the {label} unique key on {connection.location}: two "
                f"{label} nodes share ({', '.join(props)})"
            )
        if all(statuses.get(key) == "OPERATIONAL" for key in keys):
            return
        if time.monotonic() > deadline:
            raise StoreError(f"FalkorDB at {connection.location}: the unique keys are still being built")
        time.sleep(0.01)


def _lock_key(client: Any, graph: str) -> str:
    """The schema lock's key: one per server; on a cluster, one per shard, on the shard that
    holds ``graph`` (a hash tag landing in that primary's lowest slot)."""
    if not is_cluster(client):
        return LOCK_KEY
    node = client.get_node_from_key(graph)
    slots = [
        slot
        for slot, nodes in client.nodes_manager.slots_cache.items()
        if nodes and nodes[0].name == node.name
    ]
    return f"{LOCK_KEY}:{{{_tag_for_slot(min(slots))}}}"


@cache
def _tag_for_slot(slot: int) -> str:
    """A short string whose Redis Cluster hash slot is ``slot`` (searched once, then cached)."""
    from redis.crc import key_slot

    number = 0
    while key_slot(f"s{number}".encode()) != slot:
        number += 1
    return f"s{number}"
