"""Smriti on a FalkorDB Redis Cluster: three primaries with a replica each, real processes.

Users' graphs (FALKOR_ISOLATION=graph, one key ``{user}_smriti`` each) spread over the shards;
several Smriti processes serve them; a primary killed -9 during stores is replaced by its
replica (automatic failover, cluster-node-timeout 1 s) while the same Memory objects go on,
no acknowledged store is lost (FALKOR_WAIT_REPLICAS=1), and the other shards' users keep
working while that shard has no primary (cluster-require-full-coverage no). Once promoted,
the shard's new primary has no replica until the dead node is restarted (it rejoins as one):
its stores fail meanwhile, since none could be acknowledged as held twice. See docs/cluster.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from smriti.errors import SmritiError
from smriti.memory import Memory
from tests.envs import offline_env
from tests.falkor_processes import FalkorCluster

USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]


@pytest.fixture
def cluster(tmp_path):
    formed = FalkorCluster(tmp_path / "cluster")
    try:
        yield formed
    finally:
        formed.stop()


def _cluster_settings(settings, cluster, **more):
    return settings.model_copy(
        update={
            "db_type": "falkordb",
            "falkor_addr": cluster.address,
            "falkor_isolation": "graph",
            "falkor_wait_replicas": 1,
            "log_level": "ERROR",
            **more,
        }
    )


WORKER = textwrap.dedent(
    """
    import json, sys
    from smriti.memory import Memory
    action, users = sys.argv[1], sys.argv[2].split(",")
    out = {}
    for user in users:
        with Memory.open(user=user) as memory:
            if action == "store":
                out[user] = [
                    memory.store(f"{user} note {i}: the {user} team moved billing to kafka topic {i}",
                                 source=f"{user}-chat")["id"]
                    for i in range(4)
                ]
            else:
                result = memory.recall("billing kafka topic", limit=10)
                out[user] = [(r["id"], r["text"]) for r in result["results"]]
    print(json.dumps(out))
    """
)


def _worker(env: dict[str, str], action: str, users: list[str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", WORKER, action, ",".join(users)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_users_spread_over_the_shards_and_several_processes_share_them(cluster, tmp_path):
    shards = {cluster.primary_of(f"{user}_smriti").port for user in USERS}
    assert len(shards) >= 2, "the users' graphs should land on more than one shard"
    env = {
        **os.environ,
        **offline_env(
            tmp_path / "store",
            DB_TYPE="falkordb",
            FALKOR_ADDR=cluster.address,
            FALKOR_ISOLATION="graph",
            FALKOR_WAIT_REPLICAS="1",
            LOG_LEVEL="ERROR",
        ),
    }
    # Two processes store for three users each; two others recall every user's memories.
    stored = {**_worker(env, "store", USERS[:3]), **_worker(env, "store", USERS[3:])}
    recalled = {**_worker(env, "recall", USERS[::2]), **_worker(env, "recall", USERS[1::2])}
    for user in USERS:
        ids = {engram_id for engram_id, _ in recalled[user]}
        assert set(stored[user]) <= ids, f"{user}: a memory stored by another process is missing"
        assert all(text.startswith(f"{user} note") for _, text in recalled[user]), (
            f"{user} saw another's memory"
        )


def test_a_killed_primary_fails_over_and_no_acknowledged_store_is_lost(cluster, settings):
    cfg = _cluster_settings(settings, cluster)
    victim_user = USERS[0]
    victim = cluster.primary_of(f"{victim_user}_smriti")
    other_user = next(u for u in USERS if cluster.primary_of(f"{u}_smriti").port != victim.port)
    memories = {user: Memory.open(cfg, user=user) for user in (victim_user, other_user)}
    acknowledged: dict[str, list[str]] = {victim_user: [], other_user: []}
    failed: list[str] = []
    others_during_outage = 0
    try:
        item = 0
        killed_at = promoted_at = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            item += 1
            if item == 15:  # a few stores in, kill the victim's primary -9
                victim.kill()
                killed_at = time.monotonic()
            for user, memory in memories.items():
                content = f"{user} memory {item}: the deploy of service {item} used kafka and postgres"
                try:
                    acknowledged[user].append(memory.store(content, source="failover")["id"])
                except SmritiError as error:
                    assert user == victim_user, f"{other_user}'s shard is up, yet its store failed: {error}"
                    failed.append(content)
                    continue
                if user == other_user and killed_at and promoted_at is None:
                    others_during_outage += 1
            if (
                killed_at
                and promoted_at is None
                and cluster.primary_of(f"{victim_user}_smriti").port != victim.port
            ):
                promoted_at = time.monotonic()
                # The operator restarts the dead node: it rejoins as the new primary's replica,
                # and stores are acknowledged again (WAIT 1 needs a replica).
                victim.start()
            if promoted_at and item > 40 and acknowledged[victim_user] and failed:
                last_failed_item = int(failed[-1].split()[2].rstrip(":"))
                if item - last_failed_item > 5:
                    break
            time.sleep(0.02)
        assert promoted_at is not None, "the replica was not promoted"
        assert failed, "no store met the outage: the test proves nothing"
        assert others_during_outage > 0, "the other shard's user stored nothing while the victim's was down"
        # The same Memory objects go on: stores after the failover were acknowledged.
        late = memories[victim_user].store("after the failover the victim stores again", source="failover")
        acknowledged[victim_user].append(late["id"])
        for user, memory in memories.items():
            store = memory.context.store
            found = {engram.id for engram in store.get_engrams(acknowledged[user])}
            assert found == set(acknowledged[user]), f"{user}: an acknowledged store was lost"
            assert not store.uncued_engram_ids(), f"{user}: a memory without cue links"
    finally:
        for memory in memories.values():
            memory.close()


@pytest.mark.slow
def test_two_replicas_keep_stores_acknowledged_through_a_primary_death(tmp_path, settings):
    """3 primaries x 2 replicas, FALKOR_WAIT_REPLICAS=1: the victim's shard keeps a replica after
    its primary dies and the other replica is promoted, so a store started after the kill waits
    for the promotion (its reads and batch retried under FALKOR_FAILOVER_SECONDS) and is
    acknowledged, with the dead node still down; nothing fails, nothing is lost."""
    cluster = FalkorCluster(tmp_path / "cluster", masters=3, replicas=2)
    try:
        cfg = _cluster_settings(settings, cluster, falkor_failover_seconds=60.0)
        user = USERS[0]
        key = f"{user}_smriti"
        with Memory.open(cfg, user=user) as memory:
            acknowledged = [memory.store(f"{user} before the kill: billing moved to kafka")["id"]]
            victim = cluster.primary_of(key)
            victim.kill()
            killed_at = time.monotonic()
            # Stored straight after the kill: no primary yet; the store waits for the promotion.
            acknowledged.append(memory.store(f"{user} during the failover: invoices moved to kafka")["id"])
            first_acknowledged = time.monotonic() - killed_at
            assert cluster.primary_of(key).port != victim.port
            for item in range(5):  # the dead node is still down: the other replica confirms
                acknowledged.append(
                    memory.store(f"{user} after the failover {item}: ledger on postgres")["id"]
                )
            store = memory.context.store
            assert {engram.id for engram in store.get_engrams(acknowledged)} == set(acknowledged)
            assert not store.uncued_engram_ids()
        print(f"first acknowledged store {first_acknowledged:.2f} s after the kill (node timeout 1 s)")
    finally:
        cluster.stop()
