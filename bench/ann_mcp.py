"""The recall tool through MCP on ``bench.ann_scale``'s store (issue 27, item 6: 1M memories).

Run from the repository root after ``bench.ann_scale`` built and saved the graph, niced::

    nice -n 19 .venv/bin/python -m bench.ann_mcp --folder /tmp/smriti-ann-scale/n1000000-d1536 --dtype i8

1. full text: ``bench.ann_scale`` writes the engram rows only; the FTS5 rows an import writes
   with them are added once (``fts_terms`` of each row, as ``EngramTable.create`` does), so
   recall's keyword step searches N memories too. Cues are not written (the offline analyser
   over 1M texts is out of this benchmark's reach): recall's cue step finds none;
2. a real ``smriti-mcp`` (stdio, ``SMRITI_SHARED=false``: the server process itself,
   ``VECTOR_INDEX_DTYPE`` as given, hashing embeddings) on hard links of the store and its
   saved graph in a fresh storage folder: the server opens the graph memory-mapped;
3. through the ``mcp`` SDK client: the answer to ``initialize``, the first recall, then the
   scale corpus's questions in modes recall and search (p50/p95), the server's RSS (VmRSS and
   its peak VmHWM, ``/proc/<pid>/status``) after the first recall and at the end.

One JSON object on stdout; progress on stderr; the server's stderr in ``FOLDER/mcp-server.log``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from bench.common import data_dir, latency_summary
from bench.scale_corpus import make_texts
from bench.scale_session import LIMIT, call, child_pid, memory_of, script

USER = "bench"


def progress(message: str) -> None:
    stamp = f"[ann_mcp {time.strftime('%H:%M:%S')} load {os.getloadavg()}]"
    print(f"{stamp} {message}", file=sys.stderr, flush=True)


def fill_fulltext(path: Path, dims: int) -> int:
    """Write the FTS5 row of every engram that has none yet (once); returns the rows written."""
    from smriti.stores.sqlite.schema import fts_terms
    from smriti.stores.sqlite.store import SqliteStore

    store = SqliteStore(path, user=USER, dims=dims)
    try:
        if store.db.read("SELECT count(*) FROM engram_fts")[0][0]:
            return 0
        written = 0
        for batch in store.db.read_batches("SELECT rowid, content, summary, facts FROM engram", size=20_000):
            rows = [(rowid, fts_terms(content, summary, facts)) for rowid, content, summary, facts in batch]
            with store.db.transaction():
                store.db.write_many("INSERT INTO engram_fts (rowid, terms) VALUES (?, ?)", rows)
            written += len(rows)
            progress(f"full text: {written} rows")
        return written
    finally:
        store.close()


def storage_of(folder: Path, work: Path) -> Path:
    """A storage folder whose user ``bench`` has hard links of the store and its saved graph
    (the server refuses a store path that resolves elsewhere, so no symbolic links)."""
    user = work / "storage" / USER
    if user.parent.exists():
        shutil.rmtree(user.parent)
    user.mkdir(parents=True)
    for name in ("memory.sqlite", "memory.sqlite.vectors", "memory.sqlite.vectors.json"):
        os.link(folder / name, user / name)
    return user.parent


async def session(env: dict[str, str], questions: list[str], log: Path) -> dict[str, Any]:
    import jsonschema  # noqa: F401 -- the client's lazy import is not the server's time
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = script("smriti-mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    out: dict[str, Any] = {}
    with log.open("a") as errlog:
        started = time.perf_counter()
        async with Client(stdio_client(params, errlog=errlog)) as client:
            out["initialize_ms"] = round((time.perf_counter() - started) * 1000.0, 1)
            await client.list_tools()
            pid = child_pid("smriti")
            first_ms, _ = await call(client, "smriti_recall", {"query": questions[0], "limit": LIMIT})
            out["first_recall_ms"] = round(first_ms, 1)
            out["rss_after_first_recall_mb"] = memory_of(pid)
            progress(f"first recall {first_ms:.0f} ms, server {out['rss_after_first_recall_mb']}")
            timing: dict[str, list[float]] = {"recall": [], "search": []}
            for k, question in enumerate(questions):
                for mode in timing:
                    ms, _ = await call(
                        client, "smriti_recall", {"query": question, "limit": LIMIT, "mode": mode}
                    )
                    timing[mode].append(ms)
                if k % 25 == 24:
                    so_far = latency_summary(timing["recall"])["p50"]
                    progress(f"{k + 1} questions; recall p50 so far {so_far:.0f} ms")
            out.update({mode: latency_summary(samples) for mode, samples in timing.items()})
            out["rss_end_mb"] = memory_of(pid)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, required=True, help="bench.ann_scale's store folder")
    parser.add_argument("--dtype", default="i8", choices=["f32", "f16", "i8"])
    parser.add_argument("--dims", type=int, default=1536)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"folder": str(args.folder), "dtype": args.dtype, "load": [os.getloadavg()]}
    started = time.perf_counter()
    result["fulltext_rows_written"] = fill_fulltext(args.folder / "memory.sqlite", args.dims)
    result["fulltext_s"] = round(time.perf_counter() - started, 1)
    result["load"].append(os.getloadavg())
    storage = storage_of(args.folder, args.folder / "mcp")
    env = {
        **os.environ,
        "STORAGE_LOCATION": str(storage),
        "ACCESSING_USER": USER,
        "EMBEDDING_DIMS": str(args.dims),
        "EMBEDDING_PROVIDER": "hashing",
        "LLM_PROVIDER": "heuristic",
        "VECTOR_INDEX_DTYPE": args.dtype,
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "LOG_LEVEL": "WARNING",
        "SMRITI_SHARED": "false",  # the server process itself, not a relay to it
    }
    questions = make_texts(data_dir(), 1, seed=0).queries[: args.queries]
    progress(f"smriti-mcp on {storage}: {len(questions)} questions x (recall, search)")
    result.update(anyio.run(session, env, questions, args.folder / "mcp-server.log"))
    result["load"].append(os.getloadavg())
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
