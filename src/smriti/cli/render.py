"""Rich rendering for the ``smriti`` command line: result tables, traces, stats, reports.

Rich is imported when something is drawn, not with the module: ``smriti context`` (a hook) and
``--json`` output print plain lines. Consoles are created per call (not at import) so they
write to whatever ``sys.stdout`` / ``sys.stderr`` is current, which is what test runners and
shell redirection expect.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def escape(text: str) -> str:
    """``text`` with Rich markup escaped."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def out() -> Console:
    """The stdout console (results)."""
    from rich.console import Console

    return Console(highlight=False)


def err() -> Console:
    """The stderr console (errors, notices, progress), never wrapped so errors stay one line."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def print_json(payload: Any) -> None:
    """Plain JSON on stdout (no Rich markup, colours or wrapping), for scripts."""
    print(json.dumps(payload, ensure_ascii=False, indent=2, default=str))


def error_line(message: str) -> None:
    """One red line on stderr: multi-line messages are joined with '; '."""
    text = "; ".join(part.strip() for part in str(message).splitlines() if part.strip())
    err().print(f"[red]error:[/red] {escape(text)}")


def notice(message: str) -> None:
    err().print(f"[yellow]{escape(message)}[/yellow]")


SHORT_ID = 8  # characters of an id shown on a narrow terminal


def _short(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def results_table(result: Mapping[str, Any], width: int = 120) -> Table:
    """The unified result as a table: rank, score, id, type, cluster, text (+ entities when wide)."""
    from rich.table import Table

    mode = result.get("mode", "recall")
    title = f"{result.get('total_results', 0)} result(s) for {result.get('query')!r} ({mode})"
    if not result.get("query"):
        title = f"{result.get('total_results', 0)} most recently used memories"
    wide = width >= 140  # entities only fit beside the text on a wide terminal
    # A full id (36 characters) leaves the text too little room on a narrow terminal, and a
    # folded one cannot be copied: show its start, which `smriti forget` accepts, as git does.
    narrow = width < 110
    caption = f"ids cut to {SHORT_ID}: any unique start works; --json shows them whole" if narrow else None
    table = Table(title=escape(title), caption=caption)
    table.add_column("#", justify="right", style="dim", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("id", style="cyan", no_wrap=True)
    table.add_column("type", no_wrap=not narrow, overflow="fold")
    table.add_column("cluster", justify="right", no_wrap=True)
    table.add_column("memory", ratio=3, min_width=20)
    if wide:
        table.add_column("entities", ratio=1, style="green")
    for rank, item in enumerate(result.get("results", []), start=1):
        row = [
            str(rank),
            f"{item['score']:.3f}",
            item["id"][:SHORT_ID] if narrow else item["id"],
            item["memory_type"],
            str(item["cluster_id"]),
            escape(_short(item["text"])),
        ]
        if wide:
            row.append(escape(", ".join(item.get("entities", [])[:8])))
        table.add_row(*row)
    return table


def components_table(result: Mapping[str, Any]) -> Table | None:
    """Each result's score components (present with ``explain``): one row per component."""
    from rich.table import Table

    rows = [item for item in result.get("results", []) if item.get("components")]
    if not rows:
        return None
    names = list(dict.fromkeys(name for item in rows for name in item["components"]))
    table = Table(title="score components (columns: result rank)")
    table.add_column("component", style="bold", no_wrap=True)
    for rank in range(1, len(rows) + 1):
        table.add_column(f"#{rank}", justify="right", no_wrap=True)
    for name in names:
        table.add_row(escape(name), *(f"{item['components'].get(name, 0.0):.3f}" for item in rows))
    return table


def trace_renderables(trace: Iterable[Mapping[str, Any]]) -> list[Any]:
    """Per pipeline node: a heading (timing, notes) and a table of its candidates, if any."""
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    for step in trace:
        heading = Text.assemble(
            ("▸ ", "dim"), (str(step["node"]), "bold magenta"), (f"  {step['ms']:.1f} ms", "dim")
        )
        if step.get("notes"):
            heading.append(f"  {step['notes']}")
        parts.append(heading)
        if step.get("candidates"):
            table = Table(show_edge=False, pad_edge=False, box=None, padding=(0, 2))
            table.add_column("candidate", style="cyan", no_wrap=True)
            table.add_column("score", justify="right", no_wrap=True)
            for candidate in step["candidates"]:
                table.add_row(str(candidate["id"]), f"{float(candidate['score']):.3f}")
            parts.append(table)
    return parts


def mapping_table(title: str, data: Mapping[str, Any]) -> Table:
    """Key/value table; nested mappings are flattened as ``parent.child``."""
    from rich.table import Table

    table = Table(title=escape(title), show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key, value in _flatten(data):
        table.add_row(escape(key), escape(str(value)))
    return table


def _flatten(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            rows.extend(_flatten(value, f"{name}."))
        elif isinstance(value, list | tuple):
            rows.append((name, ", ".join(str(v) for v in value) if value else "-"))
        else:
            rows.append((name, value))
    return rows


def context_lines(result: Mapping[str, Any], max_chars: int, budget: int | None = None) -> list[str]:
    """The session-start context block: one bullet per memory with its id and score, most
    relevant first, stopping before the block would pass ``budget`` characters."""
    lines: list[str] = []
    used = 0
    for item in result.get("results", []):
        line = f"- {_short(item['text'], max_chars)} (id: {item['id']}, score: {item['score']:.2f})"
        if budget is not None and used + len(line) + 1 > budget:
            break
        lines.append(line)
        used += len(line) + 1
    return lines


def server_summary(status: Mapping[str, Any]) -> dict[str, Any]:
    """What ``smriti status`` shows of the shared server's ``/status`` (``--all``: everything):
    that it runs, for whom, its sessions, the memory's counts and the settings it runs with
    that differ from their defaults, not the name of every setting."""
    memory = status.get("memory")
    changed = status.get("changed_settings") or {}
    summary: dict[str, Any] = {
        "server": f"running, pid {status.get('pid')}, version {status.get('version')}",
        "user": status.get("user"),
        "database": status.get("db_type"),
        "uptime": f"{status.get('uptime_s')} s",
        "sessions": status.get("sessions"),
        "requests": f"{status.get('requests')} ({status.get('requests_in_flight')} in flight)",
        "idle": f"{status.get('idle_s')} s (exits after {status.get('idle_timeout_s')} s)",
    }
    if isinstance(memory, Mapping):
        if "error" in memory:
            summary["memory"] = f"not counted: {memory['error']}"
        else:
            keys = ("memories", "cues", "associations", "clusters")
            summary["memory"] = ", ".join(f"{memory.get(key)} {key}" for key in keys)
    elif "memory" in status:
        summary["memory"] = "not open yet"
    summary["log"] = status.get("log")
    # Each changed setting a row of its own, by its variable's name (values as the server has them).
    summary["changed settings"] = (
        f"{len(changed)} below" if changed else "none (every setting at its default)"
    )
    summary.update({f"  {name}": value for name, value in changed.items()})
    return summary
