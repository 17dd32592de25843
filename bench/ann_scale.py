"""The SQLite store's vector search at scale with a quantised HNSW graph (issue 27, item 6).

Run from the repository root, niced (the builds take every core for minutes)::

    nice -n 19 .venv/bin/python -m bench.ann_scale --sizes 100000 250000 --dtypes i8 f16

For each size N a real SQLite store (``SqliteStore``: its schema, its file) gets N memories
whose embeddings are the hashing embeddings (1,536 dims) of the scale corpus
(``bench/scale_corpus.py``), written as an import writes them. Then, for each dtype
(VECTOR_INDEX_DTYPE), two fresh processes, so each RSS is that process's alone:

1. build: open the store and build the HNSW graph as ``smriti import`` does
   (``SearchIndex.finish``: f32 from the loaded float32 matrix, f16/i8 from the BLOBs a batch
   at a time), then close it (the graph is saved beside the file). Reported: the seconds
   (reading included) and CPU seconds, and the peak RSS (VmHWM: the graph being built, plus
   the float32 matrix for f32);
2. serve: open the store again (the saved graph memory-mapped, no embedding read), then the
   corpus questions through ``store.vector_search`` (graph candidates re-scored from the
   BLOBs): recall@10 against exact cosine (numpy over the same vectors), p50/p95 ms, and the
   RSS after the queries (VmRSS: the touched pages of the mapped graph count) beside the
   graph file's size (what RSS reaches once every page has been touched).

``--sweep`` serves the questions again for each (expansion_search, candidates) of ``SWEEP``:
recall@10 and latency against the graph's beam and candidate count. ``--serve-only`` serves
the graph built before. One JSON object per (size, dtype) on stdout; progress and load
averages on stderr; each child's log (the build's progress) in ``PHASE-DTYPE.log`` beside the
store.
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
    """(child) Build and save the graph as ``smriti import`` does (``finish_indexes``: an f32
    graph from the loaded float32 matrix, a quantised one from the BLOBs a batch at a time)."""
    for path in folder.glob("memory.sqlite.vectors*"):
        path.unlink()
    started, cpu = time.perf_counter(), time.process_time()
    store = store_of(folder, dims, dtype)
    try:
        store.finish_indexes()
        assert store.index.vectors.ann_ready
        built, built_cpu = time.perf_counter() - started, time.process_time() - cpu
        peak = status_kb("VmHWM")
    finally:
        store.close()
    graph = folder / "memory.sqlite.vectors"
    return {
        "build_s": round(built, 1),  # reading the embeddings included
        "build_cpu_s": round(built_cpu, 1),  # every thread's CPU: the work, whatever the load
        "build_peak_rss_mb": round(peak / 1024),
        "graph_file_mb": round(graph.stat().st_size / 2**20),
    }


def serve(folder: Path, dims: int, dtype: str, sweep: bool = False) -> dict[str, Any]:
    """(child) Reopen the store (the saved graph memory-mapped) and time the questions; with
    ``sweep``, again for each candidate count and beam width of :data:`SWEEP`."""
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
        result = {"open_s": round(opened, 2), **ask(store, queries, truth)}
        rss_after = status_kb("VmRSS")
        if sweep:
            result["sweep"] = swept(store, queries, truth)
    finally:
        store.close()
    result["rss_mb"] = {
        "python_and_store": round(rss_before / 1024),
        "opened": round(rss_open / 1024),
        "after_queries": round(rss_after / 1024),
    }
    return result


def ask(store: Any, queries: np.ndarray, truth: np.ndarray) -> dict[str, Any]:
    """recall@10 against exact cosine and the latency of ``store.vector_search``."""
    samples, hits = [], 0
    for query, expected in zip(queries, truth, strict=True):
        began = time.perf_counter()
        got = store.vector_search(query.tolist(), K)
        samples.append((time.perf_counter() - began) * 1000.0)
        hits += len({f"m{k:07d}" for k in expected.tolist()} & {hit.id for hit in got})
    return {"recall_at_10": round(hits / (K * len(queries)), 4), "query_ms": latency_summary(samples)}


# (expansion_search, candidates asked of the graph): the default is (256, 50). usearch's beam
# is the larger of the two; candidates past 50 also cost their BLOB reads.
SWEEP = [(128, 50), (256, 50), (512, 50), (1024, 50), (2048, 50), (4096, 50), (512, 200)]


def swept(store: Any, queries: np.ndarray, truth: np.ndarray) -> list[dict[str, Any]]:
    """Two passes over SWEEP, the second in reverse order: the first pass also warms the page
    cache (the mapped graph, the BLOBs), so compare latencies within the second."""
    from smriti.stores import vectors

    rules = vectors.candidate_count, vectors.search_beam
    rows = []
    try:
        for run, order in enumerate((SWEEP, SWEEP[::-1])):
            for expansion, candidates in order:
                vectors.search_beam = lambda configured, size, e=expansion: e  # type: ignore[misc]
                vectors.candidate_count = lambda k, c=candidates: max(4 * k, c)  # type: ignore[misc]
                row = {"pass": run + 1, "expansion_search": expansion, "candidates": candidates}
                rows.append({**row, **ask(store, queries, truth)})
                progress(f"sweep {rows[-1]}")
    finally:
        vectors.candidate_count, vectors.search_beam = rules
    return rows


def child(args: argparse.Namespace) -> None:
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    folder = Path(args.child_folder)
    if args.child == "build":
        result = build(folder, args.dims, args.child_dtype)
    else:
        result = serve(folder, args.dims, args.child_dtype, args.sweep)
    print(json.dumps(result), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--dtypes", nargs="+", default=["i8", "f16"], choices=["f32", "f16", "i8"])
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/smriti-ann-scale"))
    parser.add_argument(
        "--sweep", action="store_true", help="serve again for each (beam, candidates) of SWEEP"
    )
    parser.add_argument("--serve-only", action="store_true", help="serve the graph already built")
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
            for phase in ("serve",) if args.serve_only else ("build", "serve"):
                log = folder / f"{phase}-{dtype}.log"
                progress(f"N={size} {dtype}: {phase} (its log: {log})")
                command = [sys.executable, "-m", "bench.ann_scale", "--dims", str(args.dims)]
                command += ["--child", phase, "--child-folder", str(folder), "--child-dtype", dtype]
                command += ["--sweep"] if args.sweep else []
                with log.open("w") as errors:
                    done = subprocess.run(
                        command, stdout=subprocess.PIPE, stderr=errors, text=True, check=False
                    )
                if done.returncode != 0:
                    result[phase] = {"status": "failed", "error": log.read_text()[-2000:]}
                    break
                result[phase] = json.loads(done.stdout.strip().splitlines()[-1])
                result["load"].append(os.getloadavg())
            print(json.dumps(result), flush=True)
            progress(f"N={size} {dtype}: {result}")


if __name__ == "__main__":
    main()
