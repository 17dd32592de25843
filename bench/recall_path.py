"""How far one recall's code reaches: the files it executes and the trace wrappers it enters.

Issue 24 measured these by hand; the measurement now lives in ``smriti.cli.docs`` (``recall_run``),
which also writes it into docs/architecture.md: three memories in a fresh SQLite memory (offline
models), one recall to warm the store's first reads, then one profiled recall per mode (every
thread). This script prints what it found.

    .venv/bin/python -m bench.recall_path
"""

from __future__ import annotations

from typing import Any


def measure() -> dict[str, Any]:
    """``{"files": [...], "trace_wrappers": n, "steps": n}`` for one steady-state recall."""
    from smriti.cli.docs import recall_run

    run = recall_run()
    return {"files": list(run.files), "trace_wrappers": run.trace_wrappers, "steps": len(run.steps["recall"])}


def main() -> None:
    found = measure()
    print(f"files executed: {len(found['files'])}")
    for name in found["files"]:
        print(f"  {name}")
    print(f"trace wrapper entries: {found['trace_wrappers']} ({found['steps']} steps)")


if __name__ == "__main__":
    main()
