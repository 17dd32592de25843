"""A store is atomic on SQLite: a failing step, or SIGKILL mid-store, leaves the whole memory or none."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from smriti.memory import Memory
from tests.envs import offline_env

WORDS = (
    "postgres pgvector kubernetes billing invoice stripe garden tomato compost coffee espresso "
    "grinder atlas deploy pipeline pagination cursor python rust golang kafka redis nginx docker "
    "terraform ansible grafana prometheus alice bob carol dave erin frank grace heidi"
).split()


def _content(rng: random.Random, run: int, item: int) -> str:
    return f"Run {run} item {item}: " + " ".join(rng.sample(WORDS, 8)).capitalize() + "."


def test_the_store_pipeline_runs_in_the_calling_thread(make_context, monkeypatch):
    """Memory.store's transaction belongs to its thread: every node must run there too."""
    memory = Memory(make_context())
    store = memory.context.store
    seen: dict[str, int] = {}
    for method in ("create_engram", "link_cues", "associate_many", "add_cooccurrences", "ensure_indexes"):
        original = getattr(store, method)

        def spy(*args, _original=original, _name=method, **kwargs):
            seen[_name] = threading.get_ident()
            return _original(*args, **kwargs)

        monkeypatch.setattr(store, method, spy)
    memory.store("Alice moved the search index to postgres with pgvector", source="chat")
    memory.store("Alice tuned the pgvector index on postgres for billing", source="chat")
    assert {"create_engram", "associate_many", "ensure_indexes"} <= set(seen)
    assert set(seen.values()) == {threading.get_ident()}


@pytest.mark.parametrize("failing", ["ensure_indexes", "associate_many", "link_cues"])
def test_a_store_whose_step_fails_leaves_nothing_behind(make_context, monkeypatch, failing):
    memory = Memory(make_context())
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
    assert after["extra"]["co_occurrences"] == before["extra"]["co_occurrences"]
    assert after["extra"]["relations"] == before["extra"]["relations"]
    assert list(memory.export_records()) == exported
    assert memory.recall("keyset invoices", mode="search")["results"][0]["text"].startswith("Bob recommends")
    # The store works again afterwards.
    memory.store("Carol prefers offset pagination for admin screens", source="chat")
    assert memory.stats()["engrams"] == before["engrams"] + 1


CHILD = textwrap.dedent(
    """
    import random, sys
    from smriti.memory import Memory
    run, seed = int(sys.argv[1]), int(sys.argv[2])
    words = sys.argv[3].split()
    rng = random.Random(seed)
    memory = Memory.open()
    print("ready", flush=True)
    for item in range(100000):
        content = f"Run {run} item {item}: " + " ".join(rng.sample(words, 8)).capitalize() + "."
        result = memory.store(content, source=f"run-{run}")
        print("ack", result["id"], flush=True)
    """
)


def test_sigkill_mid_store_leaves_whole_memories_and_keeps_every_acknowledged_one(tmp_path):
    env = {**os.environ, **offline_env(tmp_path / "store"), "DB_TYPE": "sqlite", "LOG_LEVEL": "ERROR"}
    rng = random.Random(7)
    acknowledged: list[str] = []
    for run in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(run), str(run), " ".join(WORDS)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        # Kill at a random moment once stores are flowing (the first one also pays the start-up,
        # which a loaded machine can stretch past any fixed delay).
        first = child.stdout.readline().split()
        assert first[:1] == ["ack"], first
        time.sleep(rng.uniform(0.05, 0.8))
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        acks = [first[1]] + [
            line.split()[1] for line in child.stdout.read().splitlines() if line.startswith("ack ")
        ]
        acknowledged += acks

    path = tmp_path / "store" / "alice" / "memory.sqlite"
    conn = sqlite3.connect(path)
    try:
        engrams = conn.execute("SELECT rowid, id, content, source FROM engram").fetchall()
        ids = {id_ for _, id_, _, _ in engrams}
        assert set(acknowledged) <= ids, "an acknowledged store was lost"
        assert len(ids) - len(set(acknowledged)) <= 4, "at most one unacknowledged store per kill"
        fts_rows = {row[0] for row in conn.execute("SELECT rowid FROM engram_fts")}
        assert fts_rows == {rowid for rowid, _, _, _ in engrams}
        for rowid, id_, content, source in engrams:
            cues = conn.execute("SELECT count(*) FROM encoded_by WHERE engram = ?", (rowid,)).fetchone()[0]
            assert cues > 0, f"{id_} ({content!r}) has no cues: half written"
            item = int(content.split()[3].rstrip(":"))
            if item > 0:  # every later memory of a run links to the run's previous ones (same source)
                links = conn.execute(
                    "SELECT count(*) FROM associated_with WHERE a = ? OR b = ?", (rowid, rowid)
                ).fetchone()[0]
                assert links > 0, f"{id_} ({content!r}, {source}) has no associations: half written"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    # And the store opens and answers normally afterwards.
    result = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "stats", "--json"], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["engrams"] == len(ids)
