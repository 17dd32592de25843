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
(:mod:`smriti.cli.shared`); ``smriti status`` and ``smriti stop`` show and stop it.
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
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import typer

from smriti.cli.config import config as config_command
from smriti.cli.remote import call_tool
from smriti.cli.render import (
    components_table,
    context_lines,
    error_line,
    mapping_table,
    notice,
    out,
    print_json,
    results_table,
    trace_renderables,
)
from smriti.cli.shared import SharedRuntime, shared_runtime
from smriti.cli.tokens import token_app
from smriti.cli.transfer import export_to, import_from, import_plain
from smriti.config import load_settings
from smriti.errors import InvalidInput, SmritiError
from smriti.stores.base import MemoryType
from smriti.validators import RecallMode as Mode

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.runtime import Runtime

app = typer.Typer(
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
app.add_typer(token_app, name="token")
app.command("config")(config_command)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
ServerOption = Annotated[
    str | None,
    typer.Option(help="Ask a running streamable-HTTP smriti-mcp (e.g. http://127.0.0.1:8000/mcp) instead."),
]


class ImportSource(StrEnum):
    smriti = "smriti"
    server_memory = "server-memory"
    text = "text"


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
    settings = load_settings()
    options: Options = ctx.obj or Options()
    # The CLI is interactive: library INFO chatter would bury the answer, so WARNING unless -v.
    level = settings.log_level if options.verbose else "WARNING"
    logging.basicConfig(level=level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    return settings


@contextmanager
def _runtime(
    ctx: typer.Context, with_backup: bool = False, settings: Settings | None = None
) -> Iterator[Runtime | SharedRuntime]:
    """The user's memory: through the shared server while one runs, else opened here."""
    from smriti.runtime import close_runtime, open_runtime

    settings = settings or _settings(ctx)
    options: Options = ctx.obj or Options()
    if (shared := shared_runtime(settings, options.user)) is not None:
        yield shared
        return
    runtime = open_runtime(settings, user=options.user, with_backup=with_backup)
    try:
        yield runtime
    finally:
        close_runtime(runtime, final_sync=False)


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
        settings = _settings(ctx)
        # Checked where it enters, before the memory is opened; not again in the pipeline.
        request = check_store(
            _read_text(content),
            max_chars=settings.max_content_chars,
            importance=importance,
            tags=tags,
            source=source,
            occurred_at=occurred_at,
        )
        with _runtime(ctx, settings=settings) as runtime:
            if supersedes:
                request["supersedes"] = runtime.memory.resolve_id(supersedes)
            stored = runtime.memory.store_checked(request)
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

    settings = _settings(ctx)
    # Checked where it enters, before the memory is opened; not again in the pipeline.
    request = check_recall(
        query,
        max_results=settings.memory_fabric_max_results,
        limit=limit,
        mode=mode,
        memory_type=memory_type,
        explain=explain,
        include_superseded=include_superseded,
    )
    with _runtime(ctx, settings=settings) as runtime:
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
    out().print(f"forgot [cyan]{done['forgotten']}[/cyan]")


@app.command()
def consolidate(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Repair half-written memories, decay, prune, strengthen, drop orphan cues, recluster, index."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from smriti.cli.render import err
    from smriti.pipelines.consolidate import STEPS

    columns = (TextColumn("consolidating: {task.description}"), BarColumn(), MofNCompleteColumn())
    with _handled(), _runtime(ctx) as runtime, Progress(*columns, console=err(), transient=True) as bar:
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
    from smriti.runtime import describe_status

    with _handled(), _runtime(ctx, with_backup=True) as runtime:
        status = runtime.describe() if isinstance(runtime, SharedRuntime) else describe_status(runtime)
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
    with _handled(), _runtime(ctx) as runtime:
        if isinstance(runtime, SharedRuntime):  # it drains the queue itself, in the background
            raise runtime.refuse("enrich")
        report = runtime.memory.enrich(wait=wait, timeout=timeout, retry_failed=retry_failed)
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
            help="smriti: an export; server-memory: the MCP reference server's file; text: paragraphs.",
        ),
    ] = ImportSource.smriti,
) -> None:
    """Import an export, another memory server's file or text (idempotent: twice adds nothing)."""
    with _handled(), _runtime(ctx) as runtime:
        if isinstance(runtime, SharedRuntime):
            raise runtime.refuse("import")
        if source is ImportSource.smriti:
            if path.is_dir():
                raise InvalidInput(f"{path} is a folder: an export is one file (--from text reads folders)")
            count = import_from(runtime.memory, path, reembed_all)
            out().print(f"imported {count} records from {path}")
            return
        counts = import_plain(runtime.memory, path, source.value)
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
    from smriti.validators import MAX_QUERY_CHARS

    with _handled():
        # A hook passes whole prompts: recall on their start rather than refuse a long one.
        query = _hook_prompt(prompt)[:MAX_QUERY_CHARS]
        if server:
            result = call_tool(server, "smriti_recall", {"query": query, "limit": limit})
        else:
            result = _recall(ctx, query, limit, "recall", None, False)
    if budget is None:
        budget = _settings(ctx).context_budget_chars
    for line in context_lines(result, max_chars, budget):
        print(line)


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
    from smriti.view import collect, render

    with _handled():
        if serve:
            check_loopback(bind)  # refused before the memory is opened
        with _runtime(ctx) as runtime:
            if isinstance(runtime, SharedRuntime):
                raise runtime.refuse("view")
            page = render(collect(runtime.memory, limit), runtime.memory.context.store.user)
    body = page.encode("utf-8")
    output.write_bytes(body)
    notice(f"wrote {output} ({len(body) // 1024} KiB)")
    if serve:
        _serve_page(output.name, body, bind, port)


