"""Scaling benchmark: store and recall latency of the Kuzu store at 1k and 10k engrams.

Run from the repository root::

    .venv/bin/python -m bench.scaling                    # 1k and 10k engrams (~3 minutes on 2 cores)
    .venv/bin/python -m bench.scaling --sizes 1000 --stores 50 --queries 50

For each size a synthetic corpus (sentences from a dozen templates over ~300 people, places,
technologies and topics; hashing embeddings) is written straight through
``GraphStore.create_engram``: engrams only, no cues or associations, because the full store
pipeline (~60 ms a memory here) would take ten minutes to fill 10k. On top of that fill,
``--stores`` new memories go through the full store pipeline and ``--queries`` questions
through recall (mode recall, the whole graph) and search (mode search, vector only), in
three configurations of the same database file:

* ``no indexes``: extensions off; brute-force cosine over the cached matrix, BM25 keyword scan
  (what every store below ``index_threshold`` = 50 engrams uses);
* ``indexes (default)``: the HNSW and FTS indexes built by ``ensure_indexes`` (as consolidation
  and the store's lazy index check do past 50 engrams); below ``exact_search_limit`` (20k)
  vectors and full text still answer from the exact cache and the in-memory BM25;
* ``indexes, HNSW forced``: the same with ``exact_search_limit=0``, so vectors come from HNSW
  and full text from Kuzu's FTS index.

The baseline is numpy brute force in the same process: embed + append a row to store,
embed + one matrix product + argpartition to search. Ratios are Smriti / baseline (medians).
"""

from __future__ import annotations

import argparse
import logging
import random
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.baselines import DenseRetriever
from bench.common import (
    bench_settings,
    command_line,
    latency_summary,
    markdown_table,
    ratio,
    section_preamble,
    setup_logging,
    stopwatch,
    write_section,
)

logger = logging.getLogger("smriti.bench.scaling")
DIMS = 256

PEOPLE = [
    "Alice", "Bob", "Carmen", "Dmitri", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kavya", "Liam",
    "Maya", "Nikolai", "Olu", "Priya", "Quentin", "Rosa", "Sven", "Tariq", "Uma", "Viktor", "Wen", "Ximena",
    "Yusuf", "Zara", "Aarav", "Beatriz", "Chen", "Dara", "Emeka", "Freya", "Gustavo", "Hana", "Ivan", "Jade",
    "Kofi", "Lena", "Mateo", "Nadia", "Oscar", "Paula", "Rahul", "Sofia", "Tomas", "Ulla", "Vera", "Wei",
    "Yara", "Zoe", "Anika", "Bruno", "Clara", "Diego", "Esra", "Felix", "Gita", "Henrik", "Isla", "Jamal",
]  # fmt: skip
PLACES = [
    "Berlin", "Lisbon", "Nairobi", "Osaka", "Toronto", "Lima", "Oslo", "Pune", "Austin", "Seoul", "Cairo",
    "Dublin", "Hanoi", "Madrid", "Perth", "Quito", "Riga", "Sofia", "Tunis", "Utrecht", "Valencia", "Warsaw",
    "Zurich", "Bogota", "Chennai", "Denver", "Esbjerg", "Florence", "Geneva", "Helsinki", "Istanbul",
    "Jakarta", "Kyoto", "Lagos", "Montreal", "Nantes", "Porto", "Reykjavik", "Santiago", "Tallinn",
]  # fmt: skip
TECH = [
    "postgres", "pgvector", "kubernetes", "terraform", "kafka", "redis", "graphql", "grpc", "rust", "golang",
    "typescript", "react", "svelte", "django", "fastapi", "airflow", "spark", "duckdb", "clickhouse", "kuzu",
    "neo4j", "falkordb", "langgraph", "pytorch", "onnx", "wasm", "nginx", "envoy", "prometheus", "grafana",
    "opentelemetry", "vault", "keycloak", "oauth", "sqlite", "parquet", "iceberg", "flink", "ray", "dask",
    "celery", "rabbitmq", "nats", "zig", "elixir", "phoenix", "rails", "laravel", "spring", "quarkus",
    "helm", "argo", "istio", "linkerd", "cilium", "ebpf", "qdrant", "weaviate", "milvus", "chroma",
    "ollama", "vllm", "llama", "mistral", "whisper", "bert", "faiss", "hnsw", "bm25", "leiden",
    "igraph", "networkx", "polars", "pandas", "numpy", "scipy", "jax", "triton", "cuda", "metal",
]  # fmt: skip
TOPICS = [
    "billing migration", "search latency", "cursor pagination", "schema change", "on-call rotation",
    "incident review", "cost report", "hiring plan", "design review", "release freeze", "data retention",
    "access audit", "load test", "capacity plan", "feature flag", "dark launch", "rate limiting",
    "cache invalidation", "index rebuild", "backup restore", "disaster drill", "latency budget",
    "error budget", "canary deploy", "blue green rollout", "dependency upgrade", "license review",
    "privacy request", "onboarding guide", "api versioning", "webhook retries", "queue backlog",
    "memory leak", "cold start", "thread pool", "connection pool", "query planner", "vacuum tuning",
    "embedding refresh", "reranker trial", "prompt library", "eval harness", "holiday schedule",
    "team offsite", "budget request", "vendor contract", "security training", "pen test", "bug bash",
    "hackathon", "roadmap", "quarterly goals", "customer interview", "churn analysis", "pricing page",
]  # fmt: skip
TEMPLATES = [
    "{p} recommended {t} for the {topic} after the meeting in {place}.",
    "{p} and {q} argued about {t} versus {u} during the {topic}.",
    "In {place}, {p} finished the {topic} using {t}.",
    "{p} prefers {t} because the {topic} needs low latency.",
    "The {topic} was postponed; {p} will revisit {t} next sprint.",
    "{p} told {q} that {t} broke the {topic} in staging.",
    "{q} asked {p} to document how {t} handles the {topic}.",
    "{p} moved to {place} and now leads the {topic}.",
    "We chose {t} over {u} for the {topic}; {p} signed off.",
    "{p} shared benchmark numbers for {t} at the {topic} sync.",
    "During the {topic}, {q} found that {t} needs more memory than {u}.",
    "{p} is travelling to {place} for the {topic} workshop with {q}.",
]
QUESTIONS = [
    "What did {p} recommend for the {topic}?",
    "Why does {p} prefer {t}?",
    "Who leads the {topic} in {place}?",
    "What happened with {t} during the {topic}?",
    "Which tool did we choose for the {topic}?",
    "What did {q} find about {t}?",
]


