"""A full disk (issue 12, point 2): a store fails with a clear error, the server stays up, nothing
acknowledged is lost, and writes succeed again once space returns.

Three levels, from the most real to the always-available:

* the MCP server over stdio with its store on a real, small tmpfs, mounted in a private user
  and mount namespace (``unshare -rm``: no root needed where unprivileged user namespaces are
  allowed; skipped elsewhere). A ballast file fills the disk; deleting it (through
  ``/proc/PID/root``, the server's view of its mounts) gives the space back. SQLite runs with
  the margin off (the engine itself meets ENOSPC: SQLITE_FULL); Kuzu with a margin, which
  refuses writes before the engine meets a full disk (a full disk once crashed it);
* SQLite in-process with ``PRAGMA max_page_count``, a real engine limit that fails writes with
  the very error of a full disk (SQLITE_FULL, "database or disk is full");
* the free-space margin in-process, on SQLite and Kuzu.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from smriti.errors import StoreFull
from smriti.memory import Memory
from tests.envs import offline_env
from tests.test_server_stdio import INITIALIZE, _read_replies, _rpc

WORDS = "postgres kafka redis nginx docker terraform grafana billing invoices pagination cursor".split()


def _content(item: int) -> str:
    # Long, and unlike any other (no near-duplicate merging): each memory takes tens of
    # kilobytes (text, terms, embedding), so the disk fills in a few dozen stores.
    rng = random.Random(item)
    words = [f"{rng.choice(WORDS)}{rng.randrange(100_000)}" for _ in range(1_800)]
    return (f"Memory {item} about {WORDS[item % len(WORDS)]}: " + " ".join(words))[:19_000] + "."


def _unshare_works() -> bool:
    if shutil.which("unshare") is None or not sys.platform.startswith("linux"):
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt 2>/dev/null || exit 3"],
        capture_output=True,
        timeout=10,
    )
    return probe.returncode == 0


class Session:
    """The server in its own namespaces with STORAGE_LOCATION on a tmpfs, driven over stdio."""

    def __init__(
        self, tmp_path: Path, db_type: str, min_free_mb: float, tmpfs_mb: int, ballast_mb: float
    ) -> None:
        self.mount = tmp_path / "disk"  # an empty folder, mounted over inside the namespace
        self.mount.mkdir()
        env = {
            **os.environ,
            **offline_env(self.mount / "store", DB_TYPE=db_type, MIN_FREE_DISK_MB=str(min_free_mb)),
            "LOG_LEVEL": "WARNING",
            "MEMORY_FABRIC_MAX_RESULTS": "1000",  # the final check lists every memory
            # No index build on the way (Kuzu's takes tens of MB at once): the test is about stores.
            "INDEX_THRESHOLD": "100000",
        }
        script = (
            'mount -t tmpfs -o size="$1" tmpfs "$0" && head -c "$2" /dev/zero > "$0/ballast" '
            '&& shift 3 && exec "$@"'
        )
        self.process = subprocess.Popen(
            [
                *("unshare", "-rm", "sh", "-c", script, str(self.mount), f"{tmpfs_mb}m"),
                *(str(int(ballast_mb * 1024 * 1024)), "--", sys.executable, "-m", "smriti.server"),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        self.next_id = 1
        self.call_raw("initialize", INITIALIZE)
        self.send(_rpc(None, "notifications/initialized"))

    def send(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode())
        self.process.stdin.flush()

    def call_raw(self, method: str, params: dict) -> dict:
        message_id, self.next_id = self.next_id, self.next_id + 1
        self.send(_rpc(message_id, method, params))
        return next(r for r in _read_replies(self.process, {message_id}) if r.get("id") == message_id)

    def tool(self, name: str, **arguments) -> dict:
        return self.call_raw("tools/call", {"name": name, "arguments": arguments})["result"]

    def free_space(self) -> None:
        """Delete the ballast, in the server's own view of its mounts."""
        os.remove(f"/proc/{self.process.pid}/root{self.mount}/ballast")

    def close(self) -> bytes:
        """Close stdin and wait for the exit; a server that does not exit is killed (and fails)."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        return self.process.stderr.read()


@pytest.mark.skipif(not _unshare_works(), reason="no unprivileged user+mount namespaces (unshare -rm)")
@pytest.mark.parametrize(
    ("db_type", "min_free_mb", "tmpfs_mb", "ballast_mb"),
    [
        ("sqlite", 0, 8, 7),  # no margin: SQLite itself meets the full disk
        # A margin, which refuses before Kuzu meets a full disk: larger than what one write can
        # take at once (a checkpoint copies up to 16 MB of WAL; index builds take more).
        ("kuzu", 24, 64, 38),
    ],
)
def test_server_on_a_full_tmpfs_refuses_clearly_stays_up_and_recovers(
    tmp_path, db_type, min_free_mb, tmpfs_mb, ballast_mb
):
    session = Session(tmp_path, db_type, min_free_mb, tmpfs_mb, ballast_mb)
    try:
        acknowledged: list[str] = []
        refusal = None
        for item in range(400):
            result = session.tool("smriti_store", content=_content(item), source="fill")
            if result["isError"]:
                refusal = result["content"][0]["text"]
                break
            acknowledged.append(result["structuredContent"]["id"])
        assert refusal is not None, "the disk never filled up"
        assert acknowledged, "not one memory fitted before the disk was full"
        assert "full" in refusal and "nothing was written" in refusal, refusal
        assert "Free some space" in refusal and str(tmp_path) not in refusal, refusal
        # Still refused while full, and still answering everything else.
        assert session.tool("smriti_store", content=_content(999), source="fill")["isError"]
        stats = session.tool("smriti_manage", action="stats")
        assert stats["structuredContent"]["details"]["engrams"] == len(acknowledged)
        listed = session.tool("smriti_recall", mode="list", limit=20)["structuredContent"]
        assert listed["total_results"] == min(20, len(acknowledged))
        assert not session.tool("smriti_recall", query=WORDS[0])["isError"]

        session.free_space()
        again = session.tool("smriti_store", content="Space is back: Carol prefers offset pagination.")
        assert not again["isError"], again
        acknowledged.append(again["structuredContent"]["id"])
        found = session.tool("smriti_recall", query="Carol offset pagination", limit=3)["structuredContent"]
        assert found["results"][0]["id"] == again["structuredContent"]["id"]
        assert session.tool("smriti_manage", action="consolidate")["isError"] is False
        stats = session.tool("smriti_manage", action="stats")["structuredContent"]["details"]
        assert stats["engrams"] == len(acknowledged)
        every = session.tool("smriti_recall", mode="list", limit=1000)["structuredContent"]
        assert {r["id"] for r in every["results"]} == set(acknowledged)
        assert all(r["entities"] for r in every["results"]), "a memory lost its cues"
    finally:
        if session.process.poll() is None:
            stderr = session.close()
        else:
            stderr = session.process.stderr.read() if session.process.stderr else b""
    assert session.process.returncode == 0, stderr.decode()[-3000:]
    assert b"Traceback" not in stderr, stderr.decode()[-3000:]


# ----------------------------------------------------------------------------- in-process
def test_sqlite_full_fails_clearly_rolls_back_and_recovers(make_context):
    """SQLITE_FULL from a real engine limit: PRAGMA max_page_count caps the file at its current
    size, as a full disk would, and lifting the cap is the space coming back."""
    memory = Memory(make_context(db_type="sqlite", min_free_disk_mb=0))
    store = memory.context.store
    kept = memory.store("Alice prefers Postgres with pgvector for retrieval projects.", source="chat")
    before = list(memory.export_records())
    pages = store.db._writer.execute("PRAGMA page_count").fetchone()[0]
    store.db._writer.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreFull, match="is full") as refused:
        for item in range(200):  # free pages inside the file absorb the first few
            memory.store(_content(item), source="fill")
    assert "nothing was written" in str(refused.value)
    stored = memory.stats()["engrams"] - 1
    # Whatever was refused left nothing behind: every engram is whole, the first untouched.
    assert memory.context.store.uncued_engram_ids() == []
    assert [r for r in memory.export_records() if r.get("id") == kept["id"]] == [
        r for r in before if r.get("id") == kept["id"]
    ]
    assert memory.recall("pgvector retrieval")["results"][0]["id"] == kept["id"]  # reads still work

    store.db._writer.execute("PRAGMA max_page_count = 1073741823")
    again = memory.store("Space is back: Carol prefers offset pagination.", source="chat")
    assert memory.stats()["engrams"] == stored + 2
    assert memory.recall("Carol offset pagination")["results"][0]["id"] == again["id"]


@pytest.mark.parametrize("db_type", ["sqlite", "kuzu"])
def test_below_the_free_space_margin_writes_are_refused_before_the_database(make_context, db_type):
    context = make_context(db_type=db_type)
    memory = Memory(context)
    memory.store("Alice prefers Postgres with pgvector for retrieval projects.")
    before = list(memory.export_records())
    free_mb = shutil.disk_usage(context.store.path.parent).free / 2**20
    # A margin above what the disk has free: the disk counts as full.
    context.settings = context.settings.model_copy(update={"min_free_disk_mb": free_mb * 2 + 1024})
    with pytest.raises(StoreFull, match="nearly full"):
        memory.store("Bob recommends cursor pagination for the orders API.")
    at = "2026-01-01T00:00:00+00:00"
    records = [
        {
            "kind": "engram",
            "id": str(uuid.uuid4()),
            "content": "imported",
            "created_at": at,
            "last_accessed_at": at,
        }
    ]
    with pytest.raises(StoreFull):
        memory.import_records(records)
    with pytest.raises(StoreFull):
        memory.consolidate()
    assert list(memory.export_records()) == before
    assert memory.recall("pgvector")["total_results"] == 1  # reads are never refused

    context.settings = context.settings.model_copy(update={"min_free_disk_mb": 0})
    memory.store("Bob recommends cursor pagination for the orders API.")
    assert memory.import_records(records) == 1
    assert memory.stats()["engrams"] == 3
    assert json.dumps(memory.consolidate(), default=str)
