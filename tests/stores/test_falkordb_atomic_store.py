"""A store is atomic on FalkorDB: its writes go as one MULTI/EXEC (stores/cypher/falkor_exec.py).

FalkorDB killed -9 during stores used to leave engrams with their vector but no cue links (7 in
35 kills, measured before), and retrying the store answered ``deduplicated`` into the half
memory. Here a real FalkorDB process (appendonly, appendfsync always) is killed -9 again and
again while one Memory stores; every failed store is retried once the server is back.
Afterwards no memory is half written, every acknowledged one is there, and every retried
text is a whole memory.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from datetime import UTC, datetime

import pytest
from falkordb import FalkorDB

from smriti.errors import SmritiError
from smriti.memory import Memory
from tests.falkor_processes import FalkorProcess

KILLS = 12
WORDS = (
    "postgres pgvector kubernetes billing invoice stripe garden tomato compost coffee espresso "
    "grinder atlas deploy pipeline pagination cursor python rust golang kafka redis nginx docker "
    "terraform ansible grafana prometheus alice bob carol dave erin frank grace heidi"
).split()


@pytest.fixture
def falkor_process(tmp_path):
    server = FalkorProcess(tmp_path / "falkor")
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("failing", ["ensure_indexes", "associate_many", "link_cues"])
def test_a_failing_step_leaves_nothing_on_falkordb(falkor_server, make_context, monkeypatch, failing):
    client, port = falkor_server
    graph = f"atomic_{uuid.uuid4().hex[:10]}"
    memory = Memory(make_context(db_type="falkordb", falkor_addr=f"127.0.0.1:{port}", falkor_graph=graph))
    try:
        store = memory.context.store
        memory.store("Bob recommends cursor pagination for the orders API", source="chat")
        before = memory.stats()
        exported = list(memory.export_records())

        def fault(*args, **kwargs):
            raise OSError(f"{failing}: injected fault")

        monkeypatch.setattr(store, failing, fault)
        with pytest.raises(OSError, match="injected"):
            memory.store("Bob also recommends keyset pagination for the invoices API", source="chat")
        monkeypatch.undo()
        after = memory.stats()
        for key in ("engrams", "cues", "associations", "cue_links"):
            assert after[key] == before[key], key
        assert list(memory.export_records()) == exported
        # The store works again afterwards, whole.
        memory.store("Carol prefers offset pagination for admin screens", source="chat")
        assert memory.stats()["engrams"] == before["engrams"] + 1
        assert not store.uncued_engram_ids()
    finally:
        memory.close()
        client.select_graph(graph).delete()


def test_a_write_that_needs_its_rows_is_refused_inside_a_batch(falkor):
    _, _, _, open_store = falkor
    store = open_store("alice")
    with pytest.raises(SmritiError, match="inside a write batch"), store.write_batch():
        store.reinforce(["x"], at=datetime.now(UTC), boost=0.1)


def _graph_rows(port: int, graph: str) -> list[dict]:
    client = FalkorDB(host="127.0.0.1", port=port)
    try:
        result = client.select_graph(graph).query(
            "MATCH (e:Engram) OPTIONAL MATCH (e)-[:EncodedBy]->(c:Cue) WITH e, count(c) AS cues "
            "OPTIONAL MATCH (e)-[:AssociatedWith]-(o:Engram) WITH e, cues, count(o) AS links "
            "OPTIONAL MATCH (v:EngramVector {id: e.id}) "
            "RETURN e.id, e.content, cues, links, v IS NOT NULL"
        )
        rows = [
            dict(zip(("id", "content", "cues", "links", "vector"), row, strict=True))
            for row in result.result_set
        ]
        tally = client.select_graph(graph).query("MATCH (t:EngramTally) RETURN t.engrams").result_set
    finally:
        client.connection.close()
    return rows, tally[0][0] if tally else None


def test_killing_falkordb_during_stores_leaves_no_half_memory(falkor_process, settings):
    server = falkor_process
    cfg = settings.model_copy(
        update={
            "db_type": "falkordb",
            "falkor_addr": server.address,
            "falkor_isolation": "graph",
            "log_level": "ERROR",
        }
    )
    memory = Memory.open(cfg)
    rng = random.Random(37)
    acknowledged: dict[str, str] = {}  # id -> content
    failed: list[str] = []
    retried: dict[str, dict] = {}
    item = 0
    stop = threading.Event()
    kills = 0
    killer_failed: list[BaseException] = []

    def killer() -> None:
        nonlocal kills
        try:
            # A kill fails a store mostly when it lands while a write batch is on the wire (the
            # failover retries carry a store over the others): kill on, up to four times as often,
            # until one has, so the run always proves something.
            while (kills < KILLS or not failed) and kills < 4 * KILLS and not stop.is_set():
                time.sleep(rng.uniform(0.05, 0.35))
                server.kill()
                kills += 1
                time.sleep(rng.uniform(0.0, 0.1))
                server.start()
        except BaseException as error:  # reported by the test below, with FalkorDB's own words
            killer_failed.append(error)

    thread = threading.Thread(target=killer, daemon=True)
    try:
        thread.start()
        deadline = time.monotonic() + 90
        while thread.is_alive() and time.monotonic() < deadline:
            content = f"Item {item}: " + " ".join(rng.sample(WORDS, 8)).capitalize() + "."
            item += 1
            try:
                result = memory.store(content, source="kill-run")
            except SmritiError:
                failed.append(content)
                continue
            acknowledged[result["id"]] = content
        stop.set()
        thread.join(30)
        assert not killer_failed, f"restarting FalkorDB failed: {killer_failed[0]}"
        assert kills >= KILLS, "the run ended before every kill"
        assert failed, "no store was failed by a kill: the test proves nothing"
        # The server is up again: every failed store, retried, makes a whole memory.
        for content in failed:
            retried[content] = memory.store(content, source="kill-run")
        rows, tally = _graph_rows(server.port, "alice_smriti")
    finally:
        stop.set()
        memory.close()

    by_id = {row["id"]: row for row in rows}
    assert set(acknowledged) <= set(by_id), "an acknowledged store was lost"
    for row in rows:
        assert row["cues"] > 0, f"half written (no cue links): {row['content']!r}"
        assert row["vector"], f"half written (no vector): {row['content']!r}"
        if not row["content"].startswith("Item 0:"):
            assert row["links"] > 0, f"half written (no associations): {row['content']!r}"
    assert tally == len(rows), "the kept engram count drifted"
    contents = [row["content"] for row in rows]
    for content, result in retried.items():
        assert contents.count(content) == 1, f"retried {content!r}: {contents.count(content)} copies"
        assert by_id[result["id"]]["content"] == content
    # Memories that did land whole before their answer was lost come back deduplicated, whole.
    assert len(rows) == len(acknowledged) + len(failed)
