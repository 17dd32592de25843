"""One executor for the pipelines: the direct runner against compiled LangGraph graphs, measured
in one run, alternated, so both see the same machine load (issue 38, item 1).

    .venv/bin/python -m bench.executor_ab [--memories 300] [--calls 40] [--spawns 5]

Per call (in-process, on one SQLite store of ``--memories`` cue-rich memories, hashing embedder):
the recall pipeline (without reinforce, so every call sees the same store) and the store pipeline
on each executor, and the executors alone on recall's shape (its 26 nodes, routes and parallel
branches, every node a no-op that appends its name). Medians of ``--calls`` calls, alternated
in blocks of five.

Cold start (process spawn to the first recall answered, the parent's clock): a fresh Python
process opens the memory and answers one recall, on the runner, or on the compiled LangGraph
graph with LangGraph's import and the compile started in a background thread as the memory opens
(the "deferred and warmed off the first answer's path" option); ``--spawns`` of each, alternated.

Results go to stdout (a Markdown table) and progress to stderr.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import data_dir
from bench.scale_corpus import make_texts

QUERY = "Who moved the invoices service to Postgres?"
BLOCK = 5
CHILD = """
import sys, time, threading
mode, folder = sys.argv[1], sys.argv[2]
from pathlib import Path
from smriti.config import Settings
from smriti.memory import Memory
settings = Settings(storage_location=Path(folder), accessing_user="bench", embedding_provider="hashing",
                    embedding_dims=384, llm_provider="heuristic", smriti_shared=False)
memory = Memory.open(settings)
payload = {"query": %(query)r, "limit": 5, "mode": "recall", "memory_type": None, "explain": False,
           "include_superseded": False, "checked": True}
if mode == "runner":
    result = memory.recall(%(query)r, limit=5)
else:
    from smriti.pipelines.recall import recall_pipeline
    warm = threading.Thread(target=lambda: recall_pipeline.graph)  # import + compile, off this thread
    warm.start()
    warm.join()  # the first answer needs the graph: it waits for whatever of the warm-up is left
    result = recall_pipeline.graph.invoke(payload, context=memory.context)["result"]
assert result["results"], result
print("answered", flush=True)
memory.close()
"""


def fill(folder: Path, count: int) -> None:
    from smriti.config import Settings
    from smriti.memory import Memory

    settings = Settings(
        storage_location=folder,
        accessing_user="bench",
        embedding_provider="hashing",
        embedding_dims=384,
        llm_provider="heuristic",
        smriti_shared=False,
    )
    memory = Memory.open(settings)
    memory.store("Alice moved the invoices service to Postgres in March.")
    corpus = make_texts(data_dir(), count - 1, seed=7)
    for text, source in zip(corpus.texts, corpus.sources, strict=True):
        memory.store(text, source=source)
    memory.close()


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def per_call(folder: Path, calls: int, memories: int) -> dict[str, dict[str, float]]:
    from smriti.config import Settings
    from smriti.memory import Memory
    from smriti.pipelines import runner
    from smriti.pipelines.recall import build_recall_pipeline
    from smriti.pipelines.store import store_pipeline

    settings = Settings(
        storage_location=folder,
        accessing_user="bench",
        embedding_provider="hashing",
        embedding_dims=384,
        llm_provider="heuristic",
        smriti_shared=False,
    )
    memory = Memory.open(settings)
    context = memory.context
    recall = build_recall_pipeline(reinforce=False)
    shape = no_op_shape(recall)
    request = {
        "query": QUERY,
        "limit": 5,
        "mode": "recall",
        "memory_type": None,
        "explain": False,
        "include_superseded": False,
        "checked": True,
    }
    # past the texts the store was filled with (fill's seed): new to it
    fresh = make_texts(data_dir(), memories - 1, seed=7, extra=2 * (calls + BLOCK)).extra
    graphs = {"recall": recall.graph, "store": store_pipeline.graph, "shape": shape.graph}
    work = {
        "recall": (recall, lambda n: request),
        # new texts, one per call and executor (the same text twice would end at dedupe)
        "store": (store_pipeline, lambda n: {"content": fresh[n], "source": "bench"}),
        "shape": (shape, lambda n: {"query": QUERY, "mode": "recall"}),
    }
    samples: dict[str, dict[str, list[float]]] = {name: {"runner": [], "langgraph": []} for name in work}
    # Alternated in blocks of BLOCK calls (the first block of each not counted: warm-up), so that
    # what one executor leaves running (LangGraph's threads) is not charged to the other's call.
    for block in range(calls // BLOCK + 1):
        for name, (pipeline, payload) in work.items():
            order = ("runner", "langgraph") if block % 2 else ("langgraph", "runner")
            for executor in order:
                for n in range(block * BLOCK, (block + 1) * BLOCK):
                    started = time.perf_counter()
                    if executor == "runner":
                        runner.invoke(pipeline, payload(n), context)
                    else:
                        graphs[name].invoke(payload(n + calls + BLOCK), context=context)
                    if block:
                        samples[name][executor].append(time.perf_counter() - started)
    memory.close()
    return {name: {k: median_ms(v) for k, v in by.items()} for name, by in samples.items()}


def no_op_shape(recall: Any) -> Any:
    """Recall's shape (nodes, edges, joins, routes, schemas) with every node a no-op."""
    from smriti.pipelines.pipeline import Pipeline

    shape = Pipeline("shape", recall.state_schema, input_schema=recall.input_schema)
    for name in recall.nodes:
        shape.add_node(name, _no_op(name))
    shape.edges, shape.joins, shape.branches = list(recall.edges), list(recall.joins), dict(recall.branches)
    return shape


