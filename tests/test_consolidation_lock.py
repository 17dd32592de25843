"""One consolidation of a memory at a time, across processes (``Memory.consolidate``'s lock).

Two processes open one SQLite memory as HTTP workers do (HTTP_WORKERS=2) and consolidate it at
once. Every memory was last used 30 days ago (one half-life): one run leaves each at 0.5. Two
runs that overlap both read the decay watermark before either moves it, and both multiply by the
decay since it: 0.25, the square. Left to chance the two rarely meet inside the decay step (a few
milliseconds), so each process holds at the point of the race, just after reading the watermark,
until the other has read it too (or 10 s have passed): without the lock both get there and the
test fails; with it the second one is still waiting for the lock, and reads the watermark the
first one left.
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from smriti.config import Settings
from smriti.errors import Busy
from smriti.memory import Memory
from smriti.stores.base import utcnow
from tests.envs import offline_env

MEMORIES = 40

# One process: consolidate, meeting the other right after reading the watermark; the second
# then also lets the first decay (and move the watermark) before going on, as a slower process
# would. (Both going on at once would both read 1.0 and both write 0.5: a lost update, not the
# double decay.)
CHILD = """
import sys, time
from pathlib import Path
import smriti.nodes.decay as decay
from smriti.memory import Memory

meeting, me = Path(sys.argv[1]), sys.argv[2]
read = decay.read_watermark

def wait_for(condition):
    deadline = time.monotonic() + 10
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)

def read_and_meet(context):
    value = read(context)
    (meeting / me).touch()
    wait_for(lambda: len(list(meeting.iterdir())) >= 2)
    if me == "second":
        wait_for(lambda: read(context) != value)
    return value

decay.read_watermark = read_and_meet
with Memory.open() as memory:
    print(memory.consolidate(wait=300)["decayed"])
"""


def _settings(location: Path) -> Settings:
    return Settings(
        storage_location=location,
        accessing_user="alice",
        llm_provider="heuristic",
        embedding_provider="hashing",
        embedding_dims=64,
        consolidation_interval=0,
        decay_half_life_days=30,
    )


def _seed(settings: Settings) -> None:
    with Memory.open(settings) as memory:
        ids = [
            memory.store(
                f"Service {n} of team {n % 7} writes audit events to queue {n * 7} in region {n % 5}.",
                importance=0.9,  # never pruned: every memory is read back
            )["id"]
            for n in range(MEMORIES)
        ]
        month_ago = utcnow() - timedelta(days=30)
        memory.context.store.update_engrams(
            {i: {"decay_factor": 1.0, "last_accessed_at": month_ago} for i in ids}
        )


def test_two_processes_consolidating_at_once_decay_once(tmp_path) -> None:
    settings = _settings(tmp_path / "store")
    _seed(settings)
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    env = {
        **os.environ,
        **offline_env(tmp_path / "store", HTTP_WORKERS="2", DECAY_HALF_LIFE_DAYS="30"),
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(meeting), name],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    ]
    reports = []
    for child in children:
        out, err = child.communicate(timeout=600)
        assert child.returncode == 0, err
        reports.append(out)
    assert len(reports) == 2
    with Memory.open(settings) as memory:
        strengths = [state.decay_factor for state in memory.context.store.engram_states()]
    assert len(strengths) == MEMORIES
    # One run's value, not its square (0.25): the second found them decayed already.
    assert min(strengths) == pytest.approx(0.5, abs=1e-3)
    assert max(strengths) == pytest.approx(0.5, abs=1e-3)


def test_a_consolidation_waits_its_bound_then_is_told_one_is_running(settings) -> None:
    """A holder elsewhere (here: the lock held by hand) makes a consolidation wait, then Busy,
    having changed nothing; the periodic one skips its round at once."""
    from smriti.runtime import Runtime
    from smriti.server.app import _periodic_consolidation

    with Memory.open(settings) as memory:
        stored = memory.store("Priya deploys the Atlas project with Terraform", importance=0.2)
        memory.context.store.update_engrams(
            {stored["id"]: {"last_accessed_at": utcnow() - timedelta(days=400)}}
        )
        with memory.context.store.exclusive("consolidation", wait=0):
            with pytest.raises(Busy, match=r"already running .* did not finish within 0.2 s"):
                memory.consolidate(wait=0.2)
            assert _periodic_consolidation(Runtime(settings, memory)) is None
            assert memory.context.store.get_engram(stored["id"]) is not None  # not pruned: nothing ran
        assert memory.consolidate(wait=0)["pruned"] == 1  # free: it runs
