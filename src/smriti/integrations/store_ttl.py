"""Time-to-live of :class:`~smriti.integrations.langgraph_store.SmritiStore` items.

LangGraph's contract: ``put(..., ttl=minutes)`` (or the ``default_ttl`` of the store's ``ttl``
configuration) makes an item expire that many minutes after it was last written, or read when
``refresh_on_read`` (default True) or the read's ``refresh_ttl`` asks for it. Expired items are
invisible to ``get``, ``search`` and ``list_namespaces`` at once (``omit_expired``; Smriti's
default, since a key-value store that answers with expired items surprises; set it to False to
see them until the sweep), and ``sweep_ttl`` deletes them (engram included); a sweeper thread
runs it every ``sweep_interval_minutes``.

Times come from the memory's clock (``MemoryContext.clock``), the one ``created_at`` and
``updated_at`` come from, so simulations and tests that move the clock move expiry with it.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

logger = logging.getLogger(__name__)


def expiry(now: datetime, ttl_minutes: float | None) -> str | None:
    """The ISO time an item written or refreshed at ``now`` expires; None without a TTL."""
    if ttl_minutes is None:
        return None
    return (now + timedelta(minutes=float(ttl_minutes))).isoformat()


def is_expired(entry: Mapping[str, Any], now: datetime) -> bool:
    """Whether an item's index entry has passed its ``expires_at``."""
    expires_at = entry.get("expires_at")
    return isinstance(expires_at, str) and datetime.fromisoformat(expires_at) <= now


class Sweeper:
    """A daemon thread that calls ``sweep`` every ``interval_minutes`` until stopped."""

    def __init__(self, sweep: Callable[[], int], interval_minutes: float) -> None:
        if interval_minutes <= 0:
            raise ValueError(f"sweep_interval_minutes must be positive, got {interval_minutes}")
        self._sweep = sweep
        self._interval = interval_minutes * 60
        self._stop = threading.Event()
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, name="smriti-store-ttl-sweeper", daemon=True)

    def start(self) -> concurrent.futures.Future[None]:
        self.future.set_running_or_notify_cancel()
        self._thread.start()
        return self.future

    def _run(self) -> None:
        try:
            while not self._stop.wait(self._interval):
                try:
                    swept = self._sweep()
                except Exception:  # one failed sweep (a busy disk) must not end the sweeper
                    logger.exception("TTL sweep failed; retrying at the next interval")
                    continue
                if swept:
                    logger.debug("TTL sweep deleted %d expired store items", swept)
        finally:
            self.future.set_result(None)

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to stop; True when it ended within ``timeout`` seconds."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()
