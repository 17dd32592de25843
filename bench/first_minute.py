"""How fast a client's ``smriti-mcp`` answers, measured as a client sees it: spawn to ``tools/list``,
spawn to the first recall, and one stateless call (spawn, initialize, one tool call, exit: what
langchain-mcp-adapters does per call by default), against the MCP reference memory server
(``@modelcontextprotocol/server-memory``, ``make bench-scale`` installs it) in the same run.

Raw JSON-RPC on pipes (no client library's own start in the figures). Scenarios, alternated in
every round so the machine's load falls on each alike:

* ``shared-warm``: the default, a relay to the user's shared server, which is running;
* ``shared-cold``: the same with the shared server stopped first (``smriti stop``), the relay's
  kept answers present (any start after the first);
* ``in-process``: ``SMRITI_SHARED=false`` (the server in the client's process);
* ``reference``: the reference server on a memory file of the same N memories;
* ``baseline-warm``/``baseline-cold`` (``--baseline PATH``): another ``smriti-mcp``, e.g. the
  main branch's, the same way (its own shared server, started and stopped in turn).

Run from the repository root::

    .venv/bin/python -m bench.first_minute --size 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.scale_mcp import server_env
from bench.scale_session import REFERENCE_ENTRY, run_import, script

INITIALIZE = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "first-minute", "version": "0"},
}
QUERY = "What did Caroline say about the adoption agency?"
KEYWORD = "adoption"
CACHE = Path(__file__).resolve().parent / ".cache" / "first_minute"
# The least a Python stdio server can take: start the interpreter, answer every request line.
FLOOR = [
    sys.executable,
    "-c",
    "import json, sys\n"
    "for line in sys.stdin:\n"
    "    m = json.loads(line)\n"
    "    if 'id' in m:\n"
    "        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': {}}), flush=True)\n",
]


class Pipe:
    """A server process on pipes and a clock started at its spawn."""

    def __init__(self, command: list[str], env: dict[str, str], errlog: Any) -> None:
        pipe = subprocess.PIPE
        self.started = time.perf_counter()
        self.process = subprocess.Popen(command, stdin=pipe, stdout=pipe, stderr=errlog, env=env)
        self.next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> float:
        """Send a request, read until its answer; seconds since the spawn."""
        assert self.process.stdout is not None
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while line := self.process.stdout.readline():
            answer = json.loads(line)
            if answer.get("id") == self.next_id:
                if "error" in answer or answer.get("result", {}).get("isError"):
                    raise RuntimeError(f"{method}: {str(answer)[:300]}")
                return time.perf_counter() - self.started
        raise RuntimeError(f"{method}: the server closed stdout")

    def handshake(self) -> None:
        self.request("initialize", INITIALIZE)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> float:
        """Close stdin and wait for the exit; seconds since the spawn."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(60)
        return time.perf_counter() - self.started


def session(command: list[str], env: dict[str, str], recall: dict[str, Any], errlog: Any) -> dict[str, float]:
    """spawn -> tools/list, spawn -> first recall (a client's first minute)."""
    pipe = Pipe(command, env, errlog)
    try:
        pipe.handshake()
        tools = pipe.request("tools/list", {})
        first = pipe.request("tools/call", recall)
    finally:
        pipe.close()
    return {"tools_list_s": tools, "first_recall_s": first}


def stateless(command: list[str], env: dict[str, str], recall: dict[str, Any], errlog: Any) -> float:
    """spawn, initialize, one tool call, exit: seconds to the exit."""
    pipe = Pipe(command, env, errlog)
    pipe.handshake()
    pipe.request("tools/call", recall)
    return pipe.close()


def stop_shared(env: dict[str, str]) -> None:
    subprocess.run([*script("smriti"), "stop"], env=env, capture_output=True, timeout=60, check=False)


