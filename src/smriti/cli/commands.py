"""The ``smriti`` command line (typer + rich).

Every command opens the accessing user's memory through :class:`~smriti.memory.Memory`
(the same facade the MCP server uses), does one thing and closes it. Known errors
(configuration, bad input, unknown id, store failures) print one red line on stderr and
exit with 2 (configuration or input the user must change) or 1 (the operation failed);
nothing prints a traceback. Results go to stdout (``--json`` for scripts); notices,
progress and errors go to stderr, so ``smriti export > file`` and ``smriti context``
in a hook stay clean.

An embedded store (SQLite or Kuzu) is opened by one process: while the user's shared server
runs (started by the stdio ``smriti-mcp``), the commands ask it instead of opening the database
(:mod:`smriti.cli.shared`), and ``import``, ``view`` and ``restore`` borrow the database from it
for their run; ``smriti status`` and ``smriti stop`` show and stop it.

Each command imports what it needs when it runs: through the shared server a command loads no
settings, models, database or MCP SDK (a recall beside a running client took 4.5-5.9 s when it
did; issue 44). ``config`` and ``token`` are loaded when named (:class:`_Commands`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, cast

import typer
from typer.core import TyperGroup

from smriti.errors import InvalidInput, SmritiError
from smriti.validators import MemoryType
from smriti.validators import RecallMode as Mode

if TYPE_CHECKING:
    from typer import _click as click

    from smriti.cli.shared import SharedRuntime
    from smriti.config import Settings
    from smriti.runtime import Runtime
    from smriti.server.shared.client import Attachment


class _Commands(TyperGroup):
    """The root group: ``config``, ``token`` and ``service`` are imported when named (or listed by
    ``--help``), so every other command runs without the settings reference they load."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "config": ("smriti.cli.config", "config_app"),
        "token": ("smriti.cli.tokens", "token_app"),
        "service": ("smriti.cli.service", "service_app"),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*super().list_commands(ctx), *self.LAZY]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.LAZY:
            return super().get_command(ctx, cmd_name)
        import importlib

        module, name = self.LAZY[cmd_name]
        command = typer.main.get_command(getattr(importlib.import_module(module), name))
        command.name = cmd_name
        return command


