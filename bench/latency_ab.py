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

``--client raw`` calls each server as a bare JSON-RPC client over stdio (a line out, a line in,
nothing checked) instead of the MCP Python SDK's ``Client``, which validates each result against
the tool's output schema with ``jsonschema`` (~1.9 ms for 10 results) and routes it through its
own streams: what the server takes, against what that client adds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from bench.common import data_dir
from bench.scale_mcp import server_env  # the scale benchmark's server settings, SQLite named

MODES = ("recall", "search", "list")
LIMIT = 10


class RawClient:
    """A bare JSON-RPC client on a ``smriti-mcp`` process's stdio: one request line, then the
    lines until its answer (sequential: one call at a time)."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, errlog: Any) -> None:
        pipe = subprocess.PIPE
        self.process = subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=errlog, env=env, cwd=cwd)
        self.next_id = 0

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()
        while line := self.process.stdout.readline():
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer["result"])
        raise RuntimeError(f"{method}: the server closed stdout")

    def start(self) -> None:
        info = {"name": "latency-ab-raw", "version": "0"}
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": info})
        assert self.process.stdin is not None
        self.process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        self.process.stdin.flush()

    async def list_tools(self) -> dict[str, Any]:
        return self.request("tools/list", {})

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        return SimpleNamespace(is_error=bool(result.get("isError")), content=result.get("content"))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


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
            if args.client == "raw":
                raw = RawClient([params.command, *params.args], dict(params.env or {}), checkout, errlog)
                stack.callback(raw.close)
                raw.start()
                clients[side] = raw
            else:
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
    parser.add_argument(
        "--client",
        choices=("sdk", "raw"),
        default="sdk",
        help="sdk: the MCP Python SDK's Client (default); raw: bare JSON-RPC lines on stdio",
    )
    args = parser.parse_args(argv)
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="smriti-ab-") as work:
        stores = {side: Path(work) / side for side in sides}
        for folder in stores.values():  # each server gets its own copy: a store has one writer process
            shutil.copytree(args.store / args.user, folder / args.user)
        report = anyio.run(measure, sides, stores, args)
    report.update(
        load_start=load_start,
        load_end=os.getloadavg(),
        sides={k: str(v) for k, v in sides.items()},
        client=args.client,
    )
    print(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
