"""SIGKILL during ``smriti import`` and during consolidation (issue 12): after a restart every
acknowledged memory is there and whole (with every cue it was stored or imported with), the file
is intact, and the interrupted work completes when run again.

Acknowledged means: for an import, the batches the CLI reported as written ("imported N/M
memories", printed once a batch has committed); for the server, the stores it answered. SQLite,
the default store, is the one whose writes are transactions (see test_atomic_store.py for kills
during stores).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from tests.envs import offline_env
from tests.test_server_stdio import INITIALIZE, _rpc

DIMS = 64
VOCABULARY = [f"topic-{i}" for i in range(300)]


def write_export(path: Path, memories: int, seed: int = 1) -> dict[str, set[str]]:
    """A synthetic export of ``memories`` engrams, four cues each, each associated with the one
    before; returns each engram's cue names (what "whole" means for it)."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(memories, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    now = datetime.now(UTC)
    cues: dict[str, set[str]] = {}
    with path.open("w") as out:
        out.write(json.dumps({"kind": "meta", "key": "embedding_dims", "value": str(DIMS)}) + "\n")
        for i in range(memories):
            engram_id = f"m{i:06d}"
            at = (now - timedelta(minutes=i)).isoformat()
            names = {VOCABULARY[int(j)] for j in rng.choice(len(VOCABULARY), size=4, replace=False)}
            cues[engram_id] = names
            record = {
                "kind": "engram",
                "id": engram_id,
                "content": f"Memory {i} about {' and '.join(sorted(names))}.",
                "importance": 0.9,  # never pruned: a consolidation must not remove what is checked
                "created_at": at,
                "last_accessed_at": at,
                "embedding": [round(float(v), 6) for v in vectors[i]],
            }
            out.write(json.dumps(record) + "\n")
        for name in VOCABULARY:
            out.write(
                json.dumps({"kind": "cue", "id": f"cue-{name}", "name": name, "cue_type": "keyword"}) + "\n"
            )
        for engram_id, names in cues.items():
            for name in sorted(names):
                out.write(json.dumps({"kind": "encoded_by", "engram_id": engram_id, "cue": name}) + "\n")
        for i in range(1, memories):
            link = {"kind": "associated_with", "source_id": f"m{i:06d}", "target_id": f"m{i - 1:06d}"}
            link |= {"strength": 0.6, "relation_type": "similar", "created_at": now.isoformat()}
            out.write(json.dumps(link) + "\n")
    return cues


def check_whole(database: Path, expected: dict[str, set[str]], acknowledged: set[str]) -> set[str]:
    """Every acknowledged memory is there, every memory there has all its cues; returns the ids there."""
    conn = sqlite3.connect(database)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = conn.execute(
            "SELECT e.id, c.name FROM engram e LEFT JOIN encoded_by x ON x.engram = e.rowid "
            "LEFT JOIN cue c ON c.rowid = x.cue"
        ).fetchall()
        fts = conn.execute("SELECT count(*) FROM engram_fts").fetchone()[0]
        decay = conn.execute("SELECT min(decay_factor), max(decay_factor) FROM engram").fetchone()
    finally:
        conn.close()
    found: dict[str, set[str]] = {}
    for engram_id, name in rows:
        found.setdefault(engram_id, set())
        if name is not None:
            found[engram_id].add(name)
    missing = acknowledged - set(found)
    assert not missing, f"{len(missing)} acknowledged memories lost, e.g. {sorted(missing)[:3]}"
    for engram_id, names in found.items():
        if engram_id in expected:
            assert names == expected[engram_id], f"{engram_id} is half written: {names}"
        else:
            assert names, f"{engram_id} has no cues"
    assert fts == len(found), "the keyword index does not match the memories"
    if found:
        assert 0.0 <= decay[0] <= decay[1] <= 1.0
    return set(found)


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        **offline_env(tmp_path / "store", DB_TYPE="sqlite", EMBEDDING_DIMS=str(DIMS)),
        "LOG_LEVEL": "ERROR",
        "MIN_FREE_DISK_MB": "0",
        "COLUMNS": "200",  # rich must not wrap the progress lines
    }


