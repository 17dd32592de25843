"""Every backend's ``exclusive`` lock (stores/leases.py): one holder at a time, a bounded wait, Busy after it.

Each ``exclusive`` call is its own holder (a file lock's own descriptor, a graph lease's own
token), as another process is, so one store shows what two processes would see; the
cross-process runs are ``tests/test_consolidation_lock.py``.
"""

from __future__ import annotations

import threading
import time

import pytest

from smriti.errors import Busy
from smriti.stores.leases import GraphLease


def test_a_second_holder_waits_then_gives_up_with_busy(store) -> None:
    with store.exclusive("consolidation", wait=0):
        started = time.monotonic()
        with pytest.raises(Busy, match="already running"), store.exclusive("consolidation", wait=0.3):
            pass
        assert time.monotonic() - started >= 0.3  # it waited its bound before giving up
        with store.exclusive("other-work", wait=0):  # another name is another lock
            pass
    with store.exclusive("consolidation", wait=0):  # free again once released
        pass


def test_a_waiting_holder_runs_once_the_first_is_done(store) -> None:
    order: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with store.exclusive("consolidation", wait=0):
            first_in.set()
            time.sleep(0.3)  # the work the second one waits for
            order.append("first done")

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(30)
    with store.exclusive("consolidation", wait=30):
        order.append("second in")
    thread.join()
    assert order == ["first done", "second in"]


def test_a_graph_lease_of_a_dead_holder_lapses(falkor) -> None:
    """A holder killed without giving the lease back blocks the memory for its length only."""
    _, _, _, open_store = falkor
    store = open_store("alice")

    def run(query, params):
        return store.graph.q(query, **params)

    dead = GraphLease(run, "consolidation", seconds=0.5)
    assert dead.take()  # and never given back, never renewed
    alive = GraphLease(run, "consolidation", seconds=30)
    assert not alive.take()
    with alive.held(wait=30):  # waits for the expiry, then holds it
        assert not dead.take()
    assert dead.take()  # given back: free


def test_a_held_graph_lease_is_renewed(falkor) -> None:
    """The keeper thread moves the expiry on while the lease is held (a shared clock, moved by hand)."""
    _, _, _, open_store = falkor
    store = open_store("alice")
    now = [1_000.0]

    def run(query, params):
        return store.graph.q(query, **params)

    def until() -> float:
        rows = store.graph.q("MATCH (l:Lease {user: $user, name: 'consolidation'}) RETURN l.until AS until")
        return float(rows[0]["until"])

    holder = GraphLease(run, "consolidation", seconds=0.6, clock=lambda: now[0])
    other = GraphLease(run, "consolidation", seconds=0.6, clock=lambda: now[0])
    with holder.held(wait=0):
        assert until() == pytest.approx(1_000.6)
        now[0] = 1_000.5  # not yet lapsed; the keeper's next renewal counts from here
        deadline = time.monotonic() + 60
        while until() < 1_001.0:
            assert time.monotonic() < deadline, "the lease was never renewed"
            time.sleep(0.05)
        now[0] = 1_000.9  # past the first expiry, inside the renewed one
        assert not other.take()
    assert other.take()  # given back
