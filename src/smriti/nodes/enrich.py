"""LLM analysis after the store: queue it, run one job, and land the result.

A store answers after the offline analysis, the embedding and the write (``nodes/encode.py``);
with a chat model configured the store step :func:`queue_analysis` adds the memory to the
durable queue (``stores/queue.py``) in the store's own transaction. :func:`enrich_one` runs one
queued job: it asks the model (prompt and repair as ``providers/analysis.py``), and when the
answer lands replaces the memory's summary, type, stated facts, cues and relations, relinking
it with the store pipeline's own ``write_links``, and marks the older memories the model says
it corrects (``nodes/supersede.py``).

The time the model states (``occurred_at``, resolved against the store time given in the
prompt) becomes the memory's time (``created_at``, what a caller's ``occurred_at`` sets at
store) and a ``time`` cue, only when the caller gave no time: the job records that
(``Job.store_time``), so a caller's explicit time is never overwritten. ``last_accessed_at``
stays, so a past event is not decayed as long unused. Landing replaces rather than adds, so a
job replayed after a crash lands the same memory again.

A failure counts an attempt and is retried after a backoff, or after the endpoint's
``Retry-After``; after ``ANALYSIS_MAX_ATTEMPTS`` the job is parked with its error. The loop
that drains the queue is ``pipelines/enrich.py``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from pydantic import Field

from smriti.nodes.link import write_links
from smriti.nodes.state import MemoryContext, StoreState, traced
from smriti.nodes.supersede import detect, mark_superseded
from smriti.providers.analysis import ANALYZE_PROMPT, ask_structured
from smriti.providers.schemas import Analysis
from smriti.stores.base import Engram
from smriti.stores.queue import AnalysisQueue, Job

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

log = logging.getLogger(__name__)

# How many of the most similar earlier memories the model is shown to spot a correction.
EARLIER_SHOWN = 5
EARLIER_PROMPT = (
    "\n\nEarlier memories (id: text). List in `supersedes` the ids of those this memory corrects or "
    "replaces: the same subject and relation with another value, such as an older preference. "
    "Leave it empty when none is contradicted.\n{earlier}"
)
STORED_PROMPT = (
    "\n\nThe memory was stored at {stored} (UTC). Resolve relative times in it (yesterday, last "
    "Tuesday, two weeks ago) against that moment."
)


class Enrichment(Analysis):
    """The queued analysis: the store's :class:`Analysis` plus the corrections it finds."""

    supersedes: list[str] = Field(
        default_factory=list, description="ids of earlier memories this memory corrects"
    )


