"""Where a cold shared server's start goes: each step up to its first recall, timed in order.

``bench/first_minute.py`` measures a cold first recall as a client sees it; this splits the
shared server's part of it into steps (settings, the MCP SDK's imports, the app, the store, the
caches, the recall), run one after another in one fresh process per round, on the same store
of N memories. Everything here holds the GIL, so the steps add up to the server's start (the
server overlaps some of them in threads; that gains little). ``--baseline-src`` times another
tree's ``src`` (an older checkout) in the same rounds, alternated.

Run from the repository root::

    .venv/bin/python -m bench.cold_start --rounds 5 [--baseline-src /path/to/old/src]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from bench.first_minute import QUERY, prepare, stop_shared
from bench.scale_mcp import server_env

STEPS = f"""
import json, sys, time
marks = {{"interpreter start": time.time() - float(sys.argv[1])}}
last = [time.perf_counter()]
def step(name):
    now = time.perf_counter(); marks[name] = now - last[0]; last[0] = now
from smriti.config import load_settings
settings = load_settings(); step("smriti.config + settings")
import mcp_types; step("MCP SDK: mcp_types")
import mcp, mcp.server.mcpserver, mcp.server.runner; step("MCP SDK: mcp")
import smriti.server.app, smriti.server.shared.daemon; step("Smriti server modules")
from smriti.server.shared.client import prepare_folders, shared_paths
from smriti.server.shared.daemon import SharedServer
paths = shared_paths(settings); prepare_folders(paths)
server = SharedServer(settings, paths); server.uvicorn.config.load()
step("app, HTTP app, uvicorn config")
import langchain_core.embeddings.embeddings; step("langchain_core (Embeddings)")
import smriti.memory, smriti.stores.sqlite, smriti.providers.hashing, smriti.runtime
step("store and provider modules")
from smriti.runtime import open_runtime, close_runtime
runtime = open_runtime(settings); step("open the store")
runtime.memory.context.store.warm(); step("vector cache")
from smriti.providers import cue_words
cue_words.warm(); step("cue words (simplemma, stop words, dictionary)")
runtime.memory.load_pipelines(); step("pipeline modules")
runtime.memory.recall({QUERY!r}); step("first recall")
close_runtime(runtime); server.lines.sock.close()
print(json.dumps(marks))
"""


def one_start(env: dict[str, str]) -> dict[str, float]:
    argv = [sys.executable, "-c", STEPS, str(time.time())]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=True)
    marks: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return marks


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline-src", default=None, help="another tree's src/, timed alternately")
    args = parser.parse_args(argv)

    storage, _ = prepare(args.size, args.dims)
    env = {**server_env(storage, args.dims, "bench", None), "SMRITI_SHARED": "true"}
    stop_shared(env)  # the steps open the store the shared server would hold
    trees = {"this tree": env}
    if args.baseline_src:
        trees["baseline"] = {**env, "PYTHONPATH": args.baseline_src}
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in trees}
    loads = []
    for _ in range(args.rounds):
        loads.append(round(os.getloadavg()[0], 2))
        for name, tree_env in trees.items():
            for step, seconds in one_start(tree_env).items():
                samples[name].setdefault(step, []).append(seconds)
    medians = {
        name: {step: round(statistics.median(values), 3) for step, values in steps.items()}
        for name, steps in samples.items()
    }
    names = list(trees)
    print("| step | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for step in medians[names[0]]:
        print(f"| {step} | " + " | ".join(f"{medians[n][step]:.3f}" for n in names) + " |")
    print("| sum | " + " | ".join(f"{sum(medians[n].values()):.3f}" for n in names) + " |")
    print(f"load (1 min) at each round: {loads}")
    return {"medians_s": medians, "load_1min": loads}


if __name__ == "__main__":
    main()
