"""`smriti export` on Kuzu, `smriti import` on FalkorDB over TCP or on SQLite: the memory moves intact."""

from __future__ import annotations

import json
import uuid

from typer.testing import CliRunner

from smriti.cli import app
from smriti.stores.records import LOCAL_META_KEYS
from tests.envs import offline_env

MEMORIES = [
    "Alice prefers PostgreSQL with pgvector for retrieval augmented generation projects.",
    "The deploy pipeline for project Atlas runs on GitHub Actions every night.",
    "Bob recommends cursor-based pagination for the orders API because offsets get slow.",
    "Alice and Bob agreed to move project Atlas to pgvector next quarter.",
]


def _env(tmp_path, **extra: str) -> dict[str, str]:
    return offline_env(tmp_path / "store", **extra)


def _run(env: dict[str, str], *args: str) -> str:
    result = CliRunner().invoke(app, list(args), env=env)
    assert result.exit_code == 0, (args, result.stdout, result.stderr, result.exception)
    return result.stdout


def _comparable(export_text: str) -> dict[str, list[str]]:
    """Records by kind; cue ids are backend-generated, so cues compare by name."""
    by_kind: dict[str, list[str]] = {}
    for line in filter(str.strip, export_text.splitlines()):
        record = json.loads(line)
        if record["kind"] == "meta" and record["key"] in LOCAL_META_KEYS:
            continue
        if record["kind"] == "cue":
            record.pop("id")
        if record["kind"] == "engram":  # float32 storage on the server: compare at 1e-5
            record["embedding"] = [round(x, 5) for x in record["embedding"]]
        for key, value in record.items():  # the last digit of a double may differ in transit
            if isinstance(value, float):
                record[key] = round(value, 9)
        by_kind.setdefault(record["kind"], []).append(json.dumps(record, sort_keys=True))
    return {kind: sorted(items) for kind, items in by_kind.items()}


def test_export_from_kuzu_import_into_falkordb_over_tcp(tmp_path, falkor_server):
    client, port = falkor_server
    graph = f"smriti_move_{uuid.uuid4().hex[:8]}"
    kuzu = _env(tmp_path, DB_TYPE="kuzu")
    falkor = _env(tmp_path, DB_TYPE="falkordb", FALKOR_ADDR=f"127.0.0.1:{port}", FALKOR_GRAPH=graph)
    try:
        for content in MEMORIES:
            _run(kuzu, "store", content, "--json")
        _run(kuzu, "consolidate", "--json")  # cluster ids and strengthened edges travel too
        dump = tmp_path / "alice.jsonl"
        _run(kuzu, "export", str(dump))

        assert "imported" in _run(falkor, "import", str(dump))
        moved = _comparable(_run(falkor, "export"))
        original = _comparable(dump.read_text())
        for kind in original:
            diff = set(moved.get(kind, [])) ^ set(original[kind])
            assert not diff, (kind, sorted(diff)[:2])
        assert {"engram", "cue", "encoded_by", "associated_with"} <= set(moved)

        found = json.loads(_run(falkor, "recall", "pgvector Atlas", "--json"))
        assert found["results"], found
        assert json.loads(_run(falkor, "stats", "--json"))["engrams"] == len(MEMORIES)
    finally:
        for name in client.list_graphs():
            if graph in name:
                client.select_graph(name).delete()


def test_export_from_kuzu_import_into_sqlite_the_move_auto_suggests(tmp_path):
    kuzu = _env(tmp_path, DB_TYPE="kuzu")
    auto = _env(tmp_path)  # DB_TYPE=auto: Kuzu while only memory.kuzu exists
    for content in MEMORIES:
        _run(kuzu, "store", content, "--json")
    _run(kuzu, "consolidate", "--json")
    assert json.loads(_run(auto, "stats", "--json"))["backend"] == "kuzu"
    dump = tmp_path / "alice.jsonl"
    _run(kuzu, "export", str(dump))

    sqlite = _env(tmp_path, DB_TYPE="sqlite")
    assert "imported" in _run(sqlite, "import", str(dump))
    moved = _comparable(_run(sqlite, "export"))
    original = _comparable(dump.read_text())
    for kind in original:
        diff = set(moved.get(kind, [])) ^ set(original[kind])
        assert not diff, (kind, sorted(diff)[:2])
    # Now that memory.sqlite exists, auto opens it.
    stats = json.loads(_run(auto, "stats", "--json"))
    assert (stats["backend"], stats["engrams"]) == ("sqlite", len(MEMORIES))
    assert json.loads(_run(auto, "recall", "pgvector Atlas", "--json"))["results"]


def test_auto_opens_the_go_servers_ladybug_store_without_a_new_sqlite(tmp_path):
    """A folder holding only ``memory.lbug`` (the Go server's users) is opened with LadybugDB.

    Real ``smriti`` processes: LadybugDB cannot share a process with Kuzu, which this one loads.
    """
    import importlib.util
    import subprocess
    import sys

    import pytest

    if importlib.util.find_spec("ladybug") is None:
        pytest.skip("ladybug is not installed (pip install 'smriti-graph[ladybug]')")

    def smriti(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "smriti.cli", *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    smriti({**base, **_env(tmp_path, DB_TYPE="ladybug")}, "store", MEMORIES[0])
    folder = tmp_path / "store" / "alice"
    assert (folder / "memory.lbug").exists() and not (folder / "memory.sqlite").exists()
    found = smriti({**base, **_env(tmp_path, DB_TYPE="auto")}, "recall", "pgvector", "--json")
    assert "PostgreSQL with pgvector" in found.stdout
    assert "memory.lbug" in found.stderr and "LadybugDB" in found.stderr  # said once, on stderr
    assert not (folder / "memory.sqlite").exists()
