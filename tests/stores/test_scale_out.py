"""Two ``smriti-mcp`` server processes on one FalkorDB (over TCP) serve the same users consistently.

Writes go through one process and reads through the other, interleaved; each step checks that
the reading process sees what the database holds, not what it remembered: memories stored and
forgotten elsewhere, the latest turn of a conversation stored by the other process, indexes the
other process built (the same keyword scores on both), and the Leiden resolution the other
process tuned (adopted, not retuned).
"""

from __future__ import annotations

import uuid

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from smriti.config import Settings
from smriti.server.tokens import hash_token
from tests.envs import offline_env
from tests.http_server import Server

TURNS = [
    "The orders service stores invoices in PostgreSQL and caches carts in Redis.",
    "Redis cache eviction for carts uses an LRU policy with a one hour expiry.",
    "PostgreSQL replication for the orders service runs with two read replicas.",
    "Invoices in PostgreSQL are archived to object storage after a year.",
    "The orders service exposes cursor pagination because PostgreSQL offsets got slow.",
    "Redis streams carry order events to the billing service.",
    "Billing reads invoices from PostgreSQL replicas, never from the primary.",
    "The carts cache in Redis is warmed from PostgreSQL at deploy time.",
]
QUERY = "PostgreSQL invoices orders service"


@pytest.fixture
def servers(falkor_server, tmp_path):
    _, port = falkor_server
    graph = f"smriti_scale_{uuid.uuid4().hex[:10]}"
    tokens = {"alice": "alice-secret-token", "bob": "bob-secret-token"}
    env = offline_env(
        tmp_path / "store",
        DB_TYPE="falkordb",
        FALKOR_ADDR=f"127.0.0.1:{port}",
        FALKOR_GRAPH=graph,
        FALKOR_ISOLATION="tenant",
        INDEX_THRESHOLD="5",
        SMRITI_TOKENS=",".join(f"{user}:{hash_token(token)}" for user, token in tokens.items()),
        LOG_LEVEL="INFO",
    )
    first, second = Server(env), Server(env)
    settings = Settings(**{name.lower(): value for name, value in env.items() if name != "SMRITI_TOKENS"})
    yield first, second, tokens, settings
    for server in (first, second):
        code, stderr = server.stop()
        assert code == 0, stderr
        assert "Traceback" not in stderr, stderr
    falkor_server[0].select_graph(graph).delete()


def _client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


async def _call(client: Client, tool: str, **arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


def _step(trace: list[dict], node: str) -> list[tuple[str, float]]:
    entry = next(entry for entry in trace if entry["node"] == node)
    return [(c["id"], round(c["score"], 6)) for c in entry.get("candidates", [])]


def test_two_server_processes_on_one_falkordb_interleave_writes_and_reads(servers, falkor_server):
    first, second, tokens, settings = servers

    def database_keyword_hits(query: str) -> list[tuple[str, float]]:
        from smriti.nodes.search import candidate_pool
        from smriti.stores.cypher.falkordb import open_falkordb

        store = open_falkordb(settings, "alice", client=falkor_server[0])
        try:
            return [(hit.id, round(hit.score, 6)) for hit in store.fulltext_search(query, candidate_pool(8))]
        finally:
            store.close()

    async def main() -> None:
        async with (
            _client(first.url, tokens["alice"]) as a,
            _client(second.url, tokens["alice"]) as b,
            _client(second.url, tokens["bob"]) as bob,
        ):
            # Before anything exists, B searches: it must not remember "no indexes" from now on.
            empty = await _call(b, "smriti_recall", query=QUERY, explain=True)
            assert empty["total_results"] == 0

            # Turns of one conversation stored alternately through A and B: each links to the
            # one before, whichever process stored it.
            ids: list[str] = []
            for number, content in enumerate(TURNS[:4]):
                client = a if number % 2 == 0 else b
                stored = await _call(client, "smriti_store", content=content, source="chat-1", explain=True)
                links = {engram_id for engram_id, _ in _step(stored["trace"], "associate")}
                if ids:
                    assert ids[-1] in links, (number, links)
                ids.append(stored["id"])
                # Read back through the other process at once.
                other = b if client is a else a
                listed = await _call(other, "smriti_recall", mode="list", limit=20)
                assert {item["id"] for item in listed["results"]} == set(ids)

            # B clusters first (tunes the Leiden resolution and records it in the database).
            first_run = await _call(b, "smriti_manage", action="consolidate")
            assert first_run["details"]["leiden"]["tuned"] is True

            # A stores the rest: past INDEX_THRESHOLD its store pipeline builds the indexes.
            for content in TURNS[4:]:
                ids.append((await _call(a, "smriti_store", content=content, source="chat-1"))["id"])
            assert (await _call(a, "smriti_manage", action="stats"))["details"]["fulltext_index"] is True

            # B, which searched before the indexes existed, now searches them as the database
            # answers (its own fresh store, opened here): index scores, not its BM25 fallback.
            truth = await anyio.to_thread.run_sync(database_keyword_hits, QUERY)
            seen_by_b = await _call(b, "smriti_recall", query=QUERY, limit=8, explain=True)
            assert truth and _step(seen_by_b["trace"], "fulltext_search") == truth

            # A's graph has doubled: A retunes; B then adopts A's resolution instead of its own.
            retuned = (await _call(a, "smriti_manage", action="consolidate"))["details"]["leiden"]
            assert retuned["tuned"] is True
            adopted = (await _call(b, "smriti_manage", action="consolidate"))["details"]["leiden"]
            assert adopted["tuned"] is False and adopted["resolution"] == retuned["resolution"]

            # Forgotten through A: gone for B at once, and B cannot forget it again.
            await _call(a, "smriti_manage", action="forget", memory_id=ids[0])
            for mode in ("list", "recall", "search"):
                found = await _call(b, "smriti_recall", query=QUERY, mode=mode, limit=20)
                assert ids[0] not in {item["id"] for item in found["results"]}, mode
            again = await b.call_tool("smriti_manage", {"action": "forget", "memory_id": ids[0]})
            assert again.is_error
            stats_a = (await _call(a, "smriti_manage", action="stats"))["details"]
            stats_b = (await _call(b, "smriti_manage", action="stats"))["details"]
            assert stats_a["engrams"] == stats_b["engrams"] == len(TURNS) - 1

            # The other user on the same graph (tenant isolation) sees none of it, on either process.
            assert (await _call(bob, "smriti_recall", mode="list", limit=20))["results"] == []
            forgotten = await bob.call_tool("smriti_manage", {"action": "forget", "memory_id": ids[1]})
            assert forgotten.is_error
            assert (await _call(a, "smriti_manage", action="stats"))["details"]["engrams"] == len(TURNS) - 1

    anyio.run(main)
