"""runtime.OpeningEarly: a server opens its user's store, and loads its caches, in a thread while
it imports the rest of itself; the lifespan takes the runtime, or the error opening it raised."""

from __future__ import annotations

import threading

import pytest

from smriti import runtime as runtime_module
from smriti.errors import StoreError
from smriti.memory import Memory
from smriti.runtime import OpeningEarly, close_runtime


def test_the_runtime_opened_early_serves_and_its_caches_load_in_the_background(settings, monkeypatch):
    with Memory.open(settings) as memory:
        stored = memory.store("Priya moved the billing service to Postgres in March.")
    warmed = threading.Event()
    original = Memory.warm
    monkeypatch.setattr(Memory, "warm", lambda self: (original(self), warmed.set())[0])
    opening = OpeningEarly(settings)
    runtime = opening.take()
    try:
        assert warmed.wait(30), "the caches were not loaded after the store opened"
        found = runtime.memory.recall("Who moved billing to Postgres?", limit=3)
        assert found["results"][0]["id"] == stored["id"]
        assert opening.take() is runtime  # the lifespan may ask again: the same runtime
    finally:
        close_runtime(runtime, final_sync=False)


def test_a_store_that_cannot_open_fails_the_take_with_its_own_error(settings, monkeypatch):
    def locked(settings, user=None, with_backup=True):
        raise StoreError("the database memory.sqlite is locked by another process")

    monkeypatch.setattr(runtime_module, "open_runtime", locked)
    opening = OpeningEarly(settings)
    with pytest.raises(StoreError, match="locked by another process"):
        opening.take()


def test_a_failed_warm_up_leaves_the_runtime_serving(settings, monkeypatch):
    def broken(self):
        raise RuntimeError("cache load failed")

    monkeypatch.setattr(Memory, "warm", broken)
    runtime = OpeningEarly(settings).take()
    try:
        stored = runtime.memory.store("Grace prefers tabs over spaces.")
        assert runtime.memory.recall("tabs", limit=1)["results"][0]["id"] == stored["id"]
    finally:
        close_runtime(runtime, final_sync=False)
