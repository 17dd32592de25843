"""leidenalg against igraph's ``community_leiden`` on realistic AssociatedWith graphs (issue 43, item 4).

Run from the repository root (the corpus needs the benchmark data, see ``bench/common.py``)::

    .venv/bin/python -m bench.leiden_engines                    # 10k and 100k memories
    .venv/bin/python -m bench.leiden_engines --sizes 10000 --repeats 5

The graph is the one consolidation clusters: the scale corpus's memories (``bench/scale_corpus.py``:
LoCoMo turns and HotpotQA passages, then variants), each linked, as the store pipeline's
``associate`` step links it, to its most similar memories (hashing embeddings, cosine >= 0.3,
top 5) and to the two previous memories of its source, folded into the undirected weighted graph
``nodes/leiden.py`` builds. It is built in-process (no database): this compares the two
algorithms, not the store's reads and writes.

For each engine the script times :meth:`LeidenEngine.run` as consolidation calls it: a first run,
which tunes the resolution (five partitions and their modularity), and a later run at the cached
resolution; wall and CPU time, medians over ``--repeats`` rounds, the two engines alternated
within a round and the order flipped each round. It reports each partition's modularity (Q, at
resolution 1, what tuning maximises) and the agreement of the two engines' partitions (NMI).
"""

from __future__ import annotations

import argparse
import logging
import os
import pickle
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import command_line, data_dir, section_preamble, write_section

ENGINES = ("leidenalg", "igraph")
logger = logging.getLogger("leiden_engines")


def corpus_graph(n: int, dims: int, seed: int, cache: Path | None = None) -> Any:
    """The folded AssociatedWith graph of the first ``n`` memories of the scale corpus (kept as a
    pickle in ``cache`` when given: building it at 100k takes minutes)."""
    from bench.scale_corpus import association_rows, embed_matrix, make_texts
    from smriti.nodes.leiden import graph_of

    kept = cache / f"leiden_graph_n{n}_d{dims}_s{seed}.pkl" if cache else None
    if kept is not None and kept.exists():
        return pickle.loads(kept.read_bytes())
    corpus = make_texts(data_dir(), n, seed=seed)
    matrix = embed_matrix(corpus.texts, dims)
    rows = association_rows(corpus.sources, matrix, random.Random(seed + 1))
    graph = graph_of((f"m{row:06d}", f"m{other:06d}", strength) for row, other, strength, _ in rows)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(pickle.dumps(graph))
    return graph


def _timed(function: Any, *args: Any, **kwargs: Any) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = function(*args, **kwargs)
    return out, (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def measure(graph: Any, repeats: int) -> dict[str, dict[str, Any]]:
    """Per engine: medians of the tuning and cached runs (wall and CPU ms) and the partitions' quality."""
    from smriti.nodes.leiden import LeidenEngine

    samples: dict[str, dict[str, list[float]]] = {
        engine: {"tune_wall": [], "tune_cpu": [], "cached_wall": [], "cached_cpu": []} for engine in ENGINES
    }
    found: dict[str, Any] = {}
    for round_ in range(repeats):
        for engine_name in ENGINES if round_ % 2 == 0 else tuple(reversed(ENGINES)):
            engine = LeidenEngine(implementation=engine_name)  # type: ignore[arg-type]
            tuned, wall, cpu = _timed(engine.run, graph)
            samples[engine_name]["tune_wall"].append(wall)
            samples[engine_name]["tune_cpu"].append(cpu)
            cached, wall, cpu = _timed(engine.run, graph, previous=tuned.membership)
            samples[engine_name]["cached_wall"].append(wall)
            samples[engine_name]["cached_cpu"].append(cpu)
            found[engine_name] = (tuned, cached)
            logger.info("%s round %d: tune %.0f ms, cached %.0f ms", engine_name, round_, *(
                samples[engine_name][key][-1] for key in ("tune_wall", "cached_wall")))  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    for engine_name, (tuned, cached) in found.items():
        medians = {key: statistics.median(values) for key, values in samples[engine_name].items()}
        out[engine_name] = {**medians, "tuned": tuned, "cached": cached}
    return out


def nmi(a: dict[str, int], b: dict[str, int]) -> float:
    import igraph

    keys = sorted(a)
    return float(igraph.compare_communities([a[k] for k in keys], [b[k] for k in keys], method="nmi"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3, help="rounds per size (each runs both engines)")
    parser.add_argument("--dims", type=int, default=384, help="hashing embedding size for the associations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    parser.add_argument("--no-results", action="store_true", help="print only")
    parser.add_argument("--graph-cache", type=Path, default=None, help="folder keeping the built graphs")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")

    load_before = os.getloadavg()[0]
    lines = [
        "| memories | nodes | edges | engine | first run (tunes) wall / CPU ms | later run (cached) "
        "wall / CPU ms | resolution | clusters | Q tuned / cached |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    agreement = []
    for n in args.sizes:
        started = time.perf_counter()
        graph = corpus_graph(n, args.dims, args.seed, args.graph_cache)
        logger.info("%d memories: graph of %d nodes, %d edges in %.1f s", n, len(graph.ids),
                    len(graph.edges), time.perf_counter() - started)  # fmt: skip
        results = measure(graph, args.repeats)
        for engine_name in ENGINES:
            row = results[engine_name]
            tuned, cached = row["tuned"], row["cached"]
            lines.append(
                f"| {n:,} | {len(graph.ids):,} | {len(graph.edges):,} | {engine_name} "
                f"| {row['tune_wall']:,.0f} / {row['tune_cpu']:,.0f} "
                f"| {row['cached_wall']:,.0f} / {row['cached_cpu']:,.0f} "
                f"| {tuned.resolution} | {tuned.clusters:,} "
                f"| {tuned.modularity:.4f} / {cached.modularity:.4f} |"
            )
        ratios = {
            key: results["leidenalg"][key] / results["igraph"][key]
            for key in ("tune_wall", "tune_cpu", "cached_wall", "cached_cpu")
        }
        same = nmi(results["leidenalg"]["tuned"].membership, results["igraph"]["tuned"].membership)
        agreement.append(
            f"- {n:,} memories: leidenalg / igraph, first run {ratios['tune_cpu']:.1f}x the CPU "
            f"({ratios['tune_wall']:.1f}x the wall time), later run {ratios['cached_cpu']:.1f}x the CPU "
            f"({ratios['cached_wall']:.1f}x); NMI between their tuned partitions {same:.3f}"
        )
    load_after = os.getloadavg()[0]
    body = "\n".join(
        [
            *lines,
            "",
            *agreement,
            f"- Load average (1 min): {load_before:.1f} at the start, {load_after:.1f} at the end; "
            f"medians of {args.repeats} rounds, the engines alternated within each round.",
        ]
    )
    print(body)
    if not args.no_results:
        command = command_line("bench.leiden_engines", argv)
        preamble = section_preamble(
            command,
            f"scale corpus (seed {args.seed}), hashing embeddings at {args.dims} dims, associate top 5 "
            "at cosine >= 0.3 plus 2 same-source neighbours; LeidenEngine defaults (5 resolutions, "
            "2 iterations, seed 42); graph built in-process, no database",
        )
        write_section(
            "leiden_engines",
            "Leiden engines: leidenalg against igraph's community_leiden (issue 43, item 4)",
            preamble + "\n" + body,
            args.results,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