def prepare(size: int, dims: int) -> tuple[Path, Path]:
    """A store of ``size`` memories (imported once, then reused) and the reference's memory file."""
    from bench.common import data_dir
    from bench.scale_corpus import embed_matrix, make_texts, write_records

    folder = CACHE / f"{size}-{dims}"
    storage, memory_file = folder / "storage", folder / "reference.jsonl"
    if (folder / "ready").exists():
        return storage, memory_file
    folder.mkdir(parents=True, exist_ok=True)
    corpus = make_texts(data_dir(), size)
    records = folder / "records.jsonl"
    write_records(corpus, embed_matrix(corpus.texts, dims), records)
    env = server_env(storage, dims, "bench", None)
    imported = run_import(records, env, size, 1800, folder / "import.log")
    if imported["status"] != "ok":
        raise SystemExit(f"import failed: {imported}")
    with memory_file.open("w") as out:
        for i, text in enumerate(corpus.texts):
            entity = {"type": "entity", "name": f"m{i}", "entityType": "memory", "observations": [text]}
            out.write(json.dumps(entity) + "\n")
    (folder / "ready").write_text("ok")
    return storage, memory_file


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another smriti-mcp (an older checkout's console script) measured the same way, alternated",
    )
    args = parser.parse_args(argv)

    storage, memory_file = prepare(args.size, args.dims)
    base = server_env(storage, args.dims, "bench", None)
    shared = {**base, "SMRITI_SHARED": "true", "SHARED_IDLE_TIMEOUT": "600"}
    in_process = {**base, "SMRITI_SHARED": "false"}
    smriti = script("smriti-mcp")
    reference = ["node", str(REFERENCE_ENTRY)]
    ref_env = {**os.environ, "MEMORY_FILE_PATH": str(memory_file)}
    recall = {"name": "smriti_recall", "arguments": {"query": QUERY}}
    ref_recall = {"name": "search_nodes", "arguments": {"query": KEYWORD}}
    errlog = (CACHE / "stderr.log").open("a")

    stop_shared(shared)
    session(smriti, shared, recall, errlog)  # the first start ever: fills the relay's kept answers
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    loads = []
    for _ in range(args.rounds):
        loads.append(os.getloadavg()[0])
        # The floor: a Python process that answers each line with the standard library only.
        for name, value in session(FLOOR, os.environ.copy(), recall, errlog).items():
            add(f"python-floor {name}", value)
        session(smriti, shared, recall, errlog)  # the shared server up (untimed), caches loaded
        for name, value in session(smriti, shared, recall, errlog).items():
            add(f"shared-warm {name}", value)
        add("shared-warm stateless_call_s", stateless(smriti, shared, recall, errlog))
        for name, value in session(reference, ref_env, ref_recall, errlog).items():
            add(f"reference {name}", value)
        add("reference stateless_call_s", stateless(reference, ref_env, ref_recall, errlog))
        if args.baseline is not None:
            other = [str(args.baseline)]
            stop_shared(shared)
            session(other, shared, recall, errlog)  # its own shared server up (untimed)
            for name, value in session(other, shared, recall, errlog).items():
                add(f"baseline-warm {name}", value)
            add("baseline-warm stateless_call_s", stateless(other, shared, recall, errlog))
            stop_shared(shared)
            for name, value in session(other, shared, recall, errlog).items():
                add(f"baseline-cold {name}", value)
        stop_shared(shared)
        for name, value in session(smriti, shared, recall, errlog).items():
            add(f"shared-cold {name}", value)
        stop_shared(shared)  # the in-process server opens the database itself
        for name, value in session(smriti, in_process, recall, errlog).items():
            add(f"in-process {name}", value)
    stop_shared(shared)
    medians = {name: round(statistics.median(values), 3) for name, values in samples.items()}
    result = {
        "size": args.size,
        "dims": args.dims,
        "rounds": args.rounds,
        "load_1min": loads,
        "medians_s": medians,
        "samples_s": {k: [round(v, 3) for v in vs] for k, vs in samples.items()},
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    width = max(len(name) for name in medians)
    for name in sorted(medians):
        print(f"{name:<{width}}  {medians[name]:7.3f} s   {samples[name]}")
    print(f"load (1 min) at each round: {loads}")
    return result


if __name__ == "__main__":
    main()
