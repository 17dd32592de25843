"""``Memory``: the library's front door, one user's memory with its three pipelines.

The MCP server, the CLI, notebooks and LangGraph integrations all go through this class,
so they share one behaviour. Each method is one pipeline run (or one store call for the
trivial ones) of the pipeline's compiled LangGraph graph, available as ``memory.store_graph``
etc. for streaming and for embedding as subgraphs.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.errors import InvalidInput, NotFound
from smriti.facade import MemoryFacade
from smriti.stores.records import import_into
from smriti.validators import RecallRequest, StoreRequest, checked_input

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from smriti.config import Settings
    from smriti.nodes.state import MemoryContext
    from smriti.pipelines.pipeline import Pipeline


FULL_ID_LENGTH = 36  # a uuid's text
MIN_ID_PREFIX = 4  # characters of an id that `smriti forget` accepts as its start
# How long a consolidation waits for another one of the same memory (another process or worker)
# before it gives up with Busy: a consolidation of 10k memories takes seconds, and an MCP client
# waits about a minute for a tool call. The periodic one does not wait: it skips its round.
CONSOLIDATION_WAIT_SECONDS = 45.0
# A question with a time, a name and common words, so that :meth:`Memory.rehearse` runs every
# branch of recall (cues, keywords, vectors, the time window).
REHEARSAL_QUERY = "What did Alex say about the plan last week?"


def run_pipeline(
    pipeline: Pipeline,
    payload: dict[str, Any],
    context: MemoryContext,
    on_step: Callable[[str], None] | None = None,
) -> Any:
    """Run ``pipeline``'s compiled LangGraph graph (compiled once per process) on ``payload``, a
    request already checked with ``validators.check_store`` or ``check_recall``
    (:func:`~smriti.validators.checked_input`). ``on_step(step)``: as each step finishes (the
    run is then streamed; ``pipelines/stages.py``)."""
    from smriti.pipelines.stages import run

    with checked_input():
        return run(pipeline.graph, payload, context, on_step)


class Memory(MemoryFacade):
    """One user's memory: store, recall, forget, consolidate, stats, export and import.

    :meth:`store` and :meth:`recall` (checking a request where it enters) are
    :class:`~smriti.facade.MemoryFacade`'s; this class runs the checked requests' pipelines.
    """

    def __init__(self, context: MemoryContext) -> None:
        self.context = context
        self._worker: Any = None  # the analysis worker, when started (start_analysis_worker)
        self._recalled = False  # a recall has run: a rehearsal (rehearse) has nothing left to do
        # Held by the warm-up and the rehearsal, which a server runs in threads of their own: close
        # waits for them, since a store closed under a running query can crash SQLite (a test's
        # server stopped during a rehearsal did).
        self._rehearsal = threading.Lock()
        self._closed = False

    # The pipelines are imported, and their LangGraph graphs compiled, at first use: LangGraph
    # takes ~0.5 s to import, which a command that runs no pipeline (import, export, stats) need
    # not wait for. A server starts it in the background at once (pipelines/graphs.py).
    def load_pipelines(self) -> None:
        """Compile the recall and store graphs now (a server does, so its first call need not)."""
        _ = self._recall_pipeline.graph, self._store_pipeline.graph  # recall: a first call's likeliest

    def warm(self) -> None:
        """Load the store's caches (the vector matrix or graph, the cue cache) and the word
        lists now rather than in the first call; a server does this in the background at start.
        A no-op once closed; close waits for one in progress (as for :meth:`rehearse`)."""
        from smriti.providers import cue_words

        with self._rehearsal:
            if self._closed:
                return
            self.context.store.warm()
            cue_words.warm()

    def rehearse(self) -> list[dict[str, Any]]:
        """Run one recall that answers and reinforces nothing (limit 0), so that the first real
        recall does not pay what a process pays once: SQLite's first statements and pages, the
        stop-word index, rapidfuzz's and numpy's first calls (a first recall at 10k took
        2-3x a warm one without this). Nothing is written; a server does this in the
        background after it starts (server/app.py). Returns the run's trace; empty when a real
        recall came first (it paid those costs; rehearsing beside it would only slow it) or when
        a recall would call a model over the network (:meth:`_rehearsal_is_offline`)."""
        if self._recalled or not self._rehearsal_is_offline():
            return []
        with self._rehearsal:
            if self._closed:
                return []
            return self._rehearse()

    def _rehearse(self) -> list[dict[str, Any]]:
        payload = {
            "query": REHEARSAL_QUERY,
            "limit": 0,  # every step runs on the candidates; no result, so nothing to reinforce
            "mode": "recall",
            "memory_type": None,
            "explain": False,
            "include_superseded": False,
        }
        return list(run_pipeline(self._recall_pipeline, payload, self.context)["trace"])

    def _rehearsal_is_offline(self) -> bool:
        """A rehearsal calls no model over the network: an API call at every start would cost
        money and time for a gain of tens of milliseconds. So only with the offline analysis, a
        local embedder (MiniLM or hashing) and no reranker."""
        from smriti.providers.hashing import HashingEmbeddings
        from smriti.providers.minilm import MiniLMEmbeddings

        context = self.context
        local = isinstance(context.embedder, HashingEmbeddings | MiniLMEmbeddings)
        return local and context.llm is None and context.reranker is None

    @functools.cached_property
    def _store_pipeline(self) -> Pipeline:
        from smriti.pipelines.store import store_pipeline

        return store_pipeline

    @functools.cached_property
    def _recall_pipeline(self) -> Pipeline:
        from smriti.pipelines.recall import recall_pipeline

        return recall_pipeline

    # The compiled LangGraph graphs every call runs (in stages: ``pipelines/stages.py``), for
    # streaming them and embedding them; ``build_recall_graph()`` etc. step by step.
    @property
    def store_graph(self) -> Any:
        return self._store_pipeline.graph

    @property
    def recall_graph(self) -> Any:
        return self._recall_pipeline.graph

    @functools.cached_property
    def consolidate_graph(self) -> Any:
        from smriti.pipelines.consolidate import consolidate_pipeline

        return consolidate_pipeline.graph

    def executor(self) -> dict[str, str]:
        """The class of each pipeline's compiled graph, for those compiled so far (a server's
        status shows it: ``langgraph.graph.state.CompiledStateGraph``)."""
        from smriti.pipelines.consolidate import consolidate_pipeline
        from smriti.pipelines.stages import compiled

        pipelines = {"store": self._store_pipeline, "recall": self._recall_pipeline}
        return compiled({**pipelines, "consolidate": consolidate_pipeline})

    @classmethod
    def open(
        cls,
        settings: Settings | None = None,
        *,
        user: str | None = None,
        llm: BaseChatModel | None = None,
        embedder: Embeddings | None = None,
    ) -> Memory:
        """Open the memory of ``user`` (default ACCESSING_USER) from settings (default: environment)."""
        from smriti.config import load_settings
        from smriti.pipelines.context import build_context

        settings = settings or load_settings()
        return cls(build_context(settings, user=user, llm=llm, embedder=embedder))

    @property
    def settings(self) -> Settings:
        """The settings this memory was opened with (its limits check requests)."""
        return self.context.settings

    # ------------------------------------------------------------------------- writes
    def store_checked(
        self,
        request: StoreRequest,
        created_at: datetime | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """:meth:`store` for a request its caller already checked with ``validators.check_store``
        (the MCP tools and the CLI do, where the request enters): the rules are not applied again.
        ``on_step(step)`` is called as each step finishes (the MCP server's progress)."""
        payload: dict[str, Any] = dict(request)
        if created_at is not None:
            payload["created_at"] = created_at.isoformat()
        self._check_space()
        self._touch()
        # Atomic: the pipeline's nodes run in this thread (the graph is linear), so every
        # write they make joins this one batch (a transaction; FalkorDB: one MULTI/EXEC); a
        # failure anywhere drops all of it, and a killed process or database leaves the whole
        # memory or none.
        with self.context.write_lock, self.context.store.write_batch():
            output = run_pipeline(self._store_pipeline, payload, self.context, on_step)
        if self._worker is not None:
            self._worker.touch()
            self._worker.notify()
        return output

    def _touch(self) -> None:
        """A foreground call: the analysis worker waits for a pause (pipelines/enrich.py)."""
        if self._worker is not None:
            self._worker.touch()

    # ------------------------------------------------------------------------- LLM analysis queue
    def enrich(
        self, wait: bool = False, timeout: float | None = None, retry_failed: bool = False
    ) -> dict[str, Any]:
        """Run the queued LLM analyses that are due now (``wait``: until none is pending).

        ``retry_failed`` first puts parked memories back in the queue. Returns the counts of
        what ran and the queue after it (see :func:`smriti.pipelines.enrich.drain`).

        Raises:
            InvalidInput: no chat model is configured (LLM_API_KEY), so nothing can be analysed.
        """
        from smriti.pipelines.enrich import drain

        if self.context.llm is None and self.context.analyst is None:
            raise InvalidInput("no LLM is configured (set LLM_API_KEY): the queued analyses cannot run")
        return drain(self.context, wait=wait, timeout=timeout, retry_failed=retry_failed)

    def start_analysis_worker(self) -> bool:
        """Drain the analysis queue in a background thread (what the server does); False when
        no chat model is configured. Stopped by :meth:`close`."""
        if self._worker is not None or (self.context.llm is None and self.context.analyst is None):
            return self._worker is not None
        from smriti.pipelines.enrich import AnalysisWorker

        self._worker = AnalysisWorker(self.context)
        self._worker.start()
        return True

    def analysis_queue(self) -> dict[str, Any]:
        """The queue: pending and failed (parked) counts, the next due time, parked memories' errors."""
        from smriti.stores.queue import AnalysisQueue

        return AnalysisQueue(self.context.store).summary()

    def forget(self, memory_id: str) -> dict[str, Any]:
        """Delete one memory of this user.

        Raises:
            InvalidInput: empty id. NotFound: no such memory for this user.
        """
        if not memory_id or not memory_id.strip():
            raise InvalidInput("memory_id is required to forget a memory (take it from a recall result)")
        with self.context.write_lock:
            if not self.context.store.delete_engram(memory_id.strip()):
                raise NotFound(f"no memory with id {memory_id!r}")
        return {"forgotten": memory_id.strip()}

    def resolve_id(self, prefix: str) -> str:
        """The id of the one memory whose id is or starts with ``prefix`` (the CLI shows ids
        shortened, as git shows commits).

        Raises:
            InvalidInput: an empty, too short (under 4 characters) or ambiguous prefix.
            NotFound: no memory's id starts with it.
        """
        prefix = prefix.strip()
        if not prefix:
            raise InvalidInput("a memory id (or the start of one) is required")
        store = self.context.store
        if store.get_engram(prefix) is not None:
            return prefix
        if len(prefix) < MIN_ID_PREFIX:
            raise InvalidInput(f"give at least {MIN_ID_PREFIX} characters of the memory id, not {prefix!r}")
        matches = [state.id for state in store.engram_states() if state.id.startswith(prefix)]
        if not matches:
            if len(prefix) >= FULL_ID_LENGTH:  # a whole id: say so, not "starting"
                raise NotFound(f"no memory with id {prefix!r}")
            raise NotFound(f"no memory with an id starting {prefix!r}")
        if len(matches) > 1:
            shown = ", ".join(sorted(matches)[:5])
            raise InvalidInput(f"{len(matches)} memories have ids starting {prefix!r} ({shown}): give more")
        return matches[0]

    def consolidate(
        self,
        now: datetime | None = None,
        on_step: Callable[[str], None] | None = None,
        wait: float = CONSOLIDATION_WAIT_SECONDS,
    ) -> dict[str, Any]:
        """Repair, decay, prune, strengthen, clean orphans, recluster, manage indexes and embed new cue
        names; returns the report.

        ``on_step(name)`` is called as each step finishes (the CLI's progress bar). One
        consolidation of a memory runs at a time, across every process that opens it (the
        store's ``exclusive`` lock, :mod:`smriti.stores.leases`): a second one waits for the
        first, up to ``wait`` seconds, and then runs (decaying only the time since the first).

        Raises:
            Busy: another consolidation of this memory held it for ``wait`` seconds; nothing ran.
        """
        from smriti.pipelines.consolidate import consolidate_pipeline

        self._check_space()
        payload: dict[str, Any] = {} if now is None else {"now": now.isoformat()}
        with self.context.store.exclusive("consolidation", wait):
            final = run_pipeline(consolidate_pipeline, payload, self.context, on_step) or {}
        return {**final.get("report", {}), "trace": final.get("trace", [])}

    # ------------------------------------------------------------------------- reads
    def recall_checked(
        self, request: RecallRequest, on_step: Callable[[str], None] | None = None
    ) -> dict[str, Any]:
        """:meth:`recall` for a request its caller already checked with ``validators.check_recall``
        (the MCP tools and the CLI do, where the request enters): the rules are not applied again.
        ``on_step(step)`` is called as each step finishes (the MCP server's progress)."""
        self._touch()
        self._recalled = True
        output = run_pipeline(self._recall_pipeline, dict(request), self.context, on_step)
        self._touch()
        result = output["result"]
        if request["explain"]:
            result = {**result, "trace": output["trace"]}
        return result

    def stats(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self.context.store.stats()), "analysis_queue": self.analysis_queue()}

    # ------------------------------------------------------------------------- portability
    def export_records(self) -> Iterator[dict[str, Any]]:
        return self.context.store.export_records()

    def import_records(
        self, records: Iterable[dict[str, Any]], on_memories: Callable[[int], None] | None = None
    ) -> int:
        """Import an export's records (idempotent); ``on_memories(n)`` follows the progress.

        The free space is checked before each batch of memories too: a large import stops with
        StoreFull between two batches (those written are whole) rather than fill the disk.
        """
        self._check_space()

        def progress(done: int) -> None:
            if on_memories is not None:
                on_memories(done)
            self._check_space()

        with self.context.write_lock:
            return import_into(self.context.store, records, progress)

    def _check_space(self) -> None:
        """Refuse a write while the disk of an embedded store has less than MIN_FREE_DISK_MB free
        (a database server's disk is its server's business).

        Raises:
            StoreFull: nothing has been written.
        """
        from pathlib import Path

        from smriti.stores.space import check_free_space

        path = getattr(self.context.store, "path", None)  # SQLite and Kuzu: the database file
        if isinstance(path, Path):
            check_free_space(path, self.context.settings.min_free_disk_mb)

    def close(self) -> None:
        with self._rehearsal:  # a rehearsal in progress ends first; none starts after
            self._closed = True
        if self._worker is not None:
            self._worker.stop()
            # A barrier, not a hold (closing takes the lock itself, in the reinforcer): a worker
            # landing an analysis finishes first; one answering later sees it was stopped.
            with self.context.write_lock:
                pass
        self.context.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
