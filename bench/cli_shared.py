"""How long a ``smriti`` command takes beside a running client (through the shared server)
against the same command on the file directly, and against the code before this change.

A real client session holds the memory: a stdio ``smriti-mcp`` relay (started as a client
starts it, attached to the user's shared server), initialised, with memories stored through it
and its stdin left open for the whole run. Each command is then run as a user runs it, a fresh
``smriti`` process, ``--runs`` times, alternating the variants:

* ``shared``: this code, beside the client (the server answers);
* ``shared (before)``: the code of ``--before SRC`` (default: none; e.g. the main checkout's
  ``src``), beside the same client;
* ``direct``: this code on the file, after the client and server stopped (no server to ask).

Offline settings (heuristic analysis, the hashing embedder): the direct figure then includes no
model load. Medians in seconds, wall time of the whole process.

    .venv/bin/python -m bench.cli_shared [--runs 7] [--before /work/main/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

COMMANDS: dict[str, list[str]] = {
    "recall": ["recall", "which database does Alice prefer?", "--json"],
    "store": ["store", "Erin keeps the staging cluster in Dublin."],
    "list": ["list", "--json"],
    "stats": ["stats", "--json"],
    "context (hook)": ["context", "what does Bob recommend for pagination?"],
}
MEMORIES = [
    "Alice prefers PostgreSQL with pgvector for retrieval projects.",
    "Bob recommends cursor-based pagination for the orders API.",
    "The Atlas deploy pipeline runs on GitHub Actions every night.",
]


def _env(storage: Path, pythonpath: str | None) -> dict[str, str]:
    env = {
        **os.environ,
        "STORAGE_LOCATION": str(storage),
        "ACCESSING_USER": "bench",
        "LLM_PROVIDER": "heuristic",
        "EMBEDDING_PROVIDER": "hashing",
        "EMBEDDING_DIMS": "384",
        "BACKUP_TYPE": "none",
        "CONSOLIDATION_INTERVAL": "0",
        "SMRITI_SHARED": "true",
        "SHARED_IDLE_TIMEOUT": "600",
    }
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return env


class Client:
    """A client session on stdio: the relay, initialised, its stdin kept open."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "smriti.server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})  # fmt: skip
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdout is not None
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while line := self.process.stdout.readline():
            message = json.loads(line)
            if message.get("id") == self.next_id:
                assert "error" not in message, message
                return dict(message["result"])
        raise RuntimeError("the relay closed its stdout")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def _time(args: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "smriti.cli", *args], env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"smriti {' '.join(args)} failed: {done.stderr[-500:]}")
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", help="the src folder of the code to compare with (e.g. /work/main/src)")
    args = parser.parse_args(argv)
    here = str(Path(__file__).resolve().parents[1] / "src")
    samples: dict[tuple[str, str], list[float]] = {}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="smriti-cli-bench-") as tmp:
        storage = Path(tmp) / "store"
        env = _env(storage, here)
        client = Client(env)
        try:
            for text in MEMORIES:
                client.request("tools/call", {"name": "smriti_store", "arguments": {"content": text}})
            variants = {"shared": env}
            if args.before:
                variants["shared (before)"] = _env(storage, args.before)
            for run in range(args.runs):
                for name, command in COMMANDS.items():
                    order = list(variants.items())
                    for variant, variant_env in order if run % 2 == 0 else reversed(order):
                        samples.setdefault((name, variant), []).append(_time(command, variant_env))
            loads.append(os.getloadavg()[0])
        finally:
            client.close()
            subprocess.run([sys.executable, "-m", "smriti.cli", "stop"], env=env, capture_output=True)
        for _ in range(args.runs):
            for name, command in COMMANDS.items():
                samples.setdefault((name, "direct"), []).append(_time(command, env))
        loads.append(os.getloadavg()[0])
    variants_seen = sorted(
        {variant for _, variant in samples}, key=["shared", "shared (before)", "direct"].index
    )
    print("| command | " + " | ".join(f"{v} (s)" for v in variants_seen) + " |")
    print("|---|" + "---:|" * len(variants_seen))
    for name in COMMANDS:
        cells = [f"{statistics.median(samples[(name, v)]):.2f}" for v in variants_seen]
        print(f"| `smriti {name}` | " + " | ".join(cells) + " |")
    print(f"\nruns per cell: {args.runs}; load average (1 min) at start, after the shared runs, at the end: "
          + ", ".join(f"{load:.1f}" for load in loads))  # fmt: skip


if __name__ == "__main__":
    main()