def sentence(rnd: random.Random, templates: list[str]) -> str:
    p, q = rnd.sample(PEOPLE, 2)
    t, u = rnd.sample(TECH, 2)
    return rnd.choice(templates).format(
        p=p, q=q, t=t, u=u, topic=rnd.choice(TOPICS), place=rnd.choice(PLACES)
    )


def fill(store, embedder, size: int, rnd: random.Random, now: datetime) -> float:
    """Write ``size`` engrams straight to the store; returns the seconds it took."""
    from smriti.stores.base import Engram

    started = time.perf_counter()
    texts = [sentence(rnd, TEMPLATES) for _ in range(size)]
    for text, vector in zip(texts, embedder.embed_documents(texts), strict=True):
        when = now - timedelta(minutes=rnd.randint(0, 60 * 24 * 60))
        store.create_engram(
            Engram(content=text, embedding=vector, created_at=when, last_accessed_at=when, source="fill")
        )
    return time.perf_counter() - started


def measure(memory, new_texts: list[str], queries: list[str], timing: dict[str, list], label: str) -> None:
    for text in new_texts:
        with stopwatch(timing[f"{label}|store"]):
            memory.store(text, source="bench")
    memory.recall(queries[0], limit=10, mode="recall")  # warm caches (matrix, keyword index, plans)
    memory.recall(queries[0], limit=10, mode="search")
    for query in queries:
        with stopwatch(timing[f"{label}|recall"]):
            memory.recall(query, limit=10, mode="recall")
        with stopwatch(timing[f"{label}|search"]):
            memory.recall(query, limit=10, mode="search")