app = typer.Typer(
    cls=_Commands,
    name="smriti",
    help="Smriti: graph-shaped long-term memory for LLM agents "
    "(configuration from environment variables: `smriti config` shows it).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
graph_app = typer.Typer(help="Print a pipeline graph as a Mermaid diagram.", no_args_is_help=True)
app.add_typer(graph_app, name="graph")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
ServerOption = Annotated[
    str | None,
    typer.Option(help="Ask a running streamable-HTTP smriti-mcp (e.g. http://127.0.0.1:8000/mcp) instead."),
]


class ImportSource(StrEnum):
    smriti = "smriti"
    server_memory = "server-memory"
    text = "text"


class TextSplit(StrEnum):  # smriti.cli.importers.text.SPLITS (checked by tests/test_importers.py)
    auto = "auto"
    paragraphs = "paragraphs"
    lines = "lines"


@dataclass
class Options:
    user: str | None = None
    verbose: bool = False


@app.callback()
def _root(
    ctx: typer.Context,
    user: Annotated[str | None, typer.Option("--user", "-u", help="User whose memory to open.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log at LOG_LEVEL on stderr.")] = False,
) -> None:
    ctx.obj = Options(user=user, verbose=verbose)


# ----------------------------------------------------------------------------- plumbing
def _fail(message: str, code: int) -> typer.Exit:
    from smriti.cli.render import error_line

    error_line(message)
    return typer.Exit(code)


@contextmanager
def _handled() -> Iterator[None]:
    """Smriti's errors become one red line and their exit code; anything else is a bug and propagates."""
    try:
        yield
    except SmritiError as error:
        raise _fail(str(error), error.exit_code) from None


def _settings(ctx: typer.Context) -> Settings:
    from smriti.config import load_settings

    settings = load_settings()
    options: Options = ctx.obj or Options()
    # The CLI is interactive: library INFO chatter would bury the answer, so WARNING unless -v.
    level = settings.log_level if options.verbose else "WARNING"
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    return settings


def _shared(ctx: typer.Context) -> SharedRuntime | None:
    """The user's shared server when one serves this memory (found without the settings)."""
    from smriti.cli.shared import shared_runtime

    return shared_runtime((ctx.obj or Options()).user)


@contextmanager
def _runtime(ctx: typer.Context, with_backup: bool = False) -> Iterator[Runtime | SharedRuntime]:
    """The user's memory: through the shared server while one runs, else opened here."""
    if (shared := _shared(ctx)) is not None:
        yield shared
        return
    with _local(ctx, with_backup) as runtime:
        yield runtime


@contextmanager
def _local(
    ctx: typer.Context, with_backup: bool = False, settings: Settings | None = None
) -> Iterator[Runtime]:
    """The user's memory opened in this process (see :func:`_borrowed` beside a shared server)."""
    from smriti.runtime import close_runtime, open_runtime

    settings = settings or _settings(ctx)
    runtime = open_runtime(settings, user=(ctx.obj or Options()).user, with_backup=with_backup)
    try:
        yield runtime
    finally:
        close_runtime(runtime, final_sync=False)


@contextmanager
def _borrowed(ctx: typer.Context, command: str) -> Iterator[None]:
    """The database handed over by the user's shared server (if one runs) for ``command``."""
    from smriti.cli.shared import borrowed

    with borrowed((ctx.obj or Options()).user, command):
        yield


def _read_text(value: str) -> str:
    """``-`` means standard input (pipes, hooks)."""
    return sys.stdin.read() if value == "-" else value


# ----------------------------------------------------------------------------- commands
@app.command()
def serve(
    transport: Annotated[Literal["stdio", "streamable-http"], typer.Option(help="MCP transport.")] = "stdio",
    host: Annotated[str, typer.Option(help="Bind address (streamable-http).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (streamable-http).")] = 8000,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="streamable-http without tokens (loopback binds only).")
    ] = False,
    workers: Annotated[
        int | None, typer.Option(help="streamable-http: server processes (default HTTP_WORKERS, 1).")
    ] = None,
) -> None:
    """Run the MCP server (the same as [bold]smriti-mcp[/bold])."""
    from smriti.config import load_settings
    from smriti.server.launch import serve as run_server
    from smriti.server.launch import worker_count

    with _handled():
        settings = load_settings()
        count = worker_count(settings, transport, workers)
    run_server(settings, transport, host, port, no_auth=no_auth, workers=count)


@app.command()
def store(
    ctx: typer.Context,
    content: Annotated[str, typer.Argument(help="The memory text, or - to read standard input.")],
    importance: Annotated[float, typer.Option(help="0.0-1.0; 0.8+ is never pruned.")] = 0.5,
    tags: Annotated[str, typer.Option(help="Comma-separated tags.")] = "",
    source: Annotated[str, typer.Option(help="Origin label.")] = "",
    occurred_at: Annotated[
        str, typer.Option("--occurred-at", help="When it happened: ISO 8601 date or date-time.")
    ] = "",
    supersedes: Annotated[
        str, typer.Option(help="Id of an older memory this one corrects (kept, marked superseded).")
    ] = "",
    as_json: JsonFlag = False,
) -> None:
    """Remember something."""
    from smriti.validators import check_store

    with _handled():
        text = _read_text(content)
        fields: dict[str, Any] = {"importance": importance, "tags": tags, "source": source}
        if (shared := _shared(ctx)) is not None:  # the server checks it, as any client's
            if supersedes:
                fields["supersedes"] = shared.memory.resolve_id(supersedes)
            stored = shared.memory.store(text, occurred_at=occurred_at, **fields)
        else:
            settings = _settings(ctx)
            # Checked where it enters, before the memory is opened; not again in the pipeline.
            request = check_store(
                text, max_chars=settings.max_content_chars, occurred_at=occurred_at, **fields
            )
            with _local(ctx, settings=settings) as runtime:
                if supersedes:
                    request["supersedes"] = runtime.memory.resolve_id(supersedes)
                stored = runtime.memory.store_checked(request)
    from smriti.cli.render import out, print_json

    stored = {k: v for k, v in stored.items() if k != "trace"}
    if as_json:
        return print_json(stored)
    verb = "merged into existing memory" if stored["deduplicated"] else "stored"
    cues = ", ".join(c["name"] for c in stored["cues"]) or "-"
    out().print(
        f"{verb} [cyan]{stored['id']}[/cyan] ({stored['memory_type']}, cluster {stored['cluster_id']})"
    )
    out().print(f"cues: {cues}", markup=False)
    for old in stored.get("superseded", []):
        out().print(f"supersedes [cyan]{old}[/cyan]")
    if stored.get("analysis_queued"):
        out().print("LLM analysis queued: the server analyses it in the background, or run `smriti enrich`")


