"""What the local MiniLM embedder costs: import, weight load, one embedding, one store, memory.

Each embedder runs in its own child process (so import time and peak RSS are its own), storing
the same memories of typical length (one to three sentences, 30-60 tokens) through
``Memory.store`` on a fresh SQLite store, offline (heuristic analysis).

    .venv/bin/python -m bench.minilm_cost [--memories 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile

MEMORIES = [
    "Priya decided to move the search service from Elasticsearch to pgvector because the team "
    "already runs Postgres; she will benchmark recall next week.",
    "Bob recommends cursor-based pagination for the orders API, since offset pagination gets slow "
    "past a few thousand pages.",
    "The deploy pipeline for project Atlas runs on GitHub Actions every night at 02:00 UTC and "
    "posts failures to the #atlas-ops channel.",
    "Alice prefers short pull requests with one reviewer; anything touching billing needs two.",
]

CHILD = r"""
import json, resource, sys, tempfile, time
started = time.perf_counter()
from smriti.config import Settings
from smriti.memory import Memory
imported = time.perf_counter() - started
provider, count, memories = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
with tempfile.TemporaryDirectory() as folder:
    settings = Settings(storage_location=folder, accessing_user="bench", llm_provider="heuristic",
                        embedding_provider=provider, consolidation_interval=0, backup_type="none")
    t = time.perf_counter(); memory = Memory.open(settings); opened = time.perf_counter() - t
    embedder = memory.context.embedder
    t = time.perf_counter(); embedder.embed_query("warm up"); first = time.perf_counter() - t
    text = memories[0]
    t = time.perf_counter()
    for _ in range(20):
        embedder.embed_query(text)
    embed_ms = (time.perf_counter() - t) / 20 * 1000
    texts = [f"{memories[i % len(memories)]} (note {i})" for i in range(count)]
    t = time.perf_counter()
    for content in texts:
        memory.store(content)
    store_ms = (time.perf_counter() - t) / count * 1000
    t = time.perf_counter()
    for _ in range(10):
        memory.recall("which database did Priya pick for search?")
    recall_ms = (time.perf_counter() - t) / 10 * 1000
    memory.close()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"provider": provider, "dims": settings.embedding_dims if provider != "minilm" else 384,
                  "import_s": imported, "open_s": opened, "first_embedding_s": first, "embed_ms": embed_ms,
                  "store_ms": store_ms, "recall_ms": recall_ms, "peak_rss_mb": rss / 1024}))
"""


def tokens(text: str) -> int:
    from smriti.providers.minilm import MiniLMEmbeddings

    return len(MiniLMEmbeddings().tokenizer.encode(text).ids)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=40, help="memories stored per embedder")
    args = parser.parse_args()
    lengths = [tokens(text) for text in MEMORIES]
    print(f"memory length: {min(lengths)}-{max(lengths)} tokens")
    for provider in ("hashing", "minilm"):
        with tempfile.TemporaryDirectory():
            done = subprocess.run(
                [sys.executable, "-c", CHILD, provider, str(args.memories), json.dumps(MEMORIES)],
                capture_output=True,
                text=True,
                check=True,
            )
        row = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{provider:8} dims {row['dims']:5}  import {row['import_s']:.2f} s  open {row['open_s']:.2f} s  "
            f"first embedding {row['first_embedding_s']:.2f} s  embedding {row['embed_ms']:.1f} ms  "
            f"store {row['store_ms']:.1f} ms  recall {row['recall_ms']:.1f} ms  "
            f"peak RSS {row['peak_rss_mb']:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
