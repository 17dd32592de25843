"""The Smriti MCP app: three tools over a user's :class:`~smriti.memory.Memory`.

``build_server(settings)`` returns an :class:`MCPServer` whose lifespan opens ACCESSING_USER's
Memory (and the backup manager when ``BACKUP_TYPE`` is set), runs consolidation and backup sync
in the background, and on shutdown stops them, runs a final sync and closes the database. With
``auth`` (streamable HTTP, see :mod:`smriti.server.auth`) each request is served in the memory
of the user its token names, opened at that user's first request (:mod:`smriti.server.users`).
How it is started (arguments, transports, the shared server) is :mod:`smriti.server.launch`.

Decisions worth knowing:

* Tools are module-level functions on a typed lifespan context (``Context[Runtime, Any]``),
  as in the SDK's examples; ``build_server`` only wires the lifespan and registers them.
* Every tool checks its arguments once, at the tool boundary, before touching the store
  (``validators.check_store``/``check_recall``, so messages match the CLI) and hands the
  checked request on (``Memory.store_checked``/``recall_checked``): the graph does not check
  it again. The signatures declare types only; the schema advertises the rules. A
  :class:`~smriti.errors.SmritiError` becomes a tool error worded for people; any other
  exception is logged with its traceback and returned as a tool error too, so a failing
  model or backend never takes the server down.
* Memory methods are synchronous (embedded databases, LangGraph ``invoke``): they run in a
  worker thread so the event loop keeps answering other requests.
* Results carry ``structured_content`` (validated against the advertised output schema)
  and the same JSON as text for clients that only read text.
* stdout is the protocol channel on stdio: logging goes to stderr only.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from smriti import __version__
from smriti.config import Settings
from smriti.errors import Busy, SmritiError, UserError
from smriti.pipelines.warmup import compile_in_background
from smriti.runtime import (
    NOTHING_TO_SYNC,
    Runtime,
    close_runtime,
    describe_status,
    open_runtime,
)
from smriti.server.auth import HttpAuth, add_health_route
from smriti.server.resources import MEMORY_RESOURCES, register_resources
from smriti.server.schemas import (
    INSTRUCTIONS,
    MANAGE_DESCRIPTION,
    RECALL_DESCRIPTION,
    STORE_DESCRIPTION,
    Action,
    ManageResult,
    RecallResult,
    StoreResult,
)
from smriti.server.sdk import lowlevel_server, tool_parameters
from smriti.server.subscriptions import register_classic_surface
from smriti.server.tool_errors import SmritiServer
from smriti.server.users import UserRuntimes
from smriti.stores.base import MEMORY_TYPES
from smriti.validators import (
    MAX_DATE_CHARS,
    MAX_ID_CHARS,
    MAX_QUERY_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TAGS_CHARS,
    RECALL_MODES,
    check_memory_id,
    check_recall,
    check_store,
    choice_schema,
    importance_schema,
    limit_schema,
    text_schema,
)

if TYPE_CHECKING:
    from smriti.memory import Memory

logger = logging.getLogger("smriti.server")


# ----------------------------------------------------------------------------- tool plumbing
ToolContext = Context[UserRuntimes, Any]
"""What every tool receives: the request context whose lifespan context holds the open Runtimes."""


@asynccontextmanager
async def _runtime(ctx: ToolContext) -> AsyncIterator[Runtime]:
    """The memory of the user this request was authenticated as (the one user without auth),
    held open (never closed for idleness) until the tool returns."""
    runtimes = ctx.request_context.lifespan_context
    try:
        user, runtime = await runtimes.take_for_request(ctx.request_context.request)
    except UserError as error:
        raise ToolError(without_paths(str(error))) from None
    except SmritiError as error:  # the user's store could not be opened (locked, unreachable, too many)
        logger.warning("opening a memory failed: %s", error)
        raise ToolError(public_failure("opening the memory", error)) from None
    try:
        yield runtime
    finally:
        runtimes.release(user)


def _result(payload: dict[str, Any]) -> CallToolResult:
    """Structured content plus the same JSON as text, for text-only clients."""
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=payload)


async def _call[T](what: str, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a synchronous Memory call in a worker thread and turn failures into tool errors."""
    try:
        return await anyio.to_thread.run_sync(functools.partial(func, *args, **kwargs))
    except UserError as error:  # bad input, unknown id, refused: the message says what to change
        raise ToolError(without_paths(str(error))) from None
    except Exception as error:  # why: a failing model or backend must not end the session
        if isinstance(error, SmritiError):  # anticipated, already worded for people
            logger.warning("%s failed: %s", what, error)
        else:
            logger.exception("%s failed", what)
        raise ToolError(public_failure(what, error)) from None


