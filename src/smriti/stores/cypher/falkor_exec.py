"""A FalkorDB write batch as one Redis transaction, and every FalkorDB call retried while its
server or shard has no primary, on one server or on a Redis Cluster.

FalkorDB has no multi-statement transactions, but Redis runs ``MULTI`` ... ``EXEC`` as one
unit: no other command runs between the queued ``GRAPH.QUERY`` commands, and the append-only
file and the replicas receive them as one block (a crash while the block is being written
leaves none of it: Redis drops an unfinished ``MULTI`` when it loads the file). A store's
writes therefore take effect together or not at all, where they used to land one query at a
time (a server killed during a store left an engram without its cue links).

What ``EXEC`` does not do is roll back: a query that fails *while* the block runs leaves the
others applied. Only an error the server reports for a query it cannot even queue aborts the
whole block. The store's queries are constants of this package, exercised by the tests, so a
failure there is a bug; it is reported as such (:class:`StoreError`), never hidden.

On a cluster the block goes to the primary holding the graph's key (one key, so one slot).
While that shard fails over (or a single server restarts), the node answers
``MOVED``/``TRYAGAIN``/``CLUSTERDOWN``, is loading, or refuses connections; nothing was applied
then, so the call is sent again (to the new primary once the cluster says who it is) until a
deadline, FALKOR_FAILOVER_SECONDS (:func:`retrying`). A store's reads and its batch share one
deadline (the connection's failover window): the reads before the batch used to fail at once,
which made a failover an outage of the killed shard's users. A read may be resent after any
connection failure (it changes nothing); a write or a block whose connection was lost after it
was sent is never resent: it may have been applied (the caller's retry then finds the whole
memory, see ``nodes/encode.py``'s dedupe).

Durability: with FALKOR_WAIT_REPLICAS > 0 the same connection then sends ``WAIT n ms`` (Redis
counts the replicas that received this connection's writes), and a store fewer replicas
confirmed in time fails, so an acknowledged store is on that many replicas as well.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from smriti.stores.base import StoreError

log = logging.getLogger(__name__)

# The pause between attempts while a shard fails over grows to this (seconds).
MAX_RETRY_PAUSE = 0.5
# redis-py's message for a connection that could not be opened (nothing was sent on it).
_CONNECT_FAILED = ("connecting to", "Connection refused")


class Durability(NamedTuple):
    """When a write batch counts as done (see the module docstring).

    Attributes:
        replicas: replicas that must confirm it (``WAIT``); 0: the primary's answer suffices.
        wait_ms: how long to wait for them.
        failover_seconds: how long a call is retried while its server or shard has no primary.
    """

    replicas: int = 0
    wait_ms: int = 1000
    failover_seconds: float = 10.0


class NotApplied(Exception):
    """The command certainly did not run (refused connection, MOVED before EXEC): safe to resend."""


def is_cluster(client: Any) -> bool:
    """True when ``client`` (a FalkorDB client's ``connection``) is a redis-py RedisCluster."""
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)


def not_applied(error: BaseException, *, read: bool) -> bool:
    """True when the command that raised ``error`` can be sent again: it certainly did not run
    (no primary, a redirection, a server loading or refusing connections), or it only reads."""
    from redis.exceptions import (
        AskError,
        BusyLoadingError,
        ClusterDownError,
        MovedError,
        ReadOnlyError,
        TryAgainError,
    )
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(
        error, NotApplied | BusyLoadingError | ClusterDownError | TryAgainError | MovedError | AskError
    ):
        return True
    if isinstance(error, ReadOnlyError):  # a demoted primary, before the client saw the new view
        return True
    if isinstance(error, RedisConnectionError | RedisTimeoutError | OSError):
        return read or any(said in str(error) for said in _CONNECT_FAILED)
    return False