@traced
def queue_analysis(state: StoreState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Queue the LLM's analysis of the new memory (nothing to queue without a chat model)."""
    context = runtime.context
    if context.llm is None and context.analyst is None:
        return {"analysis_queued": False, "_notes": "no LLM: the offline analysis is final"}
    with context.write_lock:
        AnalysisQueue(context.store).enqueue(state["id"], context.clock(), _store_time(state))
    return {"analysis_queued": True, "_notes": "LLM analysis queued"}


def _store_time(state: StoreState) -> datetime | None:
    """The memory's time when the caller gave no ``occurred_at`` (the model may then state
    one); None when the caller gave it, so it is never overwritten."""
    if state.get("occurred_at"):
        return None
    # As write stored it (from the clock, or created_at): not read back, the batch is not sent yet.
    return datetime.fromisoformat(state["stored_at"])


# ----------------------------------------------------------------------------- failures
def retry_after(error: BaseException, now: datetime) -> float | None:
    """Seconds the endpoint asked to wait (``Retry-After`` of a 429 or 503), else None.

    Reads the HTTP response the OpenAI client (and httpx-based clients generally) attach to
    their errors; the header is either seconds or an HTTP date.
    """
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def backoff(attempts: int, base: float, cap: float) -> float:
    """Seconds before the next try after ``attempts`` failures: base x 2^(attempts-1), at most cap."""
    return min(cap, base * 2 ** max(0, attempts - 1))


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# ----------------------------------------------------------------------------- one job
@dataclass(slots=True, frozen=True)
class Outcome:
    """What one job did: ``landed``, ``gone`` (the memory was forgotten), ``retry``, ``parked``,
    ``stopped`` (the worker stopped meanwhile); ``wait`` is a Retry-After the worker honours."""

    status: str
    engram_id: str
    error: str = ""
    wait: float | None = None


def _earlier(context: MemoryContext, engram: Engram) -> list[Engram]:
    """The most similar current memories stored before ``engram``: what it may correct."""
    if engram.embedding is None:
        return []
    hits = context.store.vector_search(engram.embedding, EARLIER_SHOWN + 1)
    found = context.store.get_engrams([h.id for h in hits if h.id != engram.id])
    return [e for e in found if not e.superseded_by and e.created_at <= engram.created_at][:EARLIER_SHOWN]


def _prompt(engram: Engram, earlier: list[Engram], job: Job) -> str:
    prompt = ANALYZE_PROMPT.format(schema=json.dumps(Enrichment.model_json_schema()), content=engram.content)
    stored = _reference_time(engram, job)
    prompt += STORED_PROMPT.format(stored=stored.isoformat(timespec="seconds"))
    if earlier:
        listed = "\n".join(f"{e.id}: {e.content[:500]}" for e in earlier)
        prompt += EARLIER_PROMPT.format(earlier=listed)
    return prompt


def enrich_one(context: MemoryContext, job: Job, stopped: Any = None, quiet: Any = None) -> Outcome:
    """Analyse the memory of ``job`` with the model and land it, or record the failure.

    ``stopped()`` (optional) is asked after the model answers and before anything is written:
    a worker being shut down must not write into a store that is closing. ``quiet()``
    (optional) waits for a pause in foreground calls before the landing takes the write lock.
    """
    queue = AnalysisQueue(context.store)
    engram = context.store.get_engram(job.engram_id)
    if engram is None:  # forgotten meanwhile (forget drops the job too; this is a race)
        with context.write_lock:
            queue.finish(job.engram_id)
        return Outcome("gone", job.engram_id)
    model = context.analyst or context.llm
    if model is None:
        raise RuntimeError("no chat model is configured to analyse the queue")
    earlier = _earlier(context, engram)
    try:
        analysis = ask_structured(model, Enrichment, _prompt(engram, earlier, job))
    except Exception as error:  # any failure of the model counts an attempt; the memory stays
        if stopped is not None and stopped():  # shutting down: the job stays as it was
            return Outcome("stopped", job.engram_id)
        return _failed(context, queue, job, error)
    if quiet is not None:
        quiet()
    with context.write_lock:
        if stopped is not None and stopped():
            return Outcome("stopped", job.engram_id)
        with context.store.transaction():
            current = context.store.get_engram(job.engram_id)  # its tags may have been merged since
            if current is None:
                queue.finish(job.engram_id)
                return Outcome("gone", job.engram_id)
            _land(context, current, analysis, {e.id for e in earlier}, job)
            queue.finish(job.engram_id)
    return Outcome("landed", job.engram_id)


def _reference_time(engram: Engram, job: Job) -> datetime:
    """What relative times resolve against: the store time the job recorded, else (the caller
    gave the time, or an older job) the memory's own time."""
    if job.store_time:
        try:
            return datetime.fromisoformat(job.store_time)
        except ValueError:
            log.warning("analysis job of %s has a bad store_time %r", job.engram_id, job.store_time)
    return engram.created_at


def _new_time(analysis: Enrichment, job: Job, engram: Engram) -> datetime | None:
    """The time the model states, when it may become the memory's: the caller gave none, and
    it is not after the store (an event told cannot have happened later); else None."""
    if not job.store_time:
        return None
    stated = analysis.stated_time()
    if stated is None or stated > _reference_time(engram, job):
        return None
    return stated


def _land(context: MemoryContext, engram: Engram, analysis: Enrichment, shown: set[str], job: Job) -> None:
    """Replace the memory's analysis: summary, type and facts (and its time, see the module
    doc), then its cues and relations, relinked."""
    store = context.store
    data = analysis.model_dump()
    # The model's types replace those its cues were created with (the heuristic's, or another
    # memory's analysis): a stored cue keeps its type on upsert, so the first writer's guess
    # ("database-engineer": technology) would otherwise outlive the model's answer (agent).
    model_types = {cue["name"]: cue["type"] for cue in data["cues"]}
    if not data["cues"]:  # an empty answer is useless for recall: keep the offline cues
        from smriti.providers import heuristic

        data["cues"] = [c.model_dump() for c in heuristic.extract_cues(engram.content)]
    moment = _new_time(analysis, job, engram)
    if moment is not None:  # the date, as a cue like the dates the analysis names
        data["cues"].append({"name": moment.date().isoformat(), "type": "time"})
    store.take_back_links(engram.id)
    write_links(store, engram.id, data, engram.tags)
    store.set_cue_types(model_types)
    fields: dict[str, Any] = {
        "summary": data["summary"] or engram.summary,
        "memory_type": data["memory_type"],
        "facts": "\n".join(analysis.facts),  # replaced, never appended: a replay lands the same
    }
    if moment is not None:
        fields["created_at"] = moment
    store.update_engram(engram.id, **fields)
    named = [i for i in data.get("supersedes", []) if isinstance(i, str) and i in shown]
    found = detect(store, engram.id, engram.created_at, data["relations"])
    marked = mark_superseded(store, engram.id, [*named, *found])
    if marked:
        log.info("memory %s supersedes %s", engram.id, ", ".join(marked))


def _failed(context: MemoryContext, queue: AnalysisQueue, job: Job, error: Exception) -> Outcome:
    settings = context.settings
    now = context.clock()
    wait = retry_after(error, now)
    base, cap = settings.analysis_backoff_seconds, settings.analysis_backoff_max_seconds
    delay = wait if wait is not None else backoff(job.attempts + 1, base, cap)
    with context.write_lock:
        if context.store.get_engram(job.engram_id) is None:
            queue.finish(job.engram_id)
            return Outcome("gone", job.engram_id)
        retry_at = now + timedelta(seconds=delay)
        updated = queue.fail(job, describe(error), retry_at, settings.analysis_max_attempts)
    if updated.status == "failed":
        log.warning(
            "LLM analysis of memory %s parked after %d attempts: %s",
            job.engram_id,
            updated.attempts,
            updated.error,
        )
        return Outcome("parked", job.engram_id, updated.error, wait)
    log.info(
        "LLM analysis of memory %s failed (attempt %d, retry in %.0f s): %s",
        job.engram_id,
        updated.attempts,
        delay,
        updated.error,
    )
    return Outcome("retry", job.engram_id, updated.error, wait)
