"""The SQLite store's vector search at scale with a quantised HNSW graph (issue 27, item 6).

Run from the repository root, niced (the builds take every core for minutes)::

    nice -n 19 .venv/bin/python -m bench.ann_scale --sizes 100000 250000 --dtypes i8 f16

For each size N a real SQLite store (``SqliteStore``: its schema, its file) gets N memories
whose embeddings are the hashing embeddings (1,536 dims) of the scale corpus
(``bench/scale_corpus.py``), written as an import writes them. Then, for each dtype
(VECTOR_INDEX_DTYPE), two fresh processes, so each RSS is that process's alone:

1. build: open the store, load the vectors and build the HNSW graph as ``smriti import`` does
   (``SearchIndex.finish``), then close it (the graph is saved beside the file). Reported: the
   load and build seconds and CPU seconds, and the peak RSS (VmHWM: the float32 matrix the
   cache loads plus the graph being built);
2. serve: open the store again (the saved graph memory-mapped, no embedding read), then the
   corpus questions through ``store.vector_search`` (graph candidates re-scored from the
   BLOBs): recall@10 against exact cosine (numpy over the same vectors), p50/p95 ms, and the
   RSS after the queries (VmRSS: the touched pages of the mapped graph count) beside the
   graph file's size (what RSS reaches once every page has been touched).

One JSON object per (size, dtype) on stdout; progress and load averages on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import data_dir, latency_summary
from bench.scale_corpus import embed_matrix, make_texts

K = 10
USER = "bench"


def progress(message: str) -> None:
    stamp = f"[ann_scale {time.strftime('%H:%M:%S')} load {os.getloadavg()}]"
    print(f"{stamp} {message}", file=sys.stderr, flush=True)


def status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def store_of(folder: Path, dims: int, dtype: str) -> Any:
    from smriti.stores.sqlite.store import SqliteStore

    return SqliteStore(folder / "memory.sqlite", user=USER, dims=dims, vector_dtype=dtype)


def prepare(folder: Path, size: int, dims: int, queries: int) -> None:
    """The store's rows, the questions and their exact top 10 (kept in ``folder``)."""
    if (folder / "truth.npz").exists():
        return
    folder.mkdir(parents=True, exist_ok=True)
    corpus = make_texts(data_dir(), size, seed=0)
    progress(f"N={size}: embedding {size} texts")
    matrix = embed_matrix(corpus.texts, dims)
    asked = embed_matrix(corpus.queries[:queries], dims)
    asked = asked[np.any(asked, axis=1)]
    progress(f"N={size}: writing the store")
    store = store_of(folder, dims, "f32")
    try:
        for start in range(0, size, 5_000):
            rows = [
                (f"m{k:07d}", corpus.texts[k][:200], matrix[k].astype("<f4").tobytes())
                for k in range(start, min(size, start + 5_000))
            ]
            with store.db.transaction():  # as an import writes them: no cache listener
                store.db.write_many(
                    "INSERT INTO engram (id, content, created_at, last_accessed_at, embedding) "
                    "VALUES (?, ?, 0, 0, ?)",
                    rows,
                )
    finally:
        store.close()
    progress(f"N={size}: exact top {K} of {len(asked)} questions")
    norms = np.linalg.norm(matrix, axis=1)
    truth = np.zeros((len(asked), K), dtype=np.int64)
    for row, query in enumerate(asked):
        scores = np.einsum("ij,j->i", matrix, query) / np.maximum(norms, 1e-12)
        top = np.argpartition(-scores, K)[:K]
        truth[row] = top
    np.savez(folder / "truth.npz", queries=asked, truth=truth)


def build(folder: Path, dims: int, dtype: str) -> dict[str, Any]:
    """(child) Load the vectors and build and save the graph, as ``smriti import`` does."""
    for path in folder.glob("memory.sqlite.vectors*"):
        path.unlink()
    started, cpu = time.perf_counter(), time.process_time()
    store = store_of(folder, dims, dtype)
    try:
        store.index.warm()
        loaded = time.perf_counter() - started
        store.index.finish()
        assert store.index.vectors.ann_ready
        built, built_cpu = time.perf_counter() - started, time.process_time() - cpu
        peak = status_kb("VmHWM")
    finally:
        store.close()
    graph = folder / "memory.sqlite.vectors"
    return {
        "load_s": round(loaded, 1),
        "build_s": round(built - loaded, 1),
        "build_cpu_s": round(built_cpu, 1),  # every thread's CPU: the work, whatever the load
        "build_peak_rss_mb": round(peak / 1024),
        "graph_file_mb": round(graph.stat().st_size / 2**20),
    }


def serve(folder: Path, dims: int, dtype: str) -> dict[str, Any]:
    """(child) Reopen the store (the saved graph memory-mapped) and time the questions."""
    data = np.load(folder / "truth.npz")
    queries, truth = data["queries"], data["truth"]
    rss_before = status_kb("VmRSS")
    started = time.perf_counter()
    store = store_of(folder, dims, dtype)
    try:
        store.index.warm()
        assert store.index.vectors.ann_ready, "the saved graph was not opened"
        opened = time.perf_counter() - started
        rss_open = status_kb("VmRSS")
        samples, hits = [], 0
        for query, expected in zip(queries, truth, strict=True):
            began = time.perf_counter()
            got = store.vector_search(query.tolist(), K)
            samples.append((time.perf_counter() - began) * 1000.0)
            hits += len({f"m{k:07d}" for k in expected.tolist()} & {hit.id for hit in got})
        rss_after = status_kb("VmRSS")
    finally:
        store.close()
    return {
        "open_s": round(opened, 2),
        "recall_at_10": round(hits / (K * len(queries)), 4),
        "query_ms": latency_summary(samples),
        "rss_mb": {
            "python_and_store": round(rss_before / 1024),
            "opened": round(rss_open / 1024),
            "after_queries": round(rss_after / 1024),
        },
    }


def child(args: argparse.Namespace) -> None:
    folder = Path(args.child_folder)
    result = (build if args.child == "build" else serve)(folder, args.dims, args.child_dtype)
    print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--dtypes", nargs="+", default=["i8", "f16"], choices=["f32", "f16", "i8"])
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/smriti-ann-scale"))
    parser.add_argument("--child", choices=["build", "serve"], help=argparse.SUPPRESS)
    parser.add_argument("--child-folder", help=argparse.SUPPRESS)
    parser.add_argument("--child-dtype", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    for size in args.sizes:
        folder = args.workdir / f"n{size}-d{args.dims}"
        prepare(folder, size, args.dims, args.queries)
        for dtype in args.dtypes:
            result: dict[str, Any] = {"size": size, "dims": args.dims, "dtype": dtype}
            result["load"] = [os.getloadavg()]
            for phase in ("build", "serve"):
                progress(f"N={size} {dtype}: {phase}")
                command = [sys.executable, "-m", "bench.ann_scale", "--dims", str(args.dims)]
                command += ["--child", phase, "--child-folder", str(folder), "--child-dtype", dtype]
                done = subprocess.run(command, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    result[phase] = {"status": "failed", "error": done.stderr[-2000:]}
                    break
                result[phase] = json.loads(done.stdout.strip().splitlines()[-1])
                result["load"].append(os.getloadavg())
            print(json.dumps(result), flush=True)
            progress(f"N={size} {dtype}: {result}")


if __name__ == "__main__":
    main()