# An absolute path inside a message: the client (maybe on another machine, over HTTP) needs the
# file's name at most, never the server's folder layout.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s/'\"]+/)+([^\s/'\"]*)")


def without_paths(text: str) -> str:
    """``text`` with every absolute path cut to its last component."""
    return _ABSOLUTE_PATH.sub(lambda match: match.group(1) or "…", text)


def public_failure(what: str, error: Exception) -> str:
    """The tool error text for a failed operation: worded for people, no server internals.

    A Smriti error is already worded for people; a network failure (an ``OSError``, such as a
    model endpoint that is down) names itself; anything else is an internal error whose
    details (an engine's exception text, a traceback) stay in the server log.
    """
    if isinstance(error, SmritiError):
        detail = str(error)
    elif isinstance(error, OSError):
        detail = (
            f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
            if str(error)
            else type(error).__name__
        )
    else:
        detail = f"internal error ({type(error).__name__}; the details are in the server log)"
    return without_paths(f"{what} failed: {detail}")


def _progress(ctx: ToolContext) -> Callable[[str], None] | None:
    """When the call carries a ``progressToken``: an ``on_step`` that sends each step of the
    pipeline, as it finishes, as a progress notification (progress = steps done, message = the
    step's name), so a client can show recall's steps as they run; None otherwise (the graph is
    then invoked as usual). It runs in the thread of the step (the tool's worker thread, or one of
    LangGraph's for recall's parallel branches) and waits for each notification to be sent, so
    they arrive in order and before the result."""
    meta = ctx.request_context.meta  # the request's ``_meta``, its wire names made Python's
    if meta is None or meta.get("progress_token") is None:
        return None
    done = itertools.count(1)
    loop = anyio.lowlevel.current_token()  # LangGraph's pool threads are not anyio's
    one_at_a_time = threading.Lock()  # progress must grow: parallel branches take turns

    def on_step(step: str) -> None:
        with one_at_a_time:
            report = functools.partial(ctx.report_progress, next(done), message=step)
            anyio.from_thread.run(report, token=loop)

    return on_step


