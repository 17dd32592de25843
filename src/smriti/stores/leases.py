"""Locks one memory holds across processes: one consolidation at a time, whoever runs it.

Two consolidations of one memory at once (two HTTP workers, the server's timer and a
``smriti consolidate``, two ``smriti_manage`` calls) would both read the same decay watermark
and both multiply every strength by the decay since it: the stored value would be the
single-run value squared. A lease serialises them across every process that opens the memory:

* embedded stores (SQLite, Kuzu): an exclusive ``flock`` on a file beside the database
  (:func:`file_lease`; ``filelock``), released by the OS when its holder dies;
* shared stores (FalkorDB, Neo4j): a ``Lease`` node of the user, taken by one conditional
  ``MERGE`` (one query: atomic on either database) with an expiry that a heartbeat thread
  renews while it is held (:class:`GraphLease`), so a killed holder's lease lapses after
  :data:`LEASE_SECONDS` instead of blocking the memory for ever.

A second caller waits for the holder, up to a bound, and then runs: its decay starts from the
watermark the first one left, so nothing is decayed twice. Past the bound it gets
:class:`~smriti.errors.Busy` (one line: a consolidation is already running).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import filelock

from smriti.errors import Busy
from smriti.stores.paths import process_lock

LEASE_SECONDS = 60.0
"""How long a shared store's lease lasts without renewal (its holder renews it every third of it)."""
POLL_SECONDS = 0.1
"""How often a waiting caller asks a shared store for the lease again."""


def busy(name: str, waited: float) -> Busy:
    return Busy(
        f"a {name} of this memory is already running (in another process or worker) and did not "
        f"finish within {waited:g} s; this one did not start: try again when it is done"
    )


@contextmanager
def file_lease(path: Path, name: str, wait: float) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created 0600 beside the database) while inside.

    Waits up to ``wait`` seconds for another holder (another process, or another thread here:
    each call is its own holder).

    Raises:
        Busy: the lock was still held after ``wait`` seconds.
    """
    lock = process_lock(path)
    try:
        lock.acquire(timeout=wait)
    except filelock.Timeout:
        raise busy(name, wait) from None
    try:
        yield
    finally:
        lock.release()


class GraphLease:
    """A lease on a shared graph database: a node ``(:Lease {user, name, holder, until})``.

    ``take`` runs one statement that claims the node when it is free, expired or already ours,
    and returns whether it did; ``give_back`` deletes it if it is still ours. ``run(query,
    params)`` runs a statement with ``$user`` bound and returns its rows.
    """

    CLAIM = (
        "MERGE (l:Lease {user: $user, name: $name}) "
        "WITH l WHERE l.holder IS NULL OR l.holder = $holder OR l.until < $now "
        "SET l.holder = $holder, l.until = $until "
        "RETURN l.holder AS holder"
    )
    RELEASE = "MATCH (l:Lease {user: $user, name: $name}) WHERE l.holder = $holder DELETE l"

    def __init__(
        self,
        run: Callable[[str, dict[str, Any]], list[dict[str, Any]]],
        name: str,
        seconds: float = LEASE_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.run, self.name, self.seconds, self.clock = run, name, seconds, clock
        self.holder = uuid.uuid4().hex

    def take(self) -> bool:
        now = self.clock()
        params = {"name": self.name, "holder": self.holder, "now": now, "until": now + self.seconds}
        return bool(self.run(self.CLAIM, params))

    def give_back(self) -> None:
        self.run(self.RELEASE, {"name": self.name, "holder": self.holder})

    @contextmanager
    def held(self, wait: float) -> Iterator[None]:
        """Hold the lease while inside, renewed every third of its length.

        Raises:
            Busy: another holder kept it for ``wait`` seconds.
        """
        deadline = time.monotonic() + wait
        while not self.take():
            if time.monotonic() >= deadline:
                raise busy(self.name, wait)
            time.sleep(POLL_SECONDS)
        done = threading.Event()

        def renew() -> None:
            while not done.wait(self.seconds / 3):
                try:
                    self.take()
                except Exception:  # why: a missed renewal only shortens the lease; the work goes on
                    continue

        keeper = threading.Thread(target=renew, name=f"smriti-lease-{self.name}", daemon=True)
        keeper.start()
        try:
            yield
        finally:
            done.set()
            keeper.join()
            self.give_back()
