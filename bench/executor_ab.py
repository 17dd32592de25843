"""One executor (issue 43): production's compiled LangGraph graphs, in stages, against the direct
runner of an older checkout, through the real shared server, interleaved, by wall and by CPU.

    git worktree add /work/wt/executor-base 6e3df8b     # the runner, at the branch point
    SMRITI_BENCH_DATA=/work/shared/bench .venv/bin/python -m bench.executor_ab \\
        --before /work/wt/executor-base [--size 10000] [--calls 60] [--spawns 6] [--imports 1000]

Both sides run this venv's Python (the same packages); the "before" side imports its ``smriti``
from ``BEFORE/src`` (``PYTHONPATH``). Each side has its own copy of one store of ``--size``
memories (``bench.first_minute``'s, hashing embedder) and its own shared server (the default
path: ``smriti-mcp`` relays to it), both running at once.

* **Per call** (warm): recall (mode recall, limit 10, a cycle of questions) and store (a new
  text each call) through each side's relay, the two sides called in turn, which one goes first
  flipping every call. Wall: the client's clock, median. CPU: the shared server process's
  (``/proc/PID/stat``: every thread's, the ended ones' too), summed over the calls and divided
  by their number (the clock ticks are 10 ms: one call's reading is too coarse for a median).
* **Import**: ``smriti import FILE --from text`` of ``--imports`` new texts into a fresh store,
  in-process (the store pipeline once per memory), alternated; wall, and the child's CPU
  (``os.wait4``'s rusage).
* **Cold start**: with the side's shared server stopped, spawn ``smriti-mcp``, handshake, one
  recall: the client's clock to the answer, and the shared server's CPU up to then;
  ``--spawns`` of each side, alternated. The new side imports LangGraph in a background thread
  from the server's first moment (``pipelines/stages.py``), the runner never does.

Results go to stdout (a Markdown table) and progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import data_dir
from bench.first_minute import Pipe, prepare, stop_shared
from bench.scale_corpus import make_texts
from bench.scale_mcp import server_env
from bench.scale_session import script

SIDES = ("runner", "graphs")
QUESTIONS = [
    "What did Caroline say about the adoption agency?",
    "Who moved the invoices service to Postgres?",
    "When did Melanie go camping with her kids?",
    "What does the team use for pagination?",
    "Where did Dana move in May?",
]
TICK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    load = os.getloadavg()[0]
    print(f"[executor_ab {time.strftime('%H:%M:%S')} load {load:.1f}] {message}", file=sys.stderr, flush=True)


def process_cpu(pid: int) -> float:
    """Seconds of CPU ``pid`` used so far (user + system, all threads, ended ones included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime: fields 14 and 15


class Side:
    """One checkout's shared server on its own copy of the store."""

    def __init__(self, name: str, source: Path | None, storage: Path, dims: int, errlog: Any) -> None:
        self.name = name
        env = server_env(storage, dims, "bench", None)
        env.update(SMRITI_SHARED="true", SHARED_IDLE_TIMEOUT="900")
        if source is not None:
            env["PYTHONPATH"] = str(source / "src")
        else:
            env.pop("PYTHONPATH", None)
        self.env = env
        self.storage = storage
        self.errlog = errlog
        self.pipe: Pipe | None = None
        self.pid = 0

    def server_pid(self) -> int:
        from smriti.config import Settings
        from smriti.server.shared.client import read_state, shared_paths

        paths = shared_paths(Settings(storage_location=self.storage, accessing_user="bench"))
        state = read_state(paths)
        if not state:
            raise SystemExit(f"{self.name}: no shared server state in {paths.state}")
        return int(state["pid"])

    def open(self) -> None:
        self.pipe = Pipe(script("smriti-mcp"), self.env, self.errlog)
        self.pipe.handshake()
        self.call("smriti_recall", {"query": QUESTIONS[0], "limit": 10})  # warm (untimed)
        self.pid = self.server_pid()

    def call(self, tool: str, arguments: dict[str, Any]) -> float:
        """Wall seconds of one tool call."""
        assert self.pipe is not None
        started = time.perf_counter()
        self.pipe.request("tools/call", {"name": tool, "arguments": arguments})
        return time.perf_counter() - started

    def cpu(self) -> float:
        return process_cpu(self.pid)

    def close(self) -> None:
        if self.pipe is not None:
            self.pipe.close()
        stop_shared(self.env)


def per_call(sides: dict[str, Side], calls: int, texts: list[str]) -> dict[str, dict[str, Any]]:
    wall: dict[str, dict[str, list[float]]] = {kind: {s: [] for s in sides} for kind in ("recall", "store")}
    cpu: dict[str, dict[str, float]] = {kind: dict.fromkeys(sides, 0.0) for kind in ("recall", "store")}
    for side in sides.values():
        side.open()
    for n in range(calls):
        order = list(sides) if n % 2 == 0 else list(reversed(sides))
        for kind in ("recall", "store"):
            for name in order:
                side = sides[name]
                before = side.cpu()
                if kind == "recall":
                    seconds = side.call(
                        "smriti_recall", {"query": QUESTIONS[n % len(QUESTIONS)], "limit": 10}
                    )
                else:
                    seconds = side.call("smriti_store", {"content": texts[n], "source": "bench"})
                cpu[kind][name] += side.cpu() - before
                wall[kind][name].append(seconds)
        if n % 10 == 9:
            log(f"{n + 1} calls of each")
    out: dict[str, dict[str, Any]] = {}
    for kind in ("recall", "store"):
        out[kind] = {
            name: {
                "wall_p50_ms": round(statistics.median(wall[kind][name]) * 1000, 2),
                "cpu_mean_ms": round(cpu[kind][name] / calls * 1000, 2),
            }
            for name in sides
        }
    return out


def cold_start(sides: dict[str, Side], spawns: int) -> dict[str, dict[str, list[float]]]:
    times: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in sides}
    for n in range(spawns):
        for name in SIDES if n % 2 == 0 else tuple(reversed(SIDES)):
            side = sides[name]
            stop_shared(side.env)
            pipe = Pipe(script("smriti-mcp"), side.env, side.errlog)
            pipe.handshake()
            answered = pipe.request(
                "tools/call", {"name": "smriti_recall", "arguments": {"query": QUESTIONS[0]}}
            )
            cpu = process_cpu(side.server_pid())
            pipe.close()
            times[name]["wall"].append(answered)
            times[name]["cpu"].append(cpu)
            log(f"cold start {name}: {answered:.2f} s, server CPU {cpu:.2f} s")
    for side in sides.values():
        stop_shared(side.env)
    return times