def _check[T](check: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return check(*args, **kwargs)
    except UserError as error:
        raise ToolError(without_paths(str(error))) from None


# ----------------------------------------------------------------------------- the tools
async def memories_changed(ctx: ToolContext) -> None:
    """Tell listening clients that the memory resources changed.

    Called after a store, a forget and a consolidation: to ``subscriptions/listen`` streams
    (protocol 2026-07-28) and to the sessions of this user that sent ``resources/subscribe``
    (earlier protocols, :mod:`smriti.server.subscriptions`). A client that shows memory://recent
    or memory://stats re-reads them instead of polling. A notification that cannot be sent
    changes nothing about the call that made the change.
    """
    for uri in MEMORY_RESOURCES:
        try:
            await ctx.notify_resource_updated(uri)
        except Exception as error:  # the change itself is done and acknowledged
            logger.debug("could not notify %s: %s", uri, error)
    runtimes = ctx.request_context.lifespan_context
    await runtimes.subscribers.notify(runtimes.user_key(ctx.request_context.request), MEMORY_RESOURCES)


# The tool signatures declare types only; the rules are validators.check_store/check_recall,
# applied once below (and advertised in the schema by _advertise_rules), so no rule is checked
# twice on the MCP path and the words of an error are the same as the CLI's.
async def smriti_store(
    ctx: ToolContext,
    content: Annotated[str, Field(description="The memory, as self-contained sentences")],
    importance: Annotated[float, Field(description="0.0-1.0; 0.8+ is never pruned")] = 0.5,
    tags: Annotated[str, Field(description="Comma-separated labels")] = "",
    source: Annotated[str, Field(description="Origin label, e.g. meeting-notes")] = "",
    occurred_at: Annotated[
        str,
        Field(description="When the event happened, ISO 8601 date or date-time (default: now)"),
    ] = "",
    explain: Annotated[bool, Field(description="Add the per-step trace of the store pipeline")] = False,
    supersedes: Annotated[
        str, Field(description="Id of an older memory this one corrects (it is kept, marked superseded)")
    ] = "",
) -> Annotated[CallToolResult, StoreResult]:
    async with _runtime(ctx) as runtime:
        request = _check(
            check_store,
            content,
            max_chars=runtime.settings.max_content_chars,
            importance=importance,
            tags=tags,
            source=source,
            occurred_at=occurred_at,
            supersedes=supersedes,
        )
        stored = await _call("store", runtime.memory.store_checked, request, on_step=_progress(ctx))
        payload = {key: stored[key] for key in ("id", "memory_type", "cues", "cluster_id", "deduplicated")}
        # A near-duplicate ends the store before these steps: it superseded nothing, queued nothing.
        payload["superseded"] = list(stored.get("superseded", []))
        payload["analysis_queued"] = bool(stored.get("analysis_queued", False))
        payload["cues"] = [{"name": c["name"], "type": c.get("type", "keyword")} for c in stored["cues"]]
        if explain:
            payload["trace"] = stored["trace"]
        await memories_changed(ctx)
        return _result(payload)


async def smriti_recall(
    ctx: ToolContext,
    query: Annotated[str, Field(description="Natural-language question or keywords")] = "",
    limit: Annotated[int, Field(description="Maximum number of results")] = 5,
    mode: Annotated[
        str, Field(description="recall (deep), search (vector only) or list (recent)")
    ] = "recall",
    memory_type: Annotated[str | None, Field(description="Filter: only memories of this type")] = None,
    explain: Annotated[bool, Field(description="Add the per-step trace and score components")] = False,
    include_superseded: Annotated[
        bool, Field(description="Also return memories a newer one corrected (ranked below, marked)")
    ] = False,
) -> Annotated[CallToolResult, RecallResult]:
    async with _runtime(ctx) as runtime:
        request = _check(
            check_recall,
            query,
            max_results=runtime.settings.memory_fabric_max_results,
            limit=limit,
            mode=mode,
            memory_type=memory_type,
            explain=explain,
            include_superseded=include_superseded,
        )
        return _result(await _call("recall", runtime.memory.recall_checked, request, on_step=_progress(ctx)))


async def smriti_manage(
    ctx: ToolContext,
    action: Annotated[Action, Field(description="forget, sync, consolidate or stats")],
    memory_id: Annotated[
        str, Field(description="Id of the memory to forget, or its first characters (forget only)")
    ] = "",
    explain: Annotated[bool, Field(description="consolidate: add the per-step trace")] = False,
) -> Annotated[CallToolResult, ManageResult]:
    memory_id = _check(check_memory_id, memory_id)  # before the memory is opened
    async with _runtime(ctx) as runtime:
        return await _manage(ctx, runtime, action, memory_id, explain)


def _forget(memory: Memory, memory_id: str) -> dict[str, Any]:
    """Forget the memory whose id is ``memory_id`` or, as in the CLI, the one memory whose id
    starts with it (at least 4 characters); an ambiguous or unknown prefix is refused, saying so."""
    if not memory_id:
        return memory.forget(memory_id)  # its own message: memory_id is required
    return memory.forget(memory.resolve_id(memory_id))


async def _manage(
    ctx: ToolContext, runtime: Runtime, action: str, memory_id: str, explain: bool
) -> CallToolResult:
    details: dict[str, Any]
    if action == "forget":
        details = await _call("forget", _forget, runtime.memory, memory_id)
        message = f"forgot memory {details.get('forgotten', memory_id)}"
        await memories_changed(ctx)
    elif action == "sync" and runtime.backup is None:
        # As `smriti sync` does: a session-end hook on a memory without backups is not an error.
        details = {"status": "disabled", "backup_type": "none"}
        message = NOTHING_TO_SYNC
    elif action == "sync":
        details = await _call("sync", runtime.sync)
        message = "backup synced"
    elif action == "consolidate":
        report = await _call("consolidate", runtime.consolidate, on_step=_progress(ctx))
        details = {k: v for k, v in report.items() if k != "trace"}
        message = "consolidation finished"
        await memories_changed(ctx)
        if explain:
            return _result(
                {"action": action, "message": message, "details": details, "trace": report["trace"]}
            )
    elif action == "stats":
        details = await _call("stats", describe_status, runtime)
        message = f"{details.get('engrams', 0)} memories, {details.get('clusters', 0)} clusters"
    else:  # the schema already restricts action; kept for direct callers
        raise ToolError(f"unknown action {action!r}; use forget, sync, consolidate or stats")
    return _result({"action": action, "message": message, "details": details})


TOOLS: tuple[tuple[Callable[..., Any], str, str, ToolAnnotations], ...] = (
    (
        smriti_store,
        "Remember",
        STORE_DESCRIPTION,
        ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
    ),
    # Not read-only: recall reinforces what it returns (access count, last access, decay). It
    # changes no memory's content and removes nothing. memory://stats and memory://recent are
    # the read-only ways in.
    (
        smriti_recall,
        "Recall",
        RECALL_DESCRIPTION,
        ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    ),
    (
        smriti_manage,
        "Manage memory",
        MANAGE_DESCRIPTION,
        # Annotations are per tool, and forget deletes: destructive (the MCP hint means "may
        # perform destructive updates"), not idempotent (consolidate and sync change state each
        # run). stats alone is read-only: memory://stats serves it without a confirmation.
        ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
    ),
)


# ----------------------------------------------------------------------------- the server
def build_server(
    settings: Settings,
    *,
    on_shutdown: Callable[[], None] | None = None,
    auth: HttpAuth | None = None,
    on_open: Callable[[Runtime], None] | None = None,
) -> MCPServer:
    """Build the MCP server for ``settings`` (nothing is opened until the lifespan starts).

    Args:
        settings: validated settings; the lifespan opens ``Memory.open(settings)``.
        on_shutdown: called once the database is closed at the end of the lifespan.
        auth: authenticate HTTP requests and serve each in its user's memory (server/auth.py);
            None serves ACCESSING_USER's memory, opened at start.
        on_open: called with ACCESSING_USER's runtime once it is open (without ``auth``; the
            shared server's own routes use it).

    Returns:
        An :class:`MCPServer` with the tools ``smriti_store``, ``smriti_recall`` and
        ``smriti_manage``; run it with :func:`serve` or any MCP transport.
    """

    # LangGraph's import and the graphs' compile, off the first call's path: while the SDK is
    # imported, the client's handshake is awaited and the store and embedder open.
    compile_in_background()
    opened: list[UserRuntimes] = []  # the lifespan's runtimes, for the resources (see server/resources.py)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[UserRuntimes]:
        runtimes = UserRuntimes(
            functools.partial(_open_ready, settings),
            close_runtime,
            multi_user=auth is not None,
            idle_timeout=settings.user_idle_timeout,
            max_open=settings.max_open_users,
        )
        opened[:] = [runtimes]
        try:
            if auth is None:  # one user: opened now, so a locked store fails the start
                runtime = await runtimes.get(None)
                if on_open is not None:
                    on_open(runtime)
            async with anyio.create_task_group() as tasks:
                runtimes.start(tasks, _start_background)
                try:
                    yield runtimes
                finally:
                    tasks.cancel_scope.cancel()
        finally:
            # Shielded: a cancelled server (SIGTERM) must still sync and close the databases.
            with anyio.CancelScope(shield=True):
                await runtimes.aclose()
            if on_shutdown is not None:
                on_shutdown()

    server = SmritiServer(
        "smriti",
        title="Smriti memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        lifespan=lifespan,
        log_level=settings.log_level,
        token_verifier=auth.verifier if auth is not None else None,
        auth=auth.settings if auth is not None else None,
    )
    for tool, title, description, hints in TOOLS:
        server.add_tool(tool, name=tool.__name__, title=title, description=description, annotations=hints)
    _advertise_rules(server, settings)
    register_resources(server, lambda: opened[0].using_request(None))
    register_classic_surface(lowlevel_server(server), MEMORY_RESOURCES)
    add_health_route(server, __version__)
    return server


def _advertise_rules(server: MCPServer, settings: Settings) -> None:
    """Advertise the rules the tools apply (validators.py) in their input schemas: one definition,
    and the SDK's argument model, which only checks types, never applies them a second time.
    Every string has its bound (``maxLength``), so a client knows what will be refused."""
    advertised = {
        "smriti_store": {
            "content": text_schema(settings.max_content_chars),
            "importance": importance_schema(),
            "tags": text_schema(MAX_TAGS_CHARS),
            "source": text_schema(MAX_SOURCE_CHARS),
            "occurred_at": text_schema(MAX_DATE_CHARS),
            "supersedes": text_schema(MAX_ID_CHARS),
        },
        "smriti_recall": {
            "query": text_schema(MAX_QUERY_CHARS),
            "limit": limit_schema(settings.memory_fabric_max_results),
            "mode": choice_schema(RECALL_MODES),
            "memory_type": choice_schema(tuple(MEMORY_TYPES), nullable=True),
        },
        "smriti_manage": {"memory_id": text_schema(MAX_ID_CHARS)},
    }
    for name, properties in advertised.items():
        for prop, schema in properties.items():
            described = tool_parameters(server, name)["properties"][prop]
            for key in ("type", "anyOf"):  # the declared type's schema gives way to the rule's
                described.pop(key, None)
            described.update(schema)


def _open_ready(settings: Settings, user: str | None) -> Runtime:
    """Open a user's runtime (None: ACCESSING_USER, at start).

    An HTTP user's pipelines are imported here, so that user's first call need not. The
    start-up user's are imported in the background instead (:func:`_warm`): ``initialize`` is
    answered once the store is open (a locked store still fails the start); a call that comes
    sooner waits for the same import.
    """
    runtime = open_runtime(settings) if user is None else open_runtime(settings, user=user)
    if user is None:
        return runtime
    try:
        runtime.memory.load_pipelines()
    except BaseException:
        close_runtime(runtime, final_sync=False)
        raise
    return runtime


def _start_background(tasks: anyio.abc.TaskGroup, runtime: Runtime) -> None:
    settings = runtime.settings
    # The vector cache loads while the client's handshake runs, instead of on its first
    # recall (measured at 10k: 370 ms of a first recall; at 100k: seconds).
    threading.Thread(target=_warm, args=(runtime,), name="smriti-warm", daemon=True).start()
    # LLM analyses queued by stores (and left by an earlier run) are drained in the background.
    if settings.analysis_worker and runtime.memory.start_analysis_worker():
        logger.info("LLM analysis runs in the background: %s", runtime.memory.analysis_queue())
    if settings.consolidation_interval > 0:
        consolidate = functools.partial(_periodic_consolidation, runtime)
        tasks.start_soon(_every, settings.consolidation_interval, "consolidation", consolidate)
    if runtime.backup is not None and settings.backup_sync_interval > 0:
        sync = one_worker_at_a_time(runtime, "backup sync", runtime.sync)
        tasks.start_soon(_every, settings.backup_sync_interval, "backup sync", sync)


def _warm(runtime: Runtime) -> None:
    """Import the pipelines (recall's first) in this thread while another loads the vector
    cache and then the word lists: the cache's read is SQLite and numpy, which run without the
    GIL, beside the imports, which hold it. A call that arrives meanwhile waits for the import
    in progress (Python's import lock) or the cache load (its lock), never repeats them. Then
    one rehearsal recall (:meth:`Memory.rehearse`) pays the first recall's one-time costs.
    The graphs are compiled by the thread :func:`build_server` started; loading the pipelines
    here waits for that compile rather than repeating it.
    """
    caches = threading.Thread(target=_warm_caches, args=(runtime,), name="smriti-warm-caches", daemon=True)
    caches.start()
    try:
        runtime.memory.load_pipelines()
        caches.join()
        runtime.memory.rehearse()  # the first recall's one-time costs, paid here instead
    except Exception:  # why: the first call will import them (or report the failure) itself
        logger.debug("warming the recall failed", exc_info=True)


def _warm_caches(runtime: Runtime) -> None:
    try:
        runtime.memory.warm()
    except Exception:  # why: a query will load it (or report the failure) itself
        logger.debug("warming the store failed", exc_info=True)


def _periodic_consolidation(runtime: Runtime) -> dict[str, Any] | None:
    """A timer's consolidation: skipped, not waited for, while another process or worker runs
    one of this memory (``Memory.consolidate``'s lock); that one does the work."""
    try:
        return runtime.consolidate(wait=0)
    except Busy:
        logger.info("periodic consolidation: another process or worker is running one; skipped")
        return None


def one_worker_at_a_time(runtime: Runtime, what: str, func: Callable[[], Any]) -> Callable[[], Any]:
    """``func`` (a periodic backup sync of ``runtime``'s user), run by one worker at a time: each
    worker has the timer, and the one that finds another worker running it skips that round (two
    backup pushes of one memory would race). One worker: ``func`` itself. (Consolidation has its
    own lock, across every process: ``Memory.consolidate``.)"""
    settings = runtime.settings
    if settings.http_workers <= 1:
        return func
    from smriti.stores.paths import process_lock, try_lock, user_folder

    folder = user_folder(settings.storage_location, runtime.memory.context.store.user)

    def guarded() -> Any:
        folder.mkdir(parents=True, exist_ok=True)
        lock = process_lock(folder / f"{what.replace(' ', '-')}.lock")
        if not try_lock(lock):
            logger.info("periodic %s: another worker is running it; skipped", what)
            return None
        try:
            return func()
        finally:
            lock.release()

    return guarded


async def _every(seconds: float, what: str, func: Callable[[], Any]) -> None:
    """Run ``func`` in a worker thread every ``seconds``; failures are logged, never raised."""
    while True:
        await anyio.sleep(seconds)
        try:
            await anyio.to_thread.run_sync(func)
            logger.debug("periodic %s done", what)
        except SmritiError as error:  # anticipated (a full disk, a remote down): one line, no traceback
            logger.warning("periodic %s failed: %s", what, error)
        except Exception:  # why: a failed background run must not cancel the server's task group
            logger.exception("periodic %s failed", what)
