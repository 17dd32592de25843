"""How far one recall's code reaches: the files it executes and the trace wrappers it enters.

Issue 24 measured these by hand; this script measures them the same way each time. It stores
three memories in a fresh SQLite memory (offline models), recalls once to warm the store's
first reads, then profiles one more ``Memory.recall`` (every thread, since LangGraph runs the
parallel branches in a pool) and prints the smriti files whose code ran and how many times the
trace wrapper of ``nodes/state.py`` was entered.

    .venv/bin/python -m bench.recall_path
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from bench.common import bench_settings

MEMORIES = (
    "Priya moved the billing service to Postgres",
    "The billing team meets on Mondays",
    "Postgres upgrades happen on Fridays",
)
QUERY = "billing Postgres"


def measure() -> dict[str, Any]:
    """``{"files": [...], "trace_wrappers": n, "steps": n}`` for one steady-state recall."""
    import smriti
    from smriti.memory import Memory

    root = Path(smriti.__file__).parent
    state = str(root / "nodes" / "state.py")
    files: set[str] = set()
    wrappers: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(str(root)) and "/.venv" not in name:
            files.add(str(Path(name).relative_to(root)))
            if name == state and frame.f_code.co_name in ("node", "async_node"):
                wrappers[frame.f_code.co_name] += 1

    with tempfile.TemporaryDirectory() as folder:
        settings = bench_settings(Path(folder), embedding_dims=64)
        with Memory.open(settings) as memory:
            for text in MEMORIES:
                memory.store(text)
            memory.recall(QUERY)  # the store's first reads (caches) are not what a recall costs
            sys.setprofile(profile)
            threading.setprofile(profile)
            try:
                out = memory.recall(QUERY, explain=True)
            finally:
                sys.setprofile(None)
                threading.setprofile(None)
    return {"files": sorted(files), "trace_wrappers": sum(wrappers.values()), "steps": len(out["trace"])}


def main() -> None:
    found = measure()
    print(f"files executed: {len(found['files'])}")
    for name in found["files"]:
        print(f"  {name}")
    print(f"trace wrapper entries: {found['trace_wrappers']} ({found['steps']} steps)")


if __name__ == "__main__":
    main()