_PROGRESS = re.compile(r"imported (\d+)/(\d+) memories")


def test_sigkill_during_import_keeps_every_committed_batch_whole_and_the_import_resumes(tmp_path):
    export = tmp_path / "export.jsonl"
    expected = write_export(export, 6_000)
    order = sorted(expected)  # the file's order, which import batches follow
    env = _env(tmp_path)
    database = tmp_path / "store" / "alice" / "memory.sqlite"
    rng = random.Random(3)
    acknowledged: set[str] = set()
    for _ in range(2):
        child = subprocess.Popen(
            [sys.executable, "-m", "smriti.cli", "import", str(export)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        lines = []
        first = child.stderr.readline()  # the first batch has committed (or the import ended)
        lines.append(first)
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        lines += child.stderr.read().splitlines()
        written = [int(m.group(1)) for line in lines if (m := _PROGRESS.search(line))]
        # Batches written in an earlier run are skipped but reported again: the count restarts.
        acknowledged |= set(order[: max(written, default=0)])
        check_whole(database, expected, acknowledged)
    # Run to the end: the interrupted import resumes and completes; the result is whole.
    done = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "import", str(export)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert check_whole(database, expected, set(order)) == set(order)


def test_sigkill_during_consolidation_keeps_every_answered_store_whole(tmp_path):
    export = tmp_path / "export.jsonl"
    expected = write_export(export, 2_000, seed=2)
    env = _env(tmp_path)
    database = tmp_path / "store" / "alice" / "memory.sqlite"
    imported = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "import", str(export)], env=env, capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    acknowledged = set(expected)
    rng = random.Random(5)
    interrupted = 0
    # Consolidating 2,000 memories takes a few hundred ms on an idle machine: the first kill comes
    # early enough to land during it however fast the machine, the others at random moments.
    delays = [0.05] + [rng.uniform(0.05, 1.2) for _ in range(2)]
    for cycle, delay in enumerate(delays):
        server = subprocess.Popen(
            [sys.executable, "-m", "smriti.server"],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert server.stdin is not None and server.stdout is not None

        def send(line: str, *, _server=server) -> None:
            _server.stdin.write(line)
            _server.stdin.flush()

        send(_rpc(1, "initialize", INITIALIZE) + _rpc(None, "notifications/initialized"))
        assert json.loads(server.stdout.readline())["id"] == 1
        # Consolidation and stores at once: the server runs them concurrently.
        send(_rpc(2, "tools/call", {"name": "smriti_manage", "arguments": {"action": "consolidate"}}))
        for item in range(40):
            content = f"Cycle {cycle} note {item}: Alice tuned {VOCABULARY[item]} and {VOCABULARY[item + 1]}."
            send(_rpc(100 + item, "tools/call", {"name": "smriti_store", "arguments": {"content": content}}))
        replies: list[str] = []
        reader = threading.Thread(target=replies.extend, args=(server.stdout,), daemon=True)
        reader.start()
        time.sleep(delay)
        server.send_signal(signal.SIGKILL)
        server.wait(30)
        reader.join(10)
        answered: list[str] = []
        replies_by_id = {json.loads(line).get("id") for line in replies}
        interrupted += 2 not in replies_by_id  # killed before consolidation answered
        for line in replies:
            reply = json.loads(line)
            if reply.get("id", 0) >= 100 and not reply["result"]["isError"]:
                answered.append(reply["result"]["structuredContent"]["id"])
        acknowledged |= set(answered)
        present = check_whole(database, expected, acknowledged)
        assert set(expected) <= present
    assert interrupted, "no kill landed during a consolidation"
    # Consolidation completes afterwards, and the store answers.
    done = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "consolidate", "--json"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["pruned"] == 0
    check_whole(database, expected, acknowledged)
