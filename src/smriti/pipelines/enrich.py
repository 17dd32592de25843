"""Draining the LLM analysis queue: a background worker (the server's) and a drain on demand
(``smriti enrich``, :meth:`smriti.memory.Memory.enrich`).

One job at a time, the oldest due first (``nodes/enrich.py`` runs it). Calls are spaced by
``ANALYSIS_RATE_PER_MINUTE``; a ``Retry-After`` from the endpoint pauses every job, not only
the one that got it (the limit is the endpoint's, not the memory's). The worker sleeps until
the next job is due or a store wakes it, so an idle server costs one queue read per
:data:`IDLE_POLL_SECONDS` (what another process sharing a Cypher database may have queued).

Foreground calls come first: the worker starts a model call, and lands its answer, only once
no store or recall has run for :data:`QUIET_SECONDS` (deferring at most
:data:`MAX_DEFER_SECONDS`, so a long burst of stores still sees the queue move). Landing an
analysis takes the write lock and ~20 ms of CPU (the chat client's parsing, relinking); an agent
pauses seconds between tool calls, and the work fits in those pauses instead of in a store.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from smriti.nodes.enrich import Outcome, enrich_one
from smriti.nodes.state import MemoryContext
from smriti.stores.queue import AnalysisQueue

log = logging.getLogger(__name__)

IDLE_POLL_SECONDS = 5.0
QUIET_SECONDS = 0.05
MAX_DEFER_SECONDS = 10.0


class Pacer:
    """Spaces model calls by the rate limit and honours a Retry-After for every job."""

    def __init__(self, per_minute: float) -> None:
        self.interval = 60.0 / per_minute if per_minute > 0 else 0.0
        self.next_call = 0.0  # time.monotonic() of the earliest next call

    def wait_time(self) -> float:
        return max(0.0, self.next_call - time.monotonic())

    def called(self, outcome: Outcome) -> None:
        pause = max(self.interval, outcome.wait or 0.0)
        self.next_call = time.monotonic() + pause


def run_due(
    context: MemoryContext,
    pacer: Pacer,
    stop: threading.Event,
    until_empty: bool = False,
    deadline: float | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    quiet: Callable[[], None] | None = None,
) -> Counter[str]:
    """Run due jobs until none is due (or, ``until_empty``, until no job is pending), ``stop``
    is set or the monotonic ``deadline`` passes; returns how many ended each way. ``quiet()``
    (the worker's) waits for a pause in foreground calls before a model call and a landing."""
    queue = AnalysisQueue(context.store)
    done: Counter[str] = Counter()
    while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
        job = queue.next_due(context.clock())
        if job is None:
            if not until_empty:
                break
            pending = queue.pending()
            if not pending:
                break
            wait = (pending[0].due_at() - context.clock()).total_seconds()
            stop.wait(_bounded(wait, deadline))
            continue
        if (pause := pacer.wait_time()) > 0:
            stop.wait(_bounded(pause, deadline))
            continue
        if quiet is not None:
            quiet()
        outcome = enrich_one(context, job, stopped=stop.is_set, quiet=quiet)
        pacer.called(outcome)
        done[outcome.status] += 1
        if on_outcome is not None:
            on_outcome(outcome)
    return done


def _bounded(seconds: float, deadline: float | None) -> float:
    seconds = max(0.01, seconds)
    if deadline is not None:
        seconds = min(seconds, max(0.01, deadline - time.monotonic()))
    return seconds


class AnalysisWorker:
    """A daemon thread draining the queue of one memory while the server runs."""

    def __init__(self, context: MemoryContext) -> None:
        self.context = context
        self.pacer = Pacer(context.settings.analysis_rate_per_minute)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._last_call = 0.0  # time.monotonic() of the last foreground call's start or end
        self._thread = threading.Thread(target=self._run, name="smriti-analysis", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def notify(self) -> None:
        """A memory was queued: look now rather than at the next poll."""
        self._wake.set()

    def touch(self) -> None:
        """A foreground call (store, recall) starts or ends: background work waits for a pause."""
        self._last_call = time.monotonic()

    def wait_quiet(self) -> None:
        """Wait until no foreground call ran for QUIET_SECONDS (at most MAX_DEFER_SECONDS)."""
        give_up = time.monotonic() + MAX_DEFER_SECONDS
        while not self._stop.is_set():
            now = time.monotonic()
            idle = now - self._last_call
            if idle >= QUIET_SECONDS or now >= give_up:
                return
            self._stop.wait(QUIET_SECONDS - idle)

    def stop(self, timeout: float = 0.5) -> None:
        """Stop after the current call; a model call in flight is abandoned (its job stays queued).

        Not joined for long: once stopped the thread writes nothing (it checks under the write
        lock), so a hanging endpoint does not hold a shutdown up; the thread is a daemon.
        """
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        queue = AnalysisQueue(self.context.store)
        while not self._stop.is_set():
            self._wake.clear()
            try:
                run_due(self.context, self.pacer, self._stop, quiet=self.wait_quiet)
                if self._stop.is_set():  # the store may be closing: read nothing more
                    return
                pending = queue.pending()
            except Exception:  # why: a failing store read must not end the worker for good
                if self._stop.is_set():
                    return
                log.exception("the analysis worker failed; retrying in %.0f s", IDLE_POLL_SECONDS)
                pending = []
            wait = IDLE_POLL_SECONDS
            if pending:
                due_in = (pending[0].due_at() - self.context.clock()).total_seconds()
                wait = min(wait, max(due_in, self.pacer.wait_time(), 0.01))
            self._wake.wait(wait)


def drain(
    context: MemoryContext, wait: bool = False, timeout: float | None = None, retry_failed: bool = False
) -> dict[str, Any]:
    """Analyse the due jobs now (``wait``: until nothing is pending, backoffs included).

    Returns what ran ({"landed", "retry", "parked", "gone"} counts) and the queue after it.
    """
    queue = AnalysisQueue(context.store)
    requeued = 0
    if retry_failed:
        with context.write_lock:
            requeued = queue.retry_failed(context.clock())
    deadline = None if timeout is None else time.monotonic() + timeout
    done = run_due(
        context, Pacer(context.settings.analysis_rate_per_minute), threading.Event(), wait, deadline
    )
    return {"ran": dict(done), "requeued": requeued, "queue": queue.summary()}