def _no_op(name: str) -> Any:
    def node(state: Any, runtime: Any) -> dict[str, Any]:
        return {"trace": [{"node": name}]}

    return node


def cold_start(folder: Path, spawns: int) -> dict[str, list[float]]:
    script = CHILD % {"query": QUERY}
    times: dict[str, list[float]] = {"runner": [], "langgraph": []}
    for n in range(spawns):
        for mode in ("runner", "langgraph") if n % 2 == 0 else ("langgraph", "runner"):
            started = time.perf_counter()
            child = subprocess.Popen(
                [sys.executable, "-c", script, mode, str(folder)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            assert child.stdout is not None
            line = child.stdout.readline()
            answered = time.perf_counter() - started
            child.wait(timeout=60)
            if line.strip() != "answered":
                raise SystemExit(f"the {mode} child failed (exit {child.returncode})")
            times[mode].append(answered)
            print(f"cold start {mode}: {answered:.2f} s", file=sys.stderr)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--spawns", type=int, default=5)
    parser.add_argument("--store", type=Path, help="keep the filled store here (reused when present)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="smriti-executor-") as work:
        folder = args.store or Path(work)
        if not (folder / "bench").is_dir():
            print(f"filling {args.memories} memories", file=sys.stderr)
            fill(folder, args.memories)
        calls = per_call(folder, args.calls, args.memories)
        cold = cold_start(folder, args.spawns)
    print("| measure | runner | LangGraph | LangGraph / runner |")
    print("|---|---:|---:|---:|")
    for name, by in calls.items():
        ratio = by["langgraph"] / by["runner"] if by["runner"] else float("nan")
        print(f"| {name}, per call, median ms | {by['runner']} | {by['langgraph']} | {ratio:.1f}x |")
    runner_s, graph_s = (statistics.median(cold[k]) for k in ("runner", "langgraph"))
    print(f"| spawn to first recall, median s | {runner_s:.2f} | {graph_s:.2f} | {graph_s / runner_s:.2f}x |")
    ranges = {k: f"{min(v):.2f}-{max(v):.2f}" for k, v in cold.items()}
    print(f"\ncold start ranges: runner {ranges['runner']} s, LangGraph {ranges['langgraph']} s")


if __name__ == "__main__":
    main()