def _serve_page(name: str, body: bytes, bind: str, port: int) -> None:
    """Serve the page just written (from memory, never the folder) on loopback until Ctrl-C."""
    from smriti.cli.page_server import Page, page_server, page_url

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
    with _handled():
        if server:
            done = call_tool(server, "smriti_manage", {"action": "sync"})
            return out().print(mapping_table("backup sync", done.get("details") or {"status": "done"}))
        settings = _settings(ctx)
        if settings.backup_type == "none":
            from smriti.runtime import NOTHING_TO_SYNC

            notice(NOTHING_TO_SYNC)
            return
        with _runtime(ctx, with_backup=True, settings=settings) as runtime:
            result = runtime.sync()
    out().print(mapping_table("backup sync", result or {"status": "done"}))


@app.command()
def restore(
    ctx: typer.Context,
    force: Annotated[bool, typer.Option(help="Overwrite local memories that differ.")] = False,
) -> None:
    """Restore the memory from the configured backup."""
    from smriti.cli.transfer import restore_backup

    with _handled():
        settings = _settings(ctx)
        if (shared := shared_runtime(settings, (ctx.obj or Options()).user)) is not None:
            raise shared.refuse("restore")
        result = restore_backup(settings, (ctx.obj or Options()).user, force)
    out().print(mapping_table("restore", result or {"status": "done"}))


@app.command()
def status(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show the user's shared server (pid, socket, uptime, sessions); exit 1 when none runs."""
    from smriti.server.shared.client import server_status, shared_paths

    with _handled():
        paths = shared_paths(_user_settings(ctx))
        running = server_status(paths)
    if as_json:
        print_json(running or {"running": False, "socket": str(paths.socket)})
    elif running is None:
        notice(f"no shared Smriti server runs for this user ({paths.socket})")
    else:
        out().print(mapping_table("shared Smriti server", running))
    if running is None:
        raise typer.Exit(1)


@app.command()
def stop(ctx: typer.Context) -> None:
    """Stop the user's shared server (stdio clients start it again on their next request)."""
    from smriti.server.shared.client import shared_paths, stop_server

    with _handled():
        stopped = stop_server(shared_paths(_user_settings(ctx)))
    notice("no shared Smriti server was running" if stopped is None else f"stopped pid {stopped.get('pid')}")


def _user_settings(ctx: typer.Context) -> Settings:
    settings = _settings(ctx)
    user = (ctx.obj or Options()).user
    return settings if user is None else settings.model_copy(update={"accessing_user": user})


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
    """Entry point of the ``smriti`` console script."""
    app(prog_name="smriti")


if __name__ == "__main__":
    main()
