"""Consolidation's forgetting and reinforcing steps: decay, prune, strengthen, orphan cues.

The decay model
---------------
A memory's ``decay_factor`` is its strength. Every access (recall's ``reinforce``, a
near-duplicate store) stamps ``last_accessed_at`` and raises the stored value; that stored
value is the ``base``, and from then on the strength falls exponentially::

    decay_factor(now) = base * 0.5 ** (days(now - last_accessed_at) / DECAY_HALF_LIFE_DAYS)

Consolidation runs many times between two accesses, and the store keeps only one number,
so each run applies just the decay of the time it has not yet accounted for. The store's
metadata keeps a watermark, ``consolidated_at`` (the ``now`` of the latest run), and a run
multiplies the stored value by::

    0.5 ** (days(now - max(last_accessed_at, consolidated_at)) / DECAY_HALF_LIFE_DAYS)

Exponentials compose (``0.5**a * 0.5**b == 0.5**(a+b)``), so any sequence of runs gives
exactly the closed form above, and a second run at the same ``now`` multiplies by 1: decay is
idempotent. (Decay between the last run and an access is forgiven by the access: the clock
restarts from the access, which is what reinforcement means.) A ``now`` earlier than the
watermark (a simulation going back in time) decays nothing and leaves the watermark as it is.

Strengthen follows the same rule: a frequently accessed memory (``access_count >=
STRENGTHEN_MIN_ACCESS``) gets ``+STRENGTHEN_BOOST`` once per consolidation period in which it
was used (``last_accessed_at`` after the previous watermark), so re-running consolidation
never pumps a memory back to full strength.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from smriti.nodes.state import ConsolidateState, MemoryContext, pause, traced
from smriti.stores.base import EngramState

if TYPE_CHECKING:
    from langgraph.runtime import Runtime

logger = logging.getLogger(__name__)

WATERMARK_KEY = "consolidated_at"
_SECONDS_PER_DAY = 86_400.0
# Floating-point noise from repeated multiplication must not count as a change (or a write).
_EPSILON = 1e-12


# ----------------------------------------------------------------------------- pure functions
def as_utc(value: datetime) -> datetime:
    """Treat naive datetimes (some backends drop the zone) as UTC, convert aware ones to UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def decayed(
    decay_factor: float,
    last_accessed_at: datetime,
    now: datetime,
    half_life_days: float,
    since: datetime | None = None,
) -> float:
    """The decay factor at ``now``, given the stored value and the decay already applied.

    ``decay = stored * 0.5 ** (max(0, days(now - max(last_accessed_at, since))) / half_life_days)``

    ``since`` is the previous consolidation watermark (None: never consolidated). With
    ``stored`` set at the last access this equals ``base * 0.5 ** (days since access / half_life)``
    whatever the number of intermediate runs, and decaying twice at the same ``now`` is a no-op.

    Args:
        decay_factor: the stored value, in [0, 1].
        last_accessed_at: the last access (or creation).
        now: the time to decay to.
        half_life_days: days for the factor to halve (> 0).
        since: time up to which decay was already applied.

    Returns:
        The new factor, clamped to [0, 1].
    """
    reference = as_utc(last_accessed_at)
    if since is not None:
        reference = max(reference, as_utc(since))
    days = max(0.0, (as_utc(now) - reference).total_seconds() / _SECONDS_PER_DAY)
    value = decay_factor * 0.5 ** (days / half_life_days)
    return min(1.0, max(0.0, value))


def should_prune(
    decay_factor: float, importance: float, prune_threshold: float, important_threshold: float
) -> bool:
    """``prune = decay_factor < prune_threshold and importance < important_threshold``.

    Important memories fade but are never deleted by consolidation (only by ``forget``).
    """
    return decay_factor < prune_threshold and importance < important_threshold


def strengthened(
    decay_factor: float,
    access_count: int,
    last_accessed_at: datetime,
    min_access: int,
    boost: float,
    since: datetime | None = None,
) -> float:
    """``min(1, decay_factor + boost)`` for a frequently used memory, else ``decay_factor``.

    Frequently used means ``access_count >= min_access`` and accessed after ``since`` (the
    previous consolidation watermark; None: every memory qualifies), so the boost is given
    once per period of use and consolidation stays idempotent.
    """
    if access_count < min_access:
        return decay_factor
    if since is not None and as_utc(last_accessed_at) <= as_utc(since):
        return decay_factor
    return min(1.0, decay_factor + boost)


# ----------------------------------------------------------------------------- helpers
def consolidation_time(state: Mapping[str, Any], runtime: Runtime[MemoryContext]) -> datetime:
    """``state["now"]`` (ISO, for simulations) if given, else the context clock, in UTC."""
    given = state.get("now")
    return as_utc(datetime.fromisoformat(given)) if given else as_utc(runtime.context.clock())


def read_watermark(context: MemoryContext) -> datetime | None:
    raw = context.store.get_meta(WATERMARK_KEY)
    if not raw:
        return None
    try:
        return as_utc(datetime.fromisoformat(raw))
    except ValueError:
        # A hand-edited or foreign value must not stop consolidation: decay from last access.
        logger.warning("ignoring unreadable %s metadata %r", WATERMARK_KEY, raw)
        return None