def imports(sides: dict[str, Side], count: int, rounds: int, work: Path) -> dict[str, dict[str, list[float]]]:
    corpus = make_texts(data_dir(), count, seed=11)
    source = work / "import.txt"
    source.write_text("\n\n".join(text.replace("\n\n", "\n") for text in corpus.texts) + "\n")
    results: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in sides}
    for n in range(rounds):
        for name in SIDES if n % 2 == 0 else tuple(reversed(SIDES)):
            folder = work / f"import-{name}-{n}"
            env = {**sides[name].env, "STORAGE_LOCATION": str(folder), "SMRITI_SHARED": "false"}
            started = time.perf_counter()
            child = subprocess.Popen(
                [*script("smriti"), "import", str(source), "--from", "text"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=sides[name].errlog,
            )
            _, status, usage = os.wait4(child.pid, 0)
            seconds = time.perf_counter() - started
            if os.waitstatus_to_exitcode(status) != 0:
                raise SystemExit(f"the {name} import failed")
            results[name]["wall"].append(seconds)
            results[name]["cpu"].append(usage.ru_utime + usage.ru_stime)
            log(f"import {name}: {seconds:.1f} s, CPU {usage.ru_utime + usage.ru_stime:.1f} s")
            shutil.rmtree(folder, ignore_errors=True)
    return results


def _row(label: str, runner: float, graphs: float, unit: str) -> str:
    change = (graphs / runner - 1) * 100 if runner else float("nan")
    return f"| {label} | {runner:.2f} {unit} | {graphs:.2f} {unit} | {change:+.1f} % |"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the runner's checkout (its src is used)")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--spawns", type=int, default=6)
    parser.add_argument("--imports", type=int, default=1000, help="memories per import")
    parser.add_argument("--import-rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    storage, _ = prepare(args.size, args.dims)
    report: dict[str, Any] = {"size": args.size, "dims": args.dims, "loads": [os.getloadavg()[0]]}
    with tempfile.TemporaryDirectory(prefix="smriti-executor-ab-") as temporary:
        work = Path(temporary)
        errlog = (work / "stderr.log").open("a")
        sides: dict[str, Side] = {}
        for name, source in (("runner", args.before), ("graphs", None)):
            copy = work / f"store-{name}"
            shutil.copytree(storage, copy)
            sides[name] = Side(name, source, copy, args.dims, errlog)
        fresh = make_texts(data_dir(), args.size, extra=args.calls).extra
        try:
            log(f"per call: {args.calls} recalls and stores on each side, alternated")
            report["per_call"] = per_call(sides, args.calls, fresh)
            report["loads"].append(os.getloadavg()[0])
            for side in sides.values():
                side.close()
            log("cold starts")
            report["cold"] = cold_start(sides, args.spawns)
            report["loads"].append(os.getloadavg()[0])
            if args.imports:
                log(f"imports of {args.imports}")
                report["import"] = imports(sides, args.imports, args.import_rounds, work)
                report["loads"].append(os.getloadavg()[0])
        finally:
            for side in sides.values():
                stop_shared(side.env)
            errlog.close()
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    print("| measure | runner (before) | compiled graphs | change |")
    print("|---|---:|---:|---:|")
    for kind in ("recall", "store"):
        by = report["per_call"][kind]
        print(
            _row(
                f"{kind} at {args.size}, p50 wall",
                by["runner"]["wall_p50_ms"],
                by["graphs"]["wall_p50_ms"],
                "ms",
            )
        )
        print(
            _row(
                f"{kind} at {args.size}, server CPU per call",
                by["runner"]["cpu_mean_ms"],
                by["graphs"]["cpu_mean_ms"],
                "ms",
            )
        )
    cold = report["cold"]
    for measure, label in (
        ("wall", "spawn to first recall, median wall"),
        ("cpu", "server CPU to first recall, median"),
    ):
        before, after = (statistics.median(cold[name][measure]) for name in SIDES)
        print(_row(label, before, after, "s"))
    if "import" in report:
        for measure, label in (("wall", "wall"), ("cpu", "CPU")):
            before, after = (statistics.median(report["import"][name][measure]) for name in SIDES)
            print(_row(f"import of {args.imports} (--from text), {label}", before, after, "s"))
    print(f"\nload (1 min) at the start and after each part: {[round(x, 1) for x in report['loads']]}")
    ranges = {name: f"{min(v['wall']):.2f}-{max(v['wall']):.2f}" for name, v in cold.items()}
    print(f"cold start ranges (wall): runner {ranges['runner']} s, compiled graphs {ranges['graphs']} s")
    return report


if __name__ == "__main__":
    main()