def run_size(size: int, stores: int, queries: int, folder: Path, timing: dict[str, list]) -> dict[str, Any]:
    from smriti.memory import Memory
    from smriti.pipelines.context import MemoryContext
    from smriti.providers.hashing import HashingEmbeddings
    from smriti.stores.kuzu import open_kuzu

    rnd = random.Random(size)
    embedder = HashingEmbeddings(DIMS)
    settings = bench_settings(folder, embedding_dims=DIMS)
    user = f"scale{size}"
    now = datetime.now(UTC)
    info: dict[str, Any] = {"size": size}

    def open_memory(**options: Any) -> Memory:
        store = open_kuzu(settings, user, **options)
        return Memory(MemoryContext(store=store, embedder=embedder, settings=settings))

    memory = open_memory(use_extensions=False)
    info["fill_s"] = fill(memory.context.store, embedder, size, rnd, now)
    question_texts = [sentence(rnd, QUESTIONS) for _ in range(queries)]
    configs = (
        ("no indexes", {"use_extensions": False}),
        ("indexes (default)", {}),
        ("indexes, HNSW forced", {"exact_search_limit": 0}),
    )
    for label, options in configs:
        if label != "no indexes":
            memory.close()
            memory = open_memory(**options)
            started = time.perf_counter()
            built = memory.context.store.ensure_indexes(settings.index_threshold)
            if label == "indexes (default)":
                info["index_build_s"] = time.perf_counter() - started
                info["indexes"] = built
        logger.info("size %d: %s", size, label)
        measure(memory, [sentence(rnd, TEMPLATES) for _ in range(stores)], question_texts, timing,
                f"{size}|{label}")  # fmt: skip
    memory.close()

    # numpy baseline over the same number of rows (its own corpus of the same shape).
    baseline = DenseRetriever(embedder)
    texts = [sentence(random.Random(size + 1), TEMPLATES) for _ in range(size)]
    for i, vector in enumerate(embedder.embed_documents(texts)):
        baseline.add_vector(str(i), vector)
    for i in range(stores):
        with stopwatch(timing[f"{size}|numpy|store"]):
            baseline.add(f"new{i}", sentence(rnd, TEMPLATES))
    for query in question_texts:
        with stopwatch(timing[f"{size}|numpy|search"]):
            baseline.search(query, 10)
    return info


def report(sizes: list[int], timing: dict[str, list]) -> str:
    """One row per size and path: p50 and p95 of each operation, ratios of p50 against numpy."""
    rows = []
    for size in sizes:
        base_store = latency_summary(timing[f"{size}|numpy|store"])
        base_search = latency_summary(timing[f"{size}|numpy|search"])
        rows.append([size, "numpy brute force", base_store["p50"], base_store["p95"], 1.0,
                     base_search["p50"], base_search["p95"], 1.0, "-", "-"])  # fmt: skip
        for label in ("no indexes", "indexes (default)", "indexes, HNSW forced"):
            key = f"{size}|{label}"
            st, rc, se = (latency_summary(timing[f"{key}|{m}"]) for m in ("store", "recall", "search"))
            rows.append([size, f"Smriti, {label}", st["p50"], st["p95"], ratio(st["p50"], base_store["p50"]),
                         se["p50"], se["p95"], ratio(se["p50"], base_search["p50"]),
                         rc["p50"], rc["p95"]])  # fmt: skip
    headers = ["engrams", "path", "store p50", "store p95", "store x numpy", "search p50", "search p95",
               "search x numpy", "recall p50", "recall p95"]  # fmt: skip
    return markdown_table(headers, rows, numeric_from=2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument(
        "--stores", type=int, default=30, help="memories stored through the pipeline per config"
    )
    parser.add_argument("--queries", type=int, default=50, help="queries per config and mode")
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    command = command_line("bench.scaling", argv)
    timing: dict[str, list] = defaultdict(list)
    infos = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smriti-scaling-") as folder:
        for size in args.sizes:
            infos.append(run_size(size, args.stores, args.queries, Path(folder), timing))
    elapsed = time.perf_counter() - started
    notes = "\n".join(
        f"- {i['size']} engrams: fill {i['fill_s']:.1f} s ({i['size'] / i['fill_s']:.0f} engrams/s through "
        f"`create_engram`), index build {i.get('index_build_s', float('nan')):.1f} s -> {i.get('indexes')}"
        for i in infos
    )
    body = (
        section_preamble(
            command,
            f"kuzu store, HashingEmbeddings({DIMS}), heuristic analyser, default scoring; "
            f"{args.stores} pipeline stores and {args.queries} queries (top 10) per configuration",
        )
        + f"- Wall time {elapsed:.0f} s\n{notes}\n\n"
        "Latencies in ms. `store` = the whole store pipeline (analyse, embed, dedupe, write, cues, "
        "associations, index check); `search` = recall mode search (vector only, the like-for-like "
        "comparison with numpy); `recall` = the full recall graph. Ratios: Smriti p50 / numpy p50 "
        "(medians: a stray garbage-collection or checkpoint pause moves a mean of 30 samples).\n\n"
        + report(args.sizes, timing)
        + "\n\nThe fill writes engrams without cues or associations, so at these sizes cue traversal and "
        "hops run over a sparse graph: the recall column is a lower bound for a store filled by the "
        "pipeline (see the LoCoMo section for recall over a fully linked store).\n"
    )
    print(body)
    write_section("scaling", "Scaling: store and recall latency (Kuzu)", body, args.results)
    return {"timing": timing, "infos": infos, "body": body}


if __name__ == "__main__":
    main()