def _previous_watermark(state: Mapping[str, Any], context: MemoryContext) -> datetime | None:
    """The watermark as it was before this run's decay step moved it (the decay report keeps it)."""
    report = state.get("report") or {}
    if "decay_since" in report:
        since = report["decay_since"]
        return as_utc(datetime.fromisoformat(since)) if since else None
    return read_watermark(context)


# ----------------------------------------------------------------------------- nodes
# Engrams re-read and written per hold of the write lock: a recall's reinforcement waits for one
# chunk (a few ms), not for the whole pass (once ~0.5 s at 10k, seconds at 100k); between two
# chunks the pass pauses so that a waiting recall gets the lock (see nodes.state.pause).
CHUNK = 250


def update_in_chunks(
    context: MemoryContext, ids: Sequence[str], change: Callable[[EngramState], float | None]
) -> dict[str, float]:
    """Set ``decay_factor = change(state)`` (None: unchanged) for ``ids``, chunk by chunk;
    returns the values written, by engram id.

    Each chunk is re-read under the write lock and computed from what is stored then, so a
    recall that reinforced a memory since the caller's first look is never overwritten.
    """
    written: dict[str, float] = {}
    for start in range(0, len(ids), CHUNK):
        with context.write_lock:
            values: dict[str, float] = {}
            for engram in context.store.engram_states(ids[start : start + CHUNK]):
                value = change(engram)
                if value is not None:
                    values[engram.id] = value
            if values:
                context.store.update_engrams({i: {"decay_factor": v} for i, v in values.items()})
            written |= values
        pause()
    return written


@traced
def decay(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Exponential decay of every engram since its last access (idempotent, see the module doc)."""
    context = runtime.context
    now = consolidation_time(state, runtime)
    half_life = context.settings.decay_half_life_days
    since = read_watermark(context)

    def change(engram: EngramState) -> float | None:
        value = decayed(engram.decay_factor, engram.last_accessed_at, now, half_life, since)
        return value if abs(value - engram.decay_factor) > _EPSILON else None

    # A first look without the lock finds what may change; each chunk is then re-read under it.
    candidates = [engram.id for engram in context.store.engram_states() if change(engram) is not None]
    changed = len(update_in_chunks(context, candidates, change))
    with context.write_lock:
        if since is None or now > since:
            context.store.set_meta(WATERMARK_KEY, now.isoformat())
    return {
        "report": {
            "decayed": changed,
            "decay_since": since.isoformat() if since else None,
            "now": now.isoformat(),
        },
        "_notes": f"{changed} decayed since {since.isoformat() if since else 'last access'}",
    }


@traced
def prune(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Delete engrams whose decay factor fell below PRUNE_THRESHOLD, unless important."""
    context = runtime.context
    settings = context.settings

    def doomed_among(states: Sequence[EngramState]) -> list[EngramState]:
        return [
            engram
            for engram in states
            if should_prune(
                engram.decay_factor, engram.importance, settings.prune_threshold, settings.important_threshold
            )
        ]

    # The full read runs without the lock (a recall would wait for it); the few candidates are
    # read again under it, so one reinforced meanwhile is spared.
    candidates = [engram.id for engram in doomed_among(context.store.engram_states())]
    doomed: list[EngramState] = []
    deleted = 0
    for start in range(0, len(candidates), CHUNK):
        with context.write_lock:
            chunk = doomed_among(context.store.engram_states(candidates[start : start + CHUNK]))
            deleted += sum(1 for engram in chunk if context.store.delete_engram(engram.id))
        doomed += chunk
        pause()
    if deleted:
        logger.info("pruned %d weak memories of %s", deleted, context.store.user)
    return {
        "report": {"pruned": deleted},
        "_candidates": [{"id": e.id, "score": e.decay_factor} for e in doomed],
        "_notes": f"{deleted} pruned below {settings.prune_threshold}",
    }


@traced
def strengthen(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Frequently accessed engrams used since the previous consolidation get STRENGTHEN_BOOST."""
    context = runtime.context
    settings = context.settings
    since = _previous_watermark(state, context)

    def change(engram: EngramState) -> float | None:
        value = strengthened(
            engram.decay_factor,
            engram.access_count,
            engram.last_accessed_at,
            settings.strengthen_min_access,
            settings.strengthen_boost,
            since,
        )
        return value if value - engram.decay_factor > _EPSILON else None

    candidates = [engram.id for engram in context.store.engram_states() if change(engram) is not None]
    boosted = update_in_chunks(context, candidates, change)
    changed = len(boosted)
    return {
        "report": {"strengthened": changed},
        "_candidates": [{"id": key, "score": value} for key, value in boosted.items()],
        "_notes": f"{changed} strengthened (access_count >= {settings.strengthen_min_access})",
    }


@traced
def orphans(state: ConsolidateState, runtime: Runtime[MemoryContext]) -> dict[str, Any]:
    """Remove cues that no longer encode any engram (left behind by prune and forget)."""
    context = runtime.context
    with context.write_lock:
        removed = context.store.delete_orphan_cues()
    return {"report": {"orphan_cues_removed": removed}, "_notes": f"{removed} orphan cue(s) removed"}