def _recall(
    ctx: typer.Context,
    query: str,
    limit: int,
    mode: str,
    memory_type: str | None,
    explain: bool,
    include_superseded: bool = False,
):
    from smriti.validators import check_recall

    fields: dict[str, Any] = {
        "limit": limit,
        "mode": mode,
        "memory_type": memory_type,
        "explain": explain,
        "include_superseded": include_superseded,
    }
    if (shared := _shared(ctx)) is not None:  # the server checks it, as any client's
        return shared.memory.recall(query=query, **fields)
    settings = _settings(ctx)
    # Checked where it enters, before the memory is opened; not again in the pipeline.
    request = check_recall(query, max_results=settings.memory_fabric_max_results, **fields)
    with _local(ctx, settings=settings) as runtime:
        return runtime.memory.recall_checked(request)


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Question or keywords (empty lists recent memories).")] = "",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Maximum results.")] = 5,
    mode: Annotated[Mode, typer.Option(help="recall (deep), search (vector only) or list.")] = "recall",
    memory_type: Annotated[MemoryType | None, typer.Option("--type", help="Filter by memory type.")] = None,
    explain: Annotated[bool, typer.Option(help="Show the trace per pipeline node.")] = False,
    include_superseded: Annotated[
        bool, typer.Option(help="Also show memories corrected by a newer one (ranked below it).")
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Recall memories (the unified result format)."""
    with _handled():
        result = _recall(ctx, query, limit, mode, memory_type, explain, include_superseded)
    from smriti.cli.render import components_table, out, print_json, results_table, trace_renderables

    if as_json:
        return print_json(result)
    console = out()
    console.print(results_table(result, console.width))
    if explain:
        if (table := components_table(result)) is not None:
            console.print(table)
        console.print("[bold]trace[/bold]")
        for part in trace_renderables(result.get("trace", [])):
            console.print(part)


@app.command("list")
def list_(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Maximum results.")] = 10,
    memory_type: Annotated[MemoryType | None, typer.Option("--type", help="Filter by memory type.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """List the most recently used memories."""
    with _handled():
        result = _recall(ctx, "", limit, "list", memory_type, False)
    from smriti.cli.render import out, print_json, results_table

    if as_json:
        return print_json(result)
    console = out()
    console.print(results_table(result, console.width))


@app.command()
def forget(
    ctx: typer.Context,
    memory_id: Annotated[str, typer.Argument(help="Id of the memory, or a unique start of it (4+ chars).")],
) -> None:
    """Delete one memory."""
    with _handled(), _runtime(ctx) as runtime:
        memory = runtime.memory
        done = memory.forget(memory.resolve_id(memory_id))
    from smriti.cli.render import out

    out().print(f"forgot [cyan]{done['forgotten']}[/cyan]")


@app.command()
def consolidate(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Repair half-written memories, decay, prune, strengthen, drop orphan cues, recluster, index."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from smriti.cli.render import err, mapping_table, out, print_json, trace_renderables

    with _handled(), _runtime(ctx) as runtime:
        if (shared := _shared_runtime(runtime)) is not None:  # its steps are the server's
            report = shared.consolidate()
        else:
            from smriti.pipelines.consolidate import STEPS

            columns = (TextColumn("consolidating: {task.description}"), BarColumn(), MofNCompleteColumn())
            with Progress(*columns, console=err(), transient=True) as bar:
                task = bar.add_task(STEPS[0], total=len(STEPS))

                def advance(step: str) -> None:
                    done = STEPS.index(step) + 1 if step in STEPS else 0
                    bar.update(task, completed=done, description=STEPS[done] if done < len(STEPS) else "done")

                report = runtime.consolidate(on_step=advance)
    trace = report.pop("trace", [])
    if as_json:
        return print_json({**report, "trace": trace})
    console = out()
    console.print(mapping_table("consolidation report", report))
    for part in trace_renderables(trace):
        console.print(part)


@app.command()
def stats(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Counts, clusters, index state, models in use and backup status."""
    from smriti.cli.render import mapping_table, out, print_json

    with _handled(), _runtime(ctx, with_backup=True) as runtime:
        if (shared := _shared_runtime(runtime)) is not None:
            status = shared.describe()
        else:
            from smriti.runtime import describe_status

            status = describe_status(cast("Runtime", runtime))
    if as_json:
        return print_json(status)
    out().print(mapping_table(f"memory of {status.get('user')}", status))


@app.command()
def enrich(
    ctx: typer.Context,
    wait: Annotated[
        bool, typer.Option(help="Keep going until nothing is pending (waiting out retry backoffs).")
    ] = False,
    timeout: Annotated[float | None, typer.Option(help="Give up after this many seconds.")] = None,
    retry_failed: Annotated[bool, typer.Option(help="Put parked (failed) memories back first.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the queued LLM analyses now (a running server does this in the background)."""
    from smriti.cli.render import out, print_json

    with _handled(), _runtime(ctx) as runtime:
        if (shared := _shared_runtime(runtime)) is not None:  # it drains the queue in the background
            raise shared.refuse("enrich")
        report = cast("Runtime", runtime).memory.enrich(wait=wait, timeout=timeout, retry_failed=retry_failed)
    if as_json:
        return print_json(report)
    ran = ", ".join(f"{n} {status}" for status, n in sorted(report["ran"].items())) or "nothing due"
    queue = report["queue"]
    console = out()
    console.print(f"analysed: {ran}; {queue['pending']} pending, {queue['failed']} failed (parked)")
    for parked in queue["failed_memories"]:
        line = f"  parked {parked['id']} after {parked['attempts']} attempts: {parked['error']}"
        console.print(line, markup=False)


@app.command("export")
def export_(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(help="Output file (JSON Lines), or - for stdout.")] = "-",
) -> None:
    """Export every memory, cue and edge as JSON Lines."""
    from smriti.cli.render import notice
    from smriti.cli.transfer import export_to

    with _handled(), _runtime(ctx) as runtime:
        count = export_to(cast(Any, runtime.memory), path)  # either reads export_records() only
    notice(f"exported {count} records" + ("" if path == "-" else f" to {path}"))


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            help="An export (JSON Lines), a server-memory file, or text/Markdown (file or folder).",
            exists=True,
        ),
    ],
    reembed_all: Annotated[
        bool, typer.Option("--reembed", help="Embed every memory again with the configured embedder.")
    ] = False,
    source: Annotated[
        ImportSource,
        typer.Option(
            "--from",
            help="smriti: an export; server-memory: the MCP reference server's file; "
            "text: paragraphs or lines.",
        ),
    ] = ImportSource.smriti,
    split: Annotated[
        TextSplit,
        typer.Option(
            help="--from text: a memory per paragraph or per line; "
            "auto: by lines in a file without blank lines."
        ),
    ] = TextSplit.auto,
) -> None:
    """Import an export, another memory server's file or text (idempotent: twice adds nothing).

    Beside a running client the shared server hands the database over for the import (its
    clients' requests wait until it is done)."""
    from smriti.cli.render import out
    from smriti.cli.transfer import import_from, import_plain

    with _handled():
        if source is ImportSource.smriti and path.is_dir():
            raise InvalidInput(f"{path} is a folder: an export is one file (--from text reads folders)")
        with _borrowed(ctx, "import"), _local(ctx) as runtime:
            if source is ImportSource.smriti:
                count = import_from(runtime.memory, path, reembed_all)
                out().print(f"imported {count} records from {path}")
                return
            counts = import_plain(runtime.memory, path, source.value, split.value)
    out().print(
        f"imported {counts['stored']} memories from {path}"
        f" ({counts['deduplicated']} already known, {counts['relations']} relations)"
    )


