"""Store latency with an LLM configured against the same run without one (issue 15's target:
store p50 with an LLM within 10 % of store p50 without).

Measured as users run it: a ``smriti-mcp`` process per run, a real MCP client session over
stdio, one store after another, cue-rich memories, 1,536-dim hashing embeddings. The LLM is the
local OpenAI-compatible stub (``tests/openai_stub.py``) answering every chat request after
``--delay`` seconds (2 s by default), over HTTP; its analysis lands from the queue while the
stores go on. Each round starts both servers on fresh stores and sends every memory to one and
then the other (which goes first alternates), so a change in the machine's load hits both
configurations alike; the p50 of each configuration pools its rounds.

    .venv/bin/python -m bench.store_llm [--memories 150] [--rounds 2] [--delay 2] [--pause 0]

``--pause`` is the client's think time between two stores: 0 is a burst (the worker defers to
the stores, at most 10 s at a time); an agent pauses between tool calls, and with a pause the
analyses land between and during the stores measured.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.common import command_line, latency_summary, markdown_table, section_preamble, write_section

PEOPLE = ["Alice", "Bob", "Priya", "Chen", "Maria", "Tomás", "Aisha", "Kenji", "Olga", "Sam"]
TOOLS = ["pgvector", "Qdrant", "Redis", "Kafka", "Postgres", "ClickHouse", "Terraform", "Grafana"]
PROJECTS = ["Atlas", "Orion", "Kestrel", "Nimbus", "Helix", "Quasar"]
PLACES = ["Berlin", "Lisbon", "Toronto", "Pune", "Osaka"]
TEMPLATES = [
    "{p} prefers {t} for the {j} project because the team already runs it in {c}.",
    "On Tuesday {p} decided that {j} will move its search index from {t} to {t2} before the March release.",
    "{p} recommends {t} for {j}: the benchmark in {c} showed half the latency of {t2}.",
    "The {j} deploy pipeline uses {t} and {t2}; {p} owns the runbook and the on-call rotation.",
    "{p} met {p2} in {c} to review the {j} roadmap and agreed to drop {t} by Q3.",
]


def memories(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    texts = []
    for i in range(n):
        p, p2 = rnd.sample(PEOPLE, 2)
        t, t2 = rnd.sample(TOOLS, 2)
        template = TEMPLATES[i % len(TEMPLATES)]
        texts.append(
            f"{template.format(p=p, p2=p2, t=t, t2=t2, j=rnd.choice(PROJECTS), c=rnd.choice(PLACES))} #{i}"
        )
    return texts


def stub_reply(delay: float) -> Any:
    from smriti.providers import heuristic
    from tests.openai_stub import Reply

    def reply(prompt: str) -> Reply:
        memory = prompt.split("Memory:\n", 1)[-1].split("\n\nEarlier memories", 1)[0]
        analysis = heuristic.analyze_offline(memory).model_dump()
        analysis["summary"] = "LLM: " + analysis["summary"]
        return Reply(json.dumps(analysis), delay=delay)

    return reply


def server_env(storage: Path, dims: int, llm_url: str | None) -> dict[str, str]:
    env = {
        "STORAGE_LOCATION": str(storage),
        "ACCESSING_USER": "bench",
        "EMBEDDING_DIMS": str(dims),
        "EMBEDDING_PROVIDER": "hashing",
        "LLM_PROVIDER": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "LOG_LEVEL": "WARNING",
        "PATH": "/usr/bin:/bin",
    }
    if llm_url is not None:
        env.update(LLM_PROVIDER="openai", LLM_BASE_URL=llm_url, LLM_API_KEY="sk-bench")
    return env


async def run_pair(envs: dict[str, dict[str, str]], texts: list[str], pause: float) -> dict[str, Any]:
    """Both servers at once, one store to each in turn (the first alternating): a change in the
    machine's load hits both configurations alike, store by store."""
    samples: dict[str, list[float]] = {name: [] for name in envs}
    queues: dict[str, Any] = {}
    async with AsyncExitStack() as stack:
        clients = {}
        for name, env in envs.items():
            params = StdioServerParameters(command=sys.executable, args=["-m", "smriti.server"], env=env)
            clients[name] = await stack.enter_async_context(Client(stdio_client(params)))
        names = list(envs)
        for i, text in enumerate(texts):
            for name in names if i % 2 == 0 else names[::-1]:
                started = time.perf_counter()
                result = await clients[name].call_tool("smriti_store", {"content": text, "importance": 0.6})
                samples[name].append((time.perf_counter() - started) * 1000.0)
                if result.is_error:
                    raise RuntimeError(f"store failed: {result.content}")
            if pause:
                await anyio.sleep(pause)
        for name, client in clients.items():
            stats = await client.call_tool("smriti_manage", {"action": "stats"})
            queues[name] = stats.structured_content["details"].get("analysis_queue", {})
    return {"samples": samples, "queues": queues}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=150, help="stores per run")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (a pair of fresh servers each)")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the stub takes per chat answer")
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--warmup", type=int, default=5, help="first stores of each run left out")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between two stores")
    parser.add_argument("--no-write", action="store_true", help="print, do not update bench/RESULTS.md")
    args = parser.parse_args(argv)

    from tests.openai_stub import OpenAIStub

    texts = memories(args.memories + args.warmup, seed=15)
    pooled: dict[str, list[float]] = {"no LLM": [], "LLM (stub, queued)": []}
    rounds: list[list[Any]] = []
    started = time.monotonic()
    with OpenAIStub(stub_reply(args.delay), dims=args.dims) as stub, tempfile.TemporaryDirectory() as work:
        for round_no in range(1, args.rounds + 1):
            envs = {
                name: server_env(Path(work) / f"{round_no}-{n}", args.dims, url)
                for n, (name, url) in enumerate((("no LLM", None), ("LLM (stub, queued)", stub.base_url)))
            }
            calls_before = len(stub.chat_times)
            run = anyio.run(run_pair, envs, texts, args.pause)
            landed = len(stub.chat_times) - calls_before
            for name in envs:
                kept = run["samples"][name][args.warmup :]
                pooled[name] += kept
                summary = latency_summary(kept)
                calls = landed if name != "no LLM" else 0
                rounds.append(
                    [
                        round_no,
                        name,
                        summary["p50"],
                        summary["p95"],
                        calls,
                        run["queues"][name].get("pending", "-"),
                    ]
                )
                print(
                    f"round {round_no} {name}: p50 {summary['p50']:.2f} ms, p95 {summary['p95']:.2f} ms",
                    flush=True,
                )
    plain, llm = latency_summary(pooled["no LLM"]), latency_summary(pooled["LLM (stub, queued)"])
    ratio = llm["p50"] / plain["p50"]
    body = section_preamble(
        command_line("bench.store_llm", argv),
        f"sqlite store, MCP over stdio (`python -m smriti.server`), HashingEmbeddings({args.dims}), "
        f"{args.memories} stores per run after {args.warmup} warm-up stores, "
        f"{args.rounds} rounds, each store sent to both servers in turn, "
        f"{args.pause:g} s between two stores; "
        f"the LLM is tests/openai_stub.py answering each chat request in {args.delay:g} s "
        "(ANALYSIS_RATE_PER_MINUTE=60, the default)",
    )
    body += f"- Wall time {time.monotonic() - started:.0f} s\n\n"
    body += markdown_table(
        ["configuration", "stores", "store p50 ms", "store p95 ms", "mean ms"],
        [
            [name, s["n"], s["p50"], s["p95"], s["mean"]]
            for name, s in (("no LLM", plain), ("LLM (stub, queued)", llm))
        ],
    )
    body += (
        f"\n\n**Store p50 with the LLM configured / without: {ratio:.3f}** "
        f"(target <= 1.10: {'met' if ratio <= 1.10 else 'missed'}).\n\n"
    )
    body += markdown_table(
        [
            "round",
            "configuration",
            "p50 ms",
            "p95 ms",
            "chat calls during the run",
            "still queued at its end",
        ],
        rounds,
        numeric_from=2,
    )
    body += (
        "\n\nBefore the queue a store waited for the model: at least the stub's 2 s per store "
        "(92 s with a hanging endpoint and the default 30 s timeout and 2 retries). Now the "
        "analyses run in the background, one call at a time, at most 60 a minute, and only after "
        "50 ms without a store or recall (deferring at most 10 s): in a burst of stores (no pause) "
        "few land during the run, with a pause they land between the stores; what is still "
        "queued when a run ends is analysed afterwards (and after a restart).\n"
    )
    if args.no_write:
        print(body)
    else:
        name, title = "store-llm", "Store latency with an LLM configured (issue 15)"
        if args.pause:
            name, title = "store-llm-paused", f"{title}, {args.pause:g} s between stores"
        write_section(name, title, body)
    return {"no_llm": plain, "llm": llm, "ratio": ratio}


if __name__ == "__main__":
    main()
