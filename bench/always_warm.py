"""Always warm: a client's spawn -> first recall while the shared server runs as the user's
service runs it (the exact command ``smriti service install`` writes: ``python -m smriti.server
--shared-daemon --service``), against the MCP reference memory server
(``@modelcontextprotocol/server-memory``; ``make bench-scale`` installs it), in the same rounds.

Each round, alternated so the machine's load falls on each alike:

* ``service-warm``: the relay with the service's server running;
* ``reference``: the reference server on a memory file of the same N memories;
* ``cold``: the service's server stopped, no server running, the relay's kept answers present
  (the first client of the day without the service, or after an idle exit);
* ``after-short``: cold, but a short session first (initialize, tools/list, exit: a client that
  lists the tools and disconnects, as langchain-mcp-adapters' ``get_tools()``), then the timed
  session at once (``--short``);
* ``baseline-cold``, ``baseline-after-short`` (``--baseline PATH``): another ``smriti-mcp`` (an
  older checkout's) the same ways.

Raw JSON-RPC on pipes (``bench/first_minute.py``'s sessions). Run from the repository root::

    SMRITI_BENCH_DATA=/path/to/shared/bench .venv/bin/python -m bench.always_warm --size 10000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.first_minute import CACHE, KEYWORD, QUERY, Pipe, prepare, session, stop_shared
from bench.scale_mcp import server_env
from bench.scale_session import REFERENCE_ENTRY, script
from smriti.server.shared.client import Attachment, server_status, shared_paths
from smriti.server.shared.service import service_command


def start_service(env: dict[str, str], log: Any) -> subprocess.Popen[bytes]:
    """The service's command, as the manager runs it; returns once it serves."""
    paths = shared_paths(Attachment.from_environment(env))  # type: ignore[arg-type]
    process = subprocess.Popen(service_command(), env=env, stdout=log, stderr=log, cwd=paths.folder)
    deadline = time.monotonic() + 120
    while (status := server_status(paths)) is None or status.get("pid") != process.pid:
        if process.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the service's server did not serve (see {paths.log})")
        time.sleep(0.1)
    return process


def stop_service(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(60)


def after_short(
    command: list[str], env: dict[str, str], recall: dict[str, Any], errlog: Any
) -> dict[str, float]:
    """A short session (initialize, tools/list, exit), then a timed session at once."""
    short = Pipe(command, env, errlog)
    short.handshake()
    short.request("tools/list", {})
    short.close()
    return session(command, env, recall, errlog)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--baseline", type=Path, default=None, help="another smriti-mcp, measured cold")
    parser.add_argument("--short", action="store_true", help="also time a session right after a short one")
    args = parser.parse_args(argv)

    storage, memory_file = prepare(args.size, args.dims)
    shared = {**server_env(storage, args.dims, "bench", None), "SMRITI_SHARED": "true"}
    smriti = script("smriti-mcp")
    reference = ["node", str(REFERENCE_ENTRY)]
    ref_env = {**os.environ, "MEMORY_FILE_PATH": str(memory_file)}
    recall = {"name": "smriti_recall", "arguments": {"query": QUERY}}
    ref_recall = {"name": "search_nodes", "arguments": {"query": KEYWORD}}
    errlog = (CACHE / "stderr.log").open("a")

    stop_shared(shared)
    session(smriti, shared, recall, errlog)  # fills the relay's kept answers
    if args.baseline is not None:
        stop_shared(shared)
        session([str(args.baseline)], shared, recall, errlog)  # and the baseline's
    stop_shared(shared)
    samples: dict[str, list[float]] = {}
    loads = []
    for _ in range(args.rounds):
        loads.append(round(os.getloadavg()[0], 2))
        service = start_service(shared, errlog)
        try:
            session(smriti, shared, recall, errlog)  # caches loaded (untimed), as a day's use has
            for name, value in session(smriti, shared, recall, errlog).items():
                samples.setdefault(f"service-warm {name}", []).append(value)
        finally:
            stop_service(service)
        for name, value in session(reference, ref_env, ref_recall, errlog).items():
            samples.setdefault(f"reference {name}", []).append(value)
        for name, value in session(smriti, shared, recall, errlog).items():
            samples.setdefault(f"cold {name}", []).append(value)
        stop_shared(shared)
        if args.short:
            for name, value in after_short(smriti, shared, recall, errlog).items():
                samples.setdefault(f"after-short {name}", []).append(value)
            stop_shared(shared)
        if args.baseline is not None:
            for name, value in session([str(args.baseline)], shared, recall, errlog).items():
                samples.setdefault(f"baseline-cold {name}", []).append(value)
            stop_shared(shared)
            if args.short:
                for name, value in after_short([str(args.baseline)], shared, recall, errlog).items():
                    samples.setdefault(f"baseline-after-short {name}", []).append(value)
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
        print(f"{name:<{width}}  {medians[name]:7.3f} s   {[round(v, 3) for v in samples[name]]}")
    print(f"load (1 min) at each round: {loads}")
    return result


if __name__ == "__main__":
    main()