@app.command()
def context(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="The prompt; - reads stdin (text or hook JSON).")] = "",
    limit: Annotated[int, typer.Option("--limit", "-n", help="Maximum memories.")] = 5,
    max_chars: Annotated[int, typer.Option(help="Truncate each memory to this many characters.")] = 400,
    budget: Annotated[
        int | None, typer.Option(help="Characters for the whole block (default CONTEXT_BUDGET_CHARS).")
    ] = None,
    server: ServerOption = None,
) -> None:
    """Print the most relevant memories as bullet lines (for a session-start or prompt hook)."""
    from smriti.cli.render import context_lines
    from smriti.validators import MAX_QUERY_CHARS

    with _handled():
        # A hook passes whole prompts: recall on their start rather than refuse a long one.
        query = _hook_prompt(prompt)[:MAX_QUERY_CHARS]
        if server:
            from smriti.cli.remote import call_tool

            result = call_tool(server, "smriti_recall", {"query": query, "limit": limit})
        else:
            result = _recall(ctx, query, limit, "recall", None, False)
        if budget is None:
            budget = _context_budget(ctx)
    for line in context_lines(result, max_chars, budget):
        print(line)


def _context_budget(ctx: typer.Context) -> int:
    """CONTEXT_BUDGET_CHARS: the shared server's, unless this process's environment sets it
    (then read through the settings, which check it)."""
    import os

    if not any(name.lower() == "context_budget_chars" for name in os.environ):
        shared = _shared(ctx)
        if shared is not None and isinstance(shared.status.get("context_budget_chars"), int):
            return int(shared.status["context_budget_chars"])
    return _settings(ctx).context_budget_chars


