"""HNSW build time and recall of the vector cache's usearch graph, by build parameters.

Run from the repository root::

    .venv/bin/python -m bench.ann_build --size 100000 --expansion-add 128 64 --threads 2 1

Vectors are the hashing embeddings (1,536 dims) of the scale corpus (``bench/scale_corpus.py``:
LoCoMo turns and HotpotQA passages, varied past the ~7k base texts), the vectors the server
indexes in ``bench/scale_mcp.py``. For each setting the graph is built as the vector cache
builds it (``stores/ann.py``'s ``new_index``, batches of ``add``), then queried with the
corpus questions: recall@10 of the cache's re-scored top 10 against exact cosine (numpy, the
same vectors), and the query p50. ``--dtype`` adds quantised graphs (f16, i8: item 6 of
issue 27), whose candidates are re-scored from the exact vectors, as the cache does.
``--vectors minilm`` takes real all-MiniLM-L6-v2 vectors instead (384 dims: the embedding cache
the LoCoMo and HotpotQA benchmarks fill, ``bench/.cache/embeddings-minilm.npz``), with
``--queries`` of them held out as the questions. Progress and the load average go to stderr;
one JSON object per setting to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from bench.common import CACHE_DIR, data_dir, latency_summary
from bench.scale_corpus import embed_matrix, make_texts

K = 10


def exact_top(matrix: np.ndarray, norms: np.ndarray, query: np.ndarray) -> set[int]:
    scores = (matrix @ query) / np.maximum(norms, 1e-12)
    top = np.argpartition(-scores, K)[:K]
    return set(top.tolist())


def run(matrix, queries, norms, truth, expansion_add: int, threads: int, dtype: str, batch: int) -> dict:
    from usearch.index import Index

    from smriti.stores.ann import AnnParams

    params = AnnParams(expansion_add=expansion_add)
    index = Index(
        ndim=matrix.shape[1],
        metric="cos",
        dtype=dtype,
        connectivity=params.connectivity,
        expansion_add=params.expansion_add,
        expansion_search=params.expansion_search,
    )
    load_before = os.getloadavg()[0]
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(matrix), batch):
        end = min(len(matrix), start + batch)
        index.add(
            np.arange(start, end, dtype=np.uint64), matrix[start:end], copy=dtype != "f32", threads=threads
        )
    build, build_cpu = time.perf_counter() - started, time.process_time() - cpu
    hits, samples = 0, []
    fetch = max(4 * K, 50)
    for query, expected in zip(queries, truth, strict=True):
        began = time.perf_counter()
        keys = np.asarray(index.search(query, fetch).keys, dtype=np.int64)
        # As the vector cache: a quantised graph's candidates are re-scored from the exact vectors.
        exact = matrix[keys] if dtype != "f32" else index.get(keys.astype(np.uint64))
        vectors = np.asarray(exact, dtype=np.float32)
        scores = (vectors @ query) / np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)
        top = keys[np.argsort(-scores)[:K]]
        samples.append((time.perf_counter() - began) * 1000.0)
        hits += len(expected & set(top.tolist()))
    return {
        "size": len(matrix),
        "dtype": dtype,
        "expansion_add": expansion_add,
        "threads": threads,
        "build_s": round(build, 1),
        "build_cpu_s": round(build_cpu, 1),  # every thread's CPU time: the work, whatever the load
        "recall_at_10": round(hits / (K * len(queries)), 4),
        "query_ms": latency_summary(samples),
        "memory_usage_mb": round(index.memory_usage / 2**20),
        "load": [load_before, os.getloadavg()[0]],
    }


def minilm_vectors(size: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``size`` cached MiniLM vectors and ``queries`` others held out as questions."""
    cache = CACHE_DIR / "embeddings-minilm.npz"
    if not cache.exists():
        raise SystemExit(f"{cache} is missing: `bench.locomo --embedder minilm --embedding-cache` fills it")
    vectors = np.load(cache)["vectors"].astype(np.float32)
    order = np.random.default_rng(0).permutation(len(vectors))
    return vectors[order[queries : queries + size]], vectors[order[:queries]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--expansion-add", type=int, nargs="+", default=[128])
    parser.add_argument("--threads", type=int, nargs="+", default=[0], help="usearch threads (0: all cores)")
    parser.add_argument("--dtype", nargs="+", default=["f32"], choices=["f32", "f16", "i8"])
    parser.add_argument("--batch", type=int, default=2048, help="vectors per add call (the cache's 8 x 256)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--vectors", choices=["hashing", "minilm"], default="hashing")
    args = parser.parse_args(argv)
    if args.vectors == "minilm":
        matrix, raw_queries = minilm_vectors(args.size, args.queries)
    else:
        corpus = make_texts(data_dir(), args.size, seed=0)
        matrix = embed_matrix(corpus.texts, args.dims).astype(np.float32)
        raw_queries = embed_matrix(corpus.queries[: args.queries], args.dims)
    queries = [q / max(np.linalg.norm(q), 1e-12) for q in raw_queries]
    queries = [np.asarray(q, dtype=np.float32) for q in queries if np.any(q)]
    norms = np.linalg.norm(matrix, axis=1)
    truth = [exact_top(matrix, norms, q) for q in queries]
    print(
        f"[ann_build] {len(matrix)} vectors, {len(queries)} queries, load {os.getloadavg()}", file=sys.stderr
    )
    for dtype in args.dtype:
        for expansion_add in args.expansion_add:
            for threads in args.threads:
                result = run(matrix, queries, norms, truth, expansion_add, threads, dtype, args.batch)
                print(json.dumps(result), flush=True)
                print(f"[ann_build] {result}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