def retrying[T](
    client: Any,
    call: Callable[[], T],
    *,
    deadline: float,
    read: bool,
    what: str,
) -> T:
    """``call()``, sent again while it fails with an error :func:`not_applied` accepts, until
    ``deadline`` (``time.monotonic()``); a cluster client re-reads the cluster's view between
    attempts. The error of the last attempt is raised as it is (the caller words it)."""

    def stop(state: RetryCallState) -> bool:
        return time.monotonic() >= deadline

    def before_sleep(state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        log.info("FalkorDB %s not applied (%s): retrying", what, error)
        if is_cluster(client):
            _refresh(client)

    retryer = Retrying(
        stop=stop,
        wait=wait_exponential(multiplier=0.05, max=MAX_RETRY_PAUSE),
        retry=retry_if_exception(lambda error: not_applied(error, read=read)),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retryer(call)


def run_transaction(
    client: Any,
    key: str,
    commands: Sequence[tuple[Any, ...]],
    durability: Durability,
    deadline: float | None = None,
) -> list[Any]:
    """Send ``commands`` (all on ``key``) as one MULTI/EXEC and return EXEC's replies.

    Args:
        client: a ``redis.Redis`` or a ``redis.cluster.RedisCluster``.
        key: the key every command touches (the graph), which picks the cluster node.
        commands: the commands, each as its arguments.
        durability: replicas to wait for, and how long to retry while there is no primary.
        deadline: until when (``time.monotonic()``) a batch that did not run is sent again;
            default: FALKOR_FAILOVER_SECONDS from now.

    Raises:
        StoreError: the server could not be reached, refused the batch, failed a query of it,
            or fewer replicas than asked confirmed it (the message says whether it was applied).
    """
    cluster = is_cluster(client)
    if deadline is None:
        deadline = time.monotonic() + durability.failover_seconds

    def attempt() -> list[Any]:
        node = client.get_redis_connection(client.get_node_from_key(key)) if cluster else client
        return _transaction_on(node, commands, durability)

    try:
        return retrying(client, attempt, deadline=deadline, read=False, what="write batch")
    except NotApplied as error:
        raise StoreError(
            f"FalkorDB is unreachable: {error.__cause__ or error}; nothing was written"
        ) from error


def _refresh(cluster: Any) -> None:
    """Ask the cluster again which node serves which slots (a replica may have been promoted)."""
    from redis.exceptions import RedisError

    try:
        cluster.nodes_manager.initialize()
    except (RedisError, OSError) as error:  # every node it knows may be restarting: next round
        log.info("FalkorDB cluster view not refreshed yet: %s", error)


def _transaction_on(node: Any, commands: Sequence[tuple[Any, ...]], durability: Durability) -> list[Any]:
    """MULTI, the commands, EXEC (and WAIT) on one pooled connection of ``node``."""
    from redis.exceptions import AskError, ClusterDownError, MovedError, RedisError, TryAgainError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    redirected = (MovedError, AskError, TryAgainError, ClusterDownError)
    lost = (RedisConnectionError, RedisTimeoutError, OSError)
    pool = node.connection_pool
    try:
        # get_connection() connects (or checks a pooled connection): a server that is down
        # fails here, before anything was sent.
        connection = pool.get_connection()
    except lost as error:
        raise NotApplied("no connection could be opened") from error
    except RedisError as error:  # e.g. BusyLoadingError while a restarted server loads its file
        raise NotApplied(str(error)) from error
    try:
        try:
            connection.connect()
            connection.send_packed_command(connection.pack_commands([("MULTI",), *commands, ("EXEC",)]))
        except lost as error:
            # Not all of the block reached the server (EXEC is its last bytes): it runs nothing.
            raise NotApplied("the connection failed before the batch was sent") from error
        try:
            connection.read_response()  # MULTI: OK
            refused: list[Exception] = []
            for _ in commands:
                try:
                    connection.read_response()  # QUEUED
                except lost:
                    raise  # a lost connection is not a refusal (redis-py's are RedisErrors too)
                except RedisError as error:
                    refused.append(error)
            try:
                replies = connection.read_response()
            except lost:
                raise
            except RedisError as error:  # EXECABORT: nothing ran
                if refused and all(isinstance(e, redirected) for e in refused):
                    raise NotApplied(str(refused[0])) from refused[0]
                raise StoreError(
                    f"FalkorDB refused the write batch: {refused[0] if refused else error}"
                ) from error
        except lost as error:
            raise StoreError(
                f"FalkorDB connection lost while the write batch ran ({error}): it may or may not be written"
            ) from error
        failed = [reply for reply in replies if isinstance(reply, Exception)]
        if failed:
            raise StoreError(
                f"a FalkorDB query of a write batch failed (the others were applied): {failed[0]}"
            )
        if durability.replicas:
            _wait_for_replicas(connection, durability)
        return list(replies)
    except BaseException:
        connection.disconnect()  # an unread reply must not reach the next user of the connection
        raise
    finally:
        pool.release(connection)


def _wait_for_replicas(connection: Any, durability: Durability) -> None:
    """WAIT on the connection that wrote: Redis counts replicas that have this client's writes."""
    from redis.exceptions import RedisError

    try:
        connection.send_command("WAIT", durability.replicas, durability.wait_ms)
        confirmed = int(connection.read_response())
    except (RedisError, OSError) as error:
        raise StoreError(
            f"written on the FalkorDB primary, but its replicas could not be asked: {error}"
        ) from error
    if confirmed < durability.replicas:
        raise StoreError(
            f"written on the FalkorDB primary, but {confirmed} of {durability.replicas} replica(s) confirmed "
            f"it within {durability.wait_ms} ms (FALKOR_WAIT_REPLICAS): lost if the primary fails now"
        )
