"""Leiden clustering benchmark: tuning and cached runs on planted-community graphs.

Run from the repository root::

    .venv/bin/python -m bench.leiden_bench            # engine at 60, 1k, 10k nodes + Kuzu recluster
    .venv/bin/python -m bench.leiden_bench --no-db    # engine only

Part 1 times ``LeidenEngine.run`` (folding the association list into a graph, Leiden, stable
labels; no database) for a first run that tunes the resolution and for later runs that
reuse it, with igraph's built-in Leiden (the default) and with leidenalg. Part 2 times the
whole ``recluster`` node on a real Kuzu store (read states and associations, cluster,
write changed ids), when the Kuzu backend is importable.

Graphs: ``n`` engrams in ``n / 40`` planted topics (at least 3); each engram links to ~4
random members of its topic (strength 0.5-1.0) and, half the time, to one random engram
anywhere (0.1-0.4), roughly what the store pipeline's top-k association step produces.
A third of the edges are also stored in the reverse direction, as the store does for
mutual neighbours. NMI compares the found clusters with the planted topics.
"""

from __future__ import annotations

import argparse
import logging
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

COMMAND = " ".join([".venv/bin/python -m bench.leiden_bench", *sys.argv[1:]])
logger = logging.getLogger("leiden_bench")


def planted_associations(n: int, seed: int = 7):
    """Associations of a planted-topic graph and the topic of each engram id."""
    from smriti.stores.base import Association

    rnd = random.Random(seed)
    topics = max(3, n // 40)
    ids = [f"e{i:06d}" for i in range(n)]
    topic_of = {engram: i % topics for i, engram in enumerate(ids)}
    members: dict[int, list[str]] = {}
    for engram, topic in topic_of.items():
        members.setdefault(topic, []).append(engram)
    edges: list[Association] = []
    for engram in ids:
        for other in rnd.sample(members[topic_of[engram]], 5):
            if other != engram:
                edges.append(Association(engram, other, rnd.uniform(0.5, 1.0)))
        if rnd.random() < 0.5:
            edges.append(Association(engram, rnd.choice(ids), rnd.uniform(0.1, 0.4)))
    edges += [Association(e.target_id, e.source_id, e.strength * 0.9) for e in edges[::3]]
    return edges, topic_of


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


def nmi(labels: dict[str, int], truth: dict[str, int]) -> float:
    import igraph

    keys = sorted(labels)
    return igraph.compare_communities([labels[k] for k in keys], [truth[k] for k in keys], method="nmi")


def bench_engine(n: int, implementation: str, repeats: int) -> dict[str, object]:
    from smriti.nodes.cluster import LeidenEngine, build_graph

    edges, truth = planted_associations(n)
    tuning, cached = [], []
    result = None
    for _ in range(repeats):
        engine = LeidenEngine(implementation=implementation)
        started = time.perf_counter()
        result = engine.run(build_graph(edges))
        tuning.append((time.perf_counter() - started) * 1000)
        assert result.tuned
    assert result is not None
    for _ in range(repeats):
        started = time.perf_counter()
        again = engine.run(build_graph(edges), previous=result.membership)
        cached.append((time.perf_counter() - started) * 1000)
        assert not again.tuned and again.membership == result.membership
    graph = build_graph(edges)
    return {
        "nodes": len(graph.ids), "edges": len(graph.edges), "implementation": implementation,
        "tuning": p50(tuning), "cached": p50(cached), "clusters": result.clusters,
        "planted": len(set(truth.values())), "resolution": result.resolution,
        "modularity": result.modularity, "nmi": nmi(result.membership, truth), "repeats": repeats,
    }  # fmt: skip


def bench_kuzu(n: int, repeats: int) -> dict[str, object] | None:
    """The recluster node on a real Kuzu store (database read and write included)."""
    try:
        from langchain_core.embeddings import DeterministicFakeEmbedding

        from smriti.config import Settings
        from smriti.pipelines.consolidate import build_consolidate_graph
        from smriti.pipelines.context import MemoryContext
        from smriti.stores import make_store
        from smriti.stores.base import Engram
    except ImportError as error:
        logger.warning("Kuzu recluster benchmark skipped: %s", error)
        return None
    edges, _ = planted_associations(n)
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(storage_location=Path(folder), accessing_user="bench", llm_provider="heuristic",
                            embedding_provider="hashing", embedding_dims=16)  # fmt: skip
        try:
            store = make_store(settings)
        except Exception as error:  # the backend may not be installed or importable yet
            logger.warning("Kuzu recluster benchmark skipped: %s", error)
            return None
        try:
            embedder = DeterministicFakeEmbedding(size=16)
            now = datetime.now(UTC)
            vector = embedder.embed_query("bench")
            for engram_id in sorted({e.source_id for e in edges} | {e.target_id for e in edges}):
                store.create_engram(Engram(content=engram_id, id=engram_id, embedding=vector, created_at=now,
                                           last_accessed_at=now))  # fmt: skip
            for edge in edges:
                store.associate(edge)
            context = MemoryContext(store=store, embedder=embedder, settings=settings, clock=lambda: now)
            # The whole graph runs (the other steps change nothing after the first run); the
            # trace times the recluster step on its own.
            graph = build_consolidate_graph()
            runs = []
            for _ in range(repeats + 1):
                trace = graph.invoke({"now": now.isoformat()}, context=context)["trace"]
                runs.append(next(entry for entry in trace if entry["node"] == "recluster")["ms"])
        finally:
            store.close()
    return {"nodes": n, "first": runs[0], "cached": p50(runs[1:]), "repeats": repeats}


def main(argv: list[str] | None = None) -> int:
    """Print the tables and write them as the ``leiden`` section of bench/RESULTS.md."""
    import contextlib
    import io

    from bench.common import section_preamble, write_section

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    args, _ = parser.parse_known_args(argv)
    captured = io.StringIO()
    with contextlib.redirect_stdout(captured):
        code = run(argv)
    text = captured.getvalue()
    print(text, end="")
    command = " ".join([".venv/bin/python -m bench.leiden_bench", *(sys.argv[1:] if argv is None else argv)])
    body = text.split("\n", 4)[-1]  # drop the run's own command and version lines
    preamble = section_preamble(
        command, "igraph Leiden (default) and leidenalg; Kuzu store, 16-dim fake embedder"
    )
    write_section("leiden", "Leiden clustering", preamble + "\n" + body, args.results)
    return code


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[60, 1000, 10_000])
    parser.add_argument("--db-sizes", type=int, nargs="+", default=[60, 1000])
    parser.add_argument("--no-db", action="store_true", help="skip the Kuzu recluster benchmark")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

    repeats = {60: 50, 1000: 15}
    print(f"Command: `{COMMAND}`\n")
    print(f"Python {platform.python_version()} on {platform.machine()}, {datetime.now(UTC):%Y-%m-%d}\n")
    print("### LeidenEngine.run (no database; p50 in ms)\n")
    header = [
        "nodes",
        "edges",
        "implementation",
        "tuning p50",
        "cached p50",
        "clusters (planted)",
        "resolution",
    ]
    print("| " + " | ".join([*header, "Q", "NMI"]) + " |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        for implementation in ("igraph", "leidenalg"):
            row = bench_engine(n, implementation, repeats.get(n, 5 if implementation == "igraph" else 3))
            cells = [
                row["nodes"], row["edges"], implementation, f"{row['tuning']:.2f}", f"{row['cached']:.2f}",
                f"{row['clusters']} ({row['planted']})", row["resolution"], f"{row['modularity']:.3f}",
                f"{row['nmi']:.3f}",
            ]  # fmt: skip
            print("| " + " | ".join(str(cell) for cell in cells) + " |", flush=True)
    if args.no_db:
        return 0
    print("\n### recluster node on Kuzu (reads + Leiden + batch write; ms)\n")
    print("| engrams | first run (tunes, writes all ids) | later runs p50 (cached, no changes) |")
    print("|---:|---:|---:|")
    for n in args.db_sizes:
        row = bench_kuzu(n, repeats=5)
        if row is None:
            print("| - | Kuzu store not available | - |")
            break
        print(f"| {row['nodes']} | {row['first']:.2f} | {row['cached']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
