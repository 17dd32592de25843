"""In-process profile: store / recall / search p50 through ``Memory``, SQLite against Kuzu.

For profiling only (the MCP benchmark is the reference). 1,536-dim hashing embeddings,
heuristic cues, cue-rich sentences from bench/scaling.py's generator. The corpus is stored
through the full store pipeline on SQLite, exported, and imported into Kuzu (so both hold the
same graph); then ``--stores`` new memories and ``--queries`` questions are timed on each.

    .venv/bin/python -m bench.sqlite_vs_kuzu --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.scaling import QUESTIONS, TEMPLATES, sentence

DIMS = 1536


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def timed(memory, stores: list[str], queries: list[str]) -> dict[str, float]:
    out: dict[str, list[float]] = {"store": [], "recall": [], "search": []}
    for text in stores:
        started = time.perf_counter()
        memory.store(text, source="bench")
        out["store"].append(time.perf_counter() - started)
    memory.recall(queries[0], limit=10)  # warm the caches
    for query in queries:
        for mode in ("recall", "search"):
            started = time.perf_counter()
            memory.recall(query, limit=10, mode=mode)
            out[mode].append(time.perf_counter() - started)
    return {name: p50(values) for name, values in out.items()}


def main() -> None:
    from smriti.config import Settings
    from smriti.memory import Memory

    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--stores", type=int, default=30)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--backends", nargs="+", default=["sqlite", "kuzu"])
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="smriti-sqlite-vs-kuzu-"))
    for size in args.sizes:
        rnd = random.Random(size)
        corpus = [sentence(rnd, TEMPLATES) for _ in range(size)]
        new = [sentence(rnd, TEMPLATES) for _ in range(args.stores)]
        queries = [sentence(rnd, QUESTIONS) for _ in range(args.queries)]
        records = None
        for backend in args.backends:
            settings = Settings(
                storage_location=root / f"{backend}-{size}", accessing_user="bench", db_type=backend,
                llm_provider="heuristic", embedding_provider="hashing", embedding_dims=DIMS,
                consolidation_interval=0, backup_sync_interval=0,
            )  # fmt: skip
            memory = Memory.open(settings)
            started = time.perf_counter()
            if records is None:
                for text in corpus:
                    memory.store(text, source="fill")
                how = "store pipeline"
                records = list(memory.export_records())
            else:
                memory.import_records(records)
                how = f"import of {len(records)} records"
            fill = time.perf_counter() - started
            result = timed(memory, new, queries)
            memory.close()
            started = time.perf_counter()
            memory = Memory.open(settings)
            memory.recall(queries[0], limit=10)
            first = time.perf_counter() - started
            memory.close()
            print(
                f"{size:>6} {backend:<6} fill {fill:7.1f}s ({size / fill:6.0f}/s, {how}); "
                f"p50 store {result['store']:6.1f} ms, recall {result['recall']:6.1f} ms, "
                f"search {result['search']:6.1f} ms; reopen+first recall {first:5.2f}s",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
