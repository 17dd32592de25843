"""Before/after latency through MCP, interleaved: two ``smriti-mcp`` servers called in turn.

On a shared machine the load moves more between two benchmark runs than a few milliseconds of
change: ``bench.scale_mcp`` run before and after disagrees with itself by 20-50 %. This runs a
server from each checkout at once, each from its own venv and on its own copy of one store,
and calls them alternately, query by query (which one goes first flips every call), so both
see the same load. It reports each side's p50 and the median of the per-call ratios.

    # a 10k store first (kept in the workdir), then main's checkout against this one:
    .venv/bin/python -m bench.scale_mcp --sizes 10000 --no-reference --no-results --workers \\
        --workdir /tmp/scale
    .venv/bin/python -m bench.latency_ab --before ../main --store /tmp/scale/store-sqlite \\
        --user bench10000d1536 --rounds 2

Each round: the 30 store texts of ``bench.scale_corpus`` (a round suffix keeps them new), then
the 40 questions in modes recall, search and list. Progress and results go to stderr and stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from bench.common import data_dir
from bench.scale_mcp import server_env  # the scale benchmark's server settings, SQLite named

MODES = ("recall", "search", "list")
LIMIT = 10


async def measure(
    sides: dict[str, Path], stores: dict[str, Path], args: argparse.Namespace
) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from bench.scale_corpus import make_texts

    corpus = make_texts(data_dir(), args.size, seed=0, extra=30)
    questions = corpus.queries[:40]
    timing: dict[str, dict[str, list[float]]] = {side: {m: [] for m in ("store", *MODES)} for side in sides}
    async with AsyncExitStack() as stack:
        clients: dict[str, Any] = {}
        for side, checkout in sides.items():
            params = StdioServerParameters(
                command=str(checkout / ".venv" / "bin" / "python"),
                args=["-m", "smriti.server"],
                env={**server_env(stores[side], args.dims, args.user, None), "DB_TYPE": "sqlite"},
                cwd=str(checkout),
            )
            errlog = stack.enter_context((stores[side] / "server.log").open("a"))
            clients[side] = await stack.enter_async_context(Client(stdio_client(params, errlog=errlog)))
            await clients[side].list_tools()
            for question in questions[:5]:  # warm: the caches and the first calls
                for mode in MODES:
                    await clients[side].call_tool(
                        "smriti_recall", {"query": question, "limit": LIMIT, "mode": mode}
                    )
        order = list(sides)

        async def both(tool: str, arguments: dict[str, Any], key: str) -> None:
            nonlocal order
            for side in order:
                started = time.perf_counter()
                result = await clients[side].call_tool(tool, arguments)
                timing[side][key].append((time.perf_counter() - started) * 1000.0)
                if result.is_error:
                    raise RuntimeError(f"{side} {tool}: {result.content}")
            order = order[::-1]

        for round_ in range(args.rounds):
            print(f"round {round_ + 1}/{args.rounds}, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
            for text in corpus.extra[:30]:
                await both("smriti_store", {"content": f"{text} (round {round_})", "source": "ab"}, "store")
            for question in questions:
                for mode in MODES:
                    await both("smriti_recall", {"query": question, "limit": LIMIT, "mode": mode}, mode)
    before, after = timing["before"], timing["after"]
    return {
        "p50_ms": {side: {k: statistics.median(v) for k, v in timing[side].items()} for side in sides},
        "after_over_before": {
            k: statistics.median(b / a for a, b in zip(before[k], after[k], strict=True)) for k in before
        },
        "calls": {k: len(v) for k, v in before.items()},
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import anyio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the other checkout (with its .venv)")
    parser.add_argument("--after", type=Path, default=Path.cwd(), help="this checkout (default)")
    parser.add_argument("--store", type=Path, required=True, help="a STORAGE_LOCATION holding --user's store")
    parser.add_argument("--user", required=True)
    parser.add_argument(
        "--size", type=int, default=10_000, help="the store's size (for its corpus' questions)"
    )
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="smriti-ab-") as work:
        stores = {side: Path(work) / side for side in sides}
        for folder in stores.values():  # each server gets its own copy: a store has one writer process
            shutil.copytree(args.store / args.user, folder / args.user)
        report = anyio.run(measure, sides, stores, args)
    report.update(
        load_start=load_start, load_end=os.getloadavg(), sides={k: str(v) for k, v in sides.items()}
    )
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
