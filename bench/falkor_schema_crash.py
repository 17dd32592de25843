"""FalkorDB killed by SIGSEGV when new graphs get their unique constraints while queries run.

A minimal reproduction with redis-py only (no Smriti code), for the upstream report in
``docs/cluster.md``. Each round starts ``--graphs`` threads at the same instant (a barrier), one
per new graph, on one fresh falkordblite server (``redis-server --loadmodule falkordb.so``).
Each thread does what a memory's first open used to do on its own graph:

1. ``GRAPH.QUERY g "CREATE INDEX FOR (n:L) ON (n.p)"`` for the exact-match indexes (FalkorDB
   needs one under every unique constraint),
2. ``GRAPH.CONSTRAINT CREATE g UNIQUE NODE L PROPERTIES n p ...`` for five labels,
3. ``GRAPH.QUERY`` writes (``MERGE`` on the constrained labels) straight after,

so constraint creations (which FalkorDB builds in the background) and ``GRAPH.QUERY`` commands on
other graphs are in flight together. After each round the script checks the server process
(alive, PING answers) and restarts it on a crash, keeping the server log's crash report.

``--serialised`` runs the same workload with the schema step of every graph taken under one
lock (what Smriti does now, ``stores/cypher/falkor_schema.py``): no constraint is created while
another graph's schema is being created, and a graph's first query waits for its schema.

    .venv/bin/python -m bench.falkor_schema_crash --rounds 10 --graphs 16
    .venv/bin/python -m bench.falkor_schema_crash --rounds 10 --graphs 16 --serialised

Measured (falkordblite 0.11: Redis 8.2, FalkorDB 4.x; see docs/cluster.md for the figures and the
version string the server prints): see the module's output, ``crashed rounds: k of n``.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

from tests.falkor_processes import FalkorProcess

# (label, properties): the exact-match indexes and unique keys of a Smriti graph.
UNIQUE_KEYS = (
    ("Engram", ("user", "id")),
    ("EngramVector", ("user", "id")),
    ("Cue", ("user", "name")),
    ("Meta", ("user", "key")),
    ("EngramTally", ("user",)),
)


def _schema(client: redis.Redis, graph: str, constraints: bool = True) -> None:
    for label, props in UNIQUE_KEYS:
        for prop in props:
            try:
                client.execute_command("GRAPH.QUERY", graph, f"CREATE INDEX FOR (n:{label}) ON (n.{prop})")
            except redis.ResponseError as error:
                if "already indexed" not in str(error):
                    raise
    for label, props in UNIQUE_KEYS if constraints else ():
        client.execute_command(
            "GRAPH.CONSTRAINT", "CREATE", graph, "UNIQUE", "NODE", label, "PROPERTIES", len(props), *props
        )


def _await_constraints(client: redis.Redis, graph: str) -> None:
    """Until every constraint of ``graph`` is OPERATIONAL (FalkorDB builds them in the background)."""
    while True:
        rows = client.execute_command(
            "GRAPH.QUERY", graph, "CALL db.constraints() YIELD status RETURN status"
        )[1]
        if len(rows) == len(UNIQUE_KEYS) and all(row[0] in ("OPERATIONAL", b"OPERATIONAL") for row in rows):
            return
        time.sleep(0.005)


def _writes(client: redis.Redis, graph: str, count: int) -> None:
    for index in range(count):
        client.execute_command(
            "GRAPH.QUERY",
            graph,
            f"MERGE (m:Meta {{user: 'u', key: 'k{index}'}}) SET m.value = 'v' "
            f"MERGE (c:Cue {{user: 'u', name: 'c{index}'}}) "
            f"CREATE (e:Engram {{user: 'u', id: 'e{index}'}})-[:EncodedBy]->(c) "
            "MERGE (t:EngramTally {user: 'u'}) SET t.engrams = coalesce(t.engrams, 0) + 1",
        )
        client.execute_command("GRAPH.QUERY", graph, "CALL db.constraints()")


def _round(
    server: FalkorProcess,
    prefix: str,
    graphs: int,
    writes: int,
    lock: threading.Lock | None,
    wait: bool,
    constraints: bool = True,
) -> list[str]:
    """One round; returns the errors the threads saw (a crash shows as connection errors)."""
    barrier = threading.Barrier(graphs)
    errors: list[str] = []

    def user(index: int) -> None:
        client = server.client(socket_timeout=60)
        graph = f"{prefix}{index}_smriti"
        try:
            barrier.wait()
            with lock or contextlib.nullcontext():
                _schema(client, graph, constraints)
                if wait and constraints:
                    _await_constraints(client, graph)
            _writes(client, graph, writes)
        except (redis.RedisError, OSError) as error:
            errors.append(f"{graph}: {type(error).__name__}: {error}")
        finally:
            client.close()

    threads = [threading.Thread(target=user, args=(index,)) for index in range(graphs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _crashed(server: FalkorProcess) -> bool:
    if not server.alive:
        return True
    client = server.client(socket_timeout=5)
    try:
        return not client.ping()
    except redis.RedisError:
        return True
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--graphs", type=int, default=16, help="new graphs per round, created at once")
    parser.add_argument("--writes", type=int, default=20, help="writes per graph after its schema")
    parser.add_argument("--serialised", action="store_true", help="one schema step at a time")
    parser.add_argument(
        "--await-constraints",
        action="store_true",
        help="a graph's first query waits until its constraints are built",
    )
    parser.add_argument("--no-constraints", action="store_true", help="exact-match indexes only")
    args = parser.parse_args(argv)
    lock = threading.Lock() if args.serialised else None
    crashes = 0
    with tempfile.TemporaryDirectory(prefix="falkor-crash-") as root:
        server = FalkorProcess(Path(root) / "server", appendonly="no")
        try:
            version = server.client().execute_command("MODULE", "LIST")
            print(f"modules: {version}", file=sys.stderr)
            for number in range(args.rounds):
                started = time.monotonic()
                errors = _round(
                    server,
                    f"r{number}g",
                    args.graphs,
                    args.writes,
                    lock,
                    args.await_constraints,
                    not args.no_constraints,
                )
                crashed = _crashed(server)
                crashes += crashed
                outcome = "CRASHED" if crashed else "ok"
                print(
                    f"round {number + 1}: {outcome} in {time.monotonic() - started:.1f} s, "
                    f"{len(errors)} client errors{': ' + errors[0] if errors else ''}",
                    file=sys.stderr,
                )
                if crashed:
                    log = (Path(root) / "server" / "server.log").read_text(errors="replace")
                    report = (
                        log[log.rfind("=== REDIS BUG REPORT START") :] if "BUG REPORT" in log else log[-3000:]
                    )
                    print(re.sub(r"\n{3,}", "\n\n", report[:6000]), file=sys.stderr)
                    server.kill()
                    server.start()
        finally:
            server.stop()
    mode = ("serialised" if args.serialised else "concurrent") + (
        ", constraints awaited" if args.await_constraints else ""
    )
    mode += ", indexes only" if args.no_constraints else ""
    print(f"{mode}: crashed rounds: {crashes} of {args.rounds} ({args.graphs} new graphs a round)")
    return 1 if crashes else 0


if __name__ == "__main__":
    raise SystemExit(main())