def _hook_prompt(value: str) -> str:
    """Hooks pass JSON on stdin (Claude Code: ``{"prompt": ...}``); plain text works too."""
    text = _read_text(value)
    if value == "-" and text.lstrip().startswith("{"):
        try:
            payload = json.loads(text)
        except json.JSONDecodeError:
            return text
        if isinstance(payload, dict):
            return str(payload.get("prompt") or payload.get("query") or "")
    return text


@app.command()
def view(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.")] = Path(
        "memory-graph.html"
    ),
    limit: Annotated[
        int, typer.Option(help="Draw the N most recently used memories.", min=1, max=5000)
    ] = 1000,
    serve: Annotated[
        bool,
        typer.Option("--serve", help="Also show it on loopback until Ctrl-C (that page only, nothing else)."),
    ] = False,
    port: Annotated[int, typer.Option(help="Port for --serve (0: any free one).", min=0, max=65535)] = 0,
    bind: Annotated[
        str, typer.Option(help="Loopback address for --serve: 127.0.0.1 or ::1 (nothing else is accepted).")
    ] = "127.0.0.1",
) -> None:
    """Write the memory graph as one self-contained HTML file (no network needed to open it)."""
    from smriti.cli.page_server import check_loopback
    from smriti.cli.render import notice
    from smriti.view import collect, render

    if serve:
        with _handled():
            check_loopback(bind)  # refused before the memory is opened
    with _handled(), _borrowed(ctx, "view"), _local(ctx) as runtime:
        page = render(collect(runtime.memory, limit), runtime.memory.context.store.user)
    body = page.encode("utf-8")
    output.write_bytes(body)
    notice(f"wrote {output} ({len(body) // 1024} KiB)")
    if serve:
        _serve_page(output.name, body, bind, port)


def _serve_page(name: str, body: bytes, bind: str, port: int) -> None:
    """Serve the page just written (from memory, never the folder) on loopback until Ctrl-C."""
    from smriti.cli.page_server import Page, page_server, page_url
    from smriti.cli.render import notice

    page = Page(name, body)
    with _handled(), page_server(page, bind, port) as httpd:
        url = page_url(httpd, page)
        notice(f"serving {url} (Ctrl-C to stop)")
        print(url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            httpd.serve_forever()


@app.command()
def capture(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            help="- reads stdin: a SessionEnd/Stop hook's JSON, a transcript or text; else a file."
        ),
    ] = "-",
) -> None:
    """Keep what a session stated (decisions, preferences, facts) as memories (a session-end hook)."""
    from smriti.cli.capture import capture as capture_session
    from smriti.cli.capture import read_session
    from smriti.cli.render import notice

    with _handled():
        if source == "-":
            raw = sys.stdin.read()
        else:
            try:
                raw = Path(source).expanduser().read_text(encoding="utf-8")
            except OSError as error:
                raise InvalidInput(f"cannot read {source}: {error.strerror}") from None
        session = read_session(raw)
        with _runtime(ctx) as runtime:
            done = capture_session(cast(Any, runtime.memory), session)  # either: store() only
    notice(
        f"captured {done['stored']} new memories from session {done['session']} "
        f"({done['known']} already known, {done['statements']} statements)"
    )


