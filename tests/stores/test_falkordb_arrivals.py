"""Many new users at once on FalkorDB with a graph per user: the server survives (issue 42).

FalkorDB crashed (SIGSEGV) when new graphs got their unique constraints while queries ran on
others (``bench/falkor_schema_crash.py`` reproduces it with redis-py alone): nine users whose
first stores started together brought a server down in 3 of 6 rounds. Each graph's schema is now
created once, one graph at a time per server (``stores/cypher/falkor_schema.py``). Here 16 new
users open and store at the same instant, 5 rounds, on one real FalkorDB process and on a
3-primary cluster; after every round each process is alive, answers PING, every store was
acknowledged and each user reads back their own memory.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from smriti.memory import Memory
from smriti.stores.cypher.falkordb import _UNIQUE_KEYS
from tests.falkor_processes import FalkorCluster, FalkorProcess

USERS = 16
ROUNDS = 5


def _arrive_together(cfg, users: list[str]) -> dict[str, tuple[str, list[str]]]:
    """Every user opens their (new) memory and stores at the same instant; returns, per user,
    the acknowledged id and the texts they read back."""
    barrier = threading.Barrier(len(users))

    def one(user: str) -> tuple[str, list[str]]:
        barrier.wait()
        with Memory.open(cfg, user=user) as memory:
            stored = memory.store(f"{user} moved the billing service to kafka topic {user}", source="arrival")
            recalled = memory.recall("billing kafka", limit=5)["results"]
            return stored["id"], [hit["text"] for hit in recalled]

    with ThreadPoolExecutor(len(users)) as pool:
        return dict(zip(users, pool.map(one, users), strict=True))


def _check_round(results: dict[str, tuple[str, list[str]]], servers: list[FalkorProcess]) -> None:
    for server in servers:
        assert server.alive, f"FalkorDB on port {server.port} died"
        client = server.client(socket_timeout=10)
        try:
            assert client.ping()
        finally:
            client.close()
    for user, (engram_id, texts) in results.items():
        assert engram_id, f"{user}'s store was not acknowledged"
        assert texts and all(text.startswith(f"{user} moved") for text in texts), f"{user} read {texts}"


@pytest.fixture
def server(tmp_path):
    process = FalkorProcess(tmp_path / "falkor")
    try:
        yield process
    finally:
        process.stop()


def _graph_settings(settings, addr: str):
    return settings.model_copy(
        update={"db_type": "falkordb", "falkor_addr": addr, "falkor_isolation": "graph", "log_level": "ERROR"}
    )


def _constraint_creations(server: FalkorProcess) -> int:
    """GRAPH.CONSTRAINT commands the server has run (Redis counts each command)."""
    client = server.client()
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return sum(
        int(entry["calls"])
        for name, entry in stats.items()
        if name.lower().startswith("cmdstat_graph.constraint")
    )


@pytest.mark.slow
def test_sixteen_new_users_at_once_on_one_server(server, settings):
    cfg = _graph_settings(settings, server.address)
    for number in range(ROUNDS):
        users = [f"r{number}u{index}" for index in range(USERS)]
        _check_round(_arrive_together(cfg, users), [server])
    # Once per graph: each new graph got its unique keys created once, none twice.
    created = _constraint_creations(server)
    assert created == ROUNDS * USERS * len(_UNIQUE_KEYS)
    # Reopened, a graph takes no schema step.
    with Memory.open(cfg, user="r0u0") as memory:
        assert memory.recall("billing", limit=1)["results"]
    assert _constraint_creations(server) == created


@pytest.mark.slow
def test_sixteen_new_users_at_once_on_a_cluster(tmp_path, settings):
    cluster = FalkorCluster(tmp_path / "cluster", masters=3, replicas=0)
    try:
        cfg = _graph_settings(settings, cluster.address)
        for number in range(ROUNDS):
            users = [f"r{number}u{index}" for index in range(USERS)]
            _check_round(_arrive_together(cfg, users), cluster.nodes)
    finally:
        cluster.stop()
