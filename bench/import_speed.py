"""How long ``smriti import FILE --from text`` takes with the local MiniLM embedder against hashing.

N paragraphs (LoCoMo turns and HotpotQA passages, mixed as ``bench/scale_corpus.py`` mixes
them, from ``$SMRITI_BENCH_DATA``; written to a temporary file, never into the repository)
are imported by the real CLI, a subprocess, into a fresh SQLite store each run, offline
(heuristic analysis), once per embedder per round, the order alternating between rounds. Each
run reports its wall time and the import's own ``time:`` line (embedding, analysis, storing).

    SMRITI_BENCH_DATA=/work/shared/bench .venv/bin/python -m bench.import_speed [--memories 1000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import command_line, data_dir
from bench.scale_corpus import make_texts
from bench.scale_session import script

PROVIDERS = ("minilm", "hashing")
BEFORE = " (before)"
# The import's last line on stderr (cli/importers/items.py, Phases.line); "waited" is how much of
# the embedding the stores waited for (all of it before the embedding ran ahead in a thread).
_PHASES = re.compile(
    r"time: embedding (?P<embedding>[\d.]+) s(?: \((?P<waited>[\d.]+) s waited for\))?,"
    r" analysis (?P<analysis>[\d.]+) s, storing (?P<storing>[\d.]+) s"
)


def write_paragraphs(path: Path, n: int) -> None:
    """N paragraphs, one per blank-line separated block (each text's whitespace collapsed and a
    leading Markdown heading mark dropped, so that each text is exactly one paragraph)."""
    texts = make_texts(data_dir(), n).texts
    blocks = [" ".join(text.split()).lstrip("#").strip() for text in texts]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")


def import_env(storage: Path, provider: str) -> dict[str, str]:
    return {
        **os.environ,
        "STORAGE_LOCATION": str(storage),
        "ACCESSING_USER": "bench",
        "LLM_PROVIDER": "heuristic",
        "EMBEDDING_PROVIDER": provider,
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "LOG_LEVEL": "WARNING",
        "SMRITI_SHARED": "false",
    }


def run_import(text: Path, run: str, timeout: float, work: Path, before: Path | None) -> dict[str, Any]:
    """One import into a fresh store: wall seconds and the phases the import reports."""
    provider = run.removesuffix(BEFORE)
    storage = Path(tempfile.mkdtemp(prefix=f"{provider}-", dir=work))
    env = import_env(storage, provider)
    command = [*script("smriti"), "import", str(text), "--from", "text"]
    if run.endswith(BEFORE) and before is not None:
        env["PYTHONPATH"] = str(before)
        command = [sys.executable, "-m", "smriti.cli", *command[1:]]
    started = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"provider": run, "status": f"timed out after {timeout:.0f} s"}
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        return {"provider": run, "status": f"exit {done.returncode}: {done.stderr.strip()[-300:]}"}
    found = _PHASES.search(done.stderr)
    phases = {key: float(value) for key, value in found.groupdict().items() if value} if found else {}
    return {"provider": run, "status": "ok", "seconds": seconds, "load": os.getloadavg()[0], **phases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000, help="paragraphs imported per run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per embedder, alternating")
    parser.add_argument("--timeout", type=float, default=900, help="seconds before a run is stopped")
    parser.add_argument("--providers", nargs="+", default=list(PROVIDERS), choices=PROVIDERS)
    parser.add_argument("--before", type=Path, help="another version's src folder, run with MiniLM too")
    args = parser.parse_args(argv)
    if args.before is not None:
        args.providers = [*args.providers, "minilm" + BEFORE]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="import-speed-") as folder:
        work = Path(folder)
        text = work / "paragraphs.txt"
        write_paragraphs(text, args.memories)
        for round_ in range(args.rounds):
            order = args.providers if round_ % 2 == 0 else args.providers[::-1]
            for provider in order:
                run = run_import(text, provider, args.timeout, work, args.before)
                runs.append(run)
                print(f"[round {round_ + 1}] {run}", file=sys.stderr, flush=True)
    print(f"command: `{command_line('bench.import_speed', argv)}`; {args.memories} paragraphs\n")
    print(
        "| embedder | wall s (median) | memories/s | embedding s | waited for s | analysis s | storing s"
        " | runs | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    medians: dict[str, float] = {}
    for provider in args.providers:
        ok = [r for r in runs if r["provider"] == provider and r["status"] == "ok"]
        if not ok:
            print(f"| {provider} | failed: {[r['status'] for r in runs if r['provider'] == provider]} |")
            continue
        medians[provider] = statistics.median(r["seconds"] for r in ok)

        def median(key: str, ok: list[dict[str, Any]] = ok) -> str:
            values = [r[key] for r in ok if key in r]
            return f"{statistics.median(values):.1f}" if values else "-"

        walls = ", ".join(f"{r['seconds']:.1f}" for r in ok)
        loads = ", ".join(f"{r['load']:.1f}" for r in ok)
        print(
            f"| {provider} | {medians[provider]:.1f} ({walls}) | {args.memories / medians[provider]:.0f} |"
            f" {median('embedding')} | {median('waited')} | {median('analysis')} | {median('storing')} |"
            f" {len(ok)} | {loads} |"
        )
    for provider in medians:
        if provider != "hashing" and "hashing" in medians:
            print(f"\n{provider} / hashing: {medians[provider] / medians['hashing']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