@app.command()
def sync(ctx: typer.Context, server: ServerOption = None) -> None:
    """Push the memory to the configured backup now (for a session-end hook)."""
    from smriti.cli.render import mapping_table, notice, out
    from smriti.runtime import NOTHING_TO_SYNC

    with _handled():
        if server:
            from smriti.cli.remote import call_tool

            done = call_tool(server, "smriti_manage", {"action": "sync"})
            return out().print(mapping_table("backup sync", done.get("details") or {"status": "done"}))
        if (shared := _shared(ctx)) is not None:
            result = shared.sync()
            if result.get("status") == "disabled":  # the server's BACKUP_TYPE is none
                return notice(NOTHING_TO_SYNC)
        else:
            settings = _settings(ctx)
            if settings.backup_type == "none":
                return notice(NOTHING_TO_SYNC)
            with _local(ctx, with_backup=True, settings=settings) as runtime:
                result = runtime.sync()
    out().print(mapping_table("backup sync", result or {"status": "done"}))


@app.command()
def restore(
    ctx: typer.Context,
    force: Annotated[bool, typer.Option(help="Overwrite local memories that differ.")] = False,
) -> None:
    """Restore the memory from the configured backup (beside a running client the shared
    server hands the database over for it)."""
    from smriti.cli.render import mapping_table, out
    from smriti.cli.transfer import restore_backup

    with _handled():
        settings = _settings(ctx)
        with _borrowed(ctx, "restore"):
            result = restore_backup(settings, (ctx.obj or Options()).user, force)
    out().print(mapping_table("restore", result or {"status": "done"}))


@app.command()
def status(
    ctx: typer.Context,
    as_json: JsonFlag = False,
    show_all: Annotated[
        bool, typer.Option("--all", help="Everything the server reports, every setting's name included.")
    ] = False,
) -> None:
    """Show the user's shared server (pid, sessions, memory counts, changed settings); exit 1
    when none runs."""
    from smriti.cli.render import mapping_table, notice, out, print_json, server_summary
    from smriti.server.shared.client import server_status, shared_paths

    with _handled():
        paths = shared_paths(_place(ctx))
        running = server_status(paths, timeout=10.0, memory=True)
    if as_json:
        print_json(running or {"running": False, "socket": str(paths.socket)})
    elif running is None:
        notice(f"no shared Smriti server runs for this user ({paths.socket})")
    else:
        shown = running if show_all else server_summary(running)
        out().print(mapping_table("shared Smriti server", shown))
    if running is None:
        raise typer.Exit(1)


@app.command()
def stop(ctx: typer.Context) -> None:
    """Stop the user's shared server (stdio clients start it again on their next request)."""
    from smriti.cli.render import notice
    from smriti.server.shared.client import shared_paths, stop_server

    with _handled():
        stopped = stop_server(shared_paths(_place(ctx)))
    notice("no shared Smriti server was running" if stopped is None else f"stopped pid {stopped.get('pid')}")
    if stopped is not None and stopped.get("service"):
        from smriti.cli.service import restart_command

        notice(f"it was the service's, which stays stopped until: {restart_command()}")


def _place(ctx: typer.Context) -> Attachment:
    """Whose shared server, and where: read as the relay reads it (no settings), or from the
    settings when the shared server is off (``status`` then says none runs)."""
    import dataclasses

    from smriti.server.shared.client import Attachment

    place = Attachment.from_environment() or Attachment.of(_settings(ctx))
    user = (ctx.obj or Options()).user
    return place if user is None else dataclasses.replace(place, accessing_user=user)


def _shared_runtime(runtime: object) -> SharedRuntime | None:
    from smriti.cli.shared import SharedRuntime

    return runtime if isinstance(runtime, SharedRuntime) else None


def _print_graph(name: str) -> None:
    import importlib

    module = importlib.import_module(f"smriti.pipelines.{name}")
    print(getattr(module, f"{name}_graph").get_graph().draw_mermaid())


@graph_app.command("recall")
def graph_recall() -> None:
    """The recall pipeline."""
    _print_graph("recall")


@graph_app.command("store")
def graph_store() -> None:
    """The store pipeline."""
    _print_graph("store")


@graph_app.command("consolidate")
def graph_consolidate() -> None:
    """The consolidation pipeline."""
    _print_graph("consolidate")


def main() -> None:
    """Entry point of the ``smriti`` console script: the app, with its simple parameters
    converted without pydantic (:mod:`smriti.cli.params`)."""
    from smriti.cli.params import plain_parameters

    command = typer.main.get_command(app)
    plain_parameters(command)
    command(prog_name="smriti")


if __name__ == "__main__":
    main()
