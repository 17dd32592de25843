"""FalkorDB going away during a store: a classified error, nothing half-written, and a store
that waits for a server coming back within FALKOR_FAILOVER_SECONDS (issue 42).

A real FalkorDB process (appendonly, appendfsync always) is killed -9 right before the Nth
FalkorDB call of a store, for every N: each failed store raises a Smriti StoreError whose one
line says FalkorDB is unreachable (never ``internal error (ConnectionError ...)``), and once the
server is back the memory is as before the store (no engram, no engram without its cues) and
the same store succeeds. With a longer FALKOR_FAILOVER_SECONDS the store instead waits: the
server killed before its first read, or before its write batch, and restarted meanwhile, the
store is acknowledged and whole.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any

import pytest

from smriti.errors import OperationError, StoreError
from smriti.memory import Memory
from smriti.server.app import public_failure
from tests.falkor_processes import FalkorProcess

TEXT = "Bob moved the billing service to kafka topic invoices after the outage review"


@pytest.fixture
def server(tmp_path):
    process = FalkorProcess(tmp_path / "falkor")
    try:
        yield process
    finally:
        process.stop()


def _open(settings, server: FalkorProcess, failover_seconds: float) -> Memory:
    cfg = settings.model_copy(
        update={
            "db_type": "falkordb",
            "falkor_addr": server.address,
            "falkor_isolation": "graph",
            "falkor_failover_seconds": failover_seconds,
            "log_level": "ERROR",
        }
    )
    return Memory.open(cfg, user="alice")


class CallHook:
    """Counts the store's FalkorDB calls (each query and the write batch) and runs ``action``
    right before call number ``at`` (1-based; 0: never)."""

    def __init__(self, connection: Any, action: Callable[[], None]) -> None:
        self.calls = 0
        self.at = 0
        self.action = action
        self.names: list[str] = []
        for name in ("run", "run_atomically"):
            original = getattr(connection, name)
            setattr(connection, name, self._wrap(name, original))

    def _wrap(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def hooked(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.names.append(name)
            if self.calls == self.at:
                self.action()
            return original(*args, **kwargs)

        return hooked


def _whole(memory: Memory) -> tuple[int, list[str]]:
    store = memory.context.store
    return store.count_engrams(), store.uncued_engram_ids()


def test_falkordb_killed_before_each_call_of_a_store(server, settings):
    memory = _open(settings, server, failover_seconds=0.2)
    try:
        memory.store("Alice keeps the deploy runbook in the ops wiki", source="chat")
        hook = CallHook(memory.context.store.connection, server.kill)
        memory.store("Carol reviews the grafana dashboards every monday", source="chat")
        steps = hook.calls
        assert steps >= 3 and "run_atomically" in hook.names, hook.names
        for step in range(1, steps + 1):
            before = _whole(memory)
            hook.calls, hook.names, hook.at = 0, [], step
            with pytest.raises(StoreError) as raised:
                memory.store(TEXT, source="chat")
            message = str(raised.value)
            assert isinstance(raised.value, OperationError)
            assert "\n" not in message and "unreachable" in message, f"step {step}: {message}"
            assert "internal error" not in public_failure("store", raised.value)
            hook.at = 0
            server.start()
            assert _whole(memory) == before, f"step {step}: the failed store wrote something"
        assert memory.store(TEXT, source="chat")["deduplicated"] is False
        count, uncued = _whole(memory)
        assert count == before[0] + 1 and not uncued
    finally:
        memory.close()


class RetrySeen(logging.Handler):
    """Set once falkor_exec logs that a call was not applied and is retried."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "retrying" in record.getMessage():
            self.seen.set()


@pytest.mark.parametrize("phase", ["first read", "write batch"])
def test_a_store_waits_for_the_server_to_come_back(server, settings, phase):
    memory = _open(settings, server, failover_seconds=60)
    watcher = RetrySeen()
    logger = logging.getLogger("smriti.stores.cypher.falkor_exec")
    level = logger.level
    logger.addHandler(watcher)
    logger.setLevel(logging.INFO)
    try:
        memory.store("Alice keeps the deploy runbook in the ops wiki", source="chat")
        hook = CallHook(memory.context.store.connection, server.kill)
        memory.store("Carol reviews the grafana dashboards every monday", source="chat")
        hook.at = 1 if phase == "first read" else hook.names.index("run_atomically") + 1
        hook.calls, hook.names = 0, []
        outcome: dict[str, Any] = {}

        def store() -> None:
            try:
                outcome["result"] = memory.store(TEXT, source="chat")
            except Exception as error:  # reported below
                outcome["error"] = error

        storing = threading.Thread(target=store)
        storing.start()
        assert watcher.seen.wait(60), "the store did not retry against the dead server"
        assert storing.is_alive(), outcome
        server.start()
        storing.join(90)
        assert "result" in outcome, outcome
        hook.at = 0
        stored = memory.context.store.get_engrams([outcome["result"]["id"]])
        assert [engram.content for engram in stored] == [TEXT]
        assert not memory.context.store.uncued_engram_ids()
    finally:
        logger.removeHandler(watcher)
        logger.setLevel(level)
        memory.close()


def test_falkordb_killed_after_the_batch_was_sent(server, settings, monkeypatch):
    """Killed once the write batch is on the wire, before it answered (stopped, the batch sent,
    then killed -9): the store fails saying it may be written, never "refused" nor "internal
    error"; once the server is back the memory is whole or absent, and the store retried leaves
    one whole memory."""
    from redis.connection import AbstractConnection

    memory = _open(settings, server, failover_seconds=0.2)
    try:
        memory.store("Alice keeps the deploy runbook in the ops wiki", source="chat")
        before = memory.context.store.count_engrams()
        send = AbstractConnection.send_packed_command
        armed = threading.Event()
        armed.set()

        def send_then_kill(self, command, check_health=True):
            chunks = command if isinstance(command, list | tuple) else [command]
            batch = armed.is_set() and any(b"EXEC" in bytes(chunk) for chunk in chunks)
            if batch:
                armed.clear()
                assert server.process is not None
                os.kill(server.process.pid, signal.SIGSTOP)  # it receives, it cannot answer
            send(self, command, check_health)
            if batch:
                server.kill()

        monkeypatch.setattr(AbstractConnection, "send_packed_command", send_then_kill)
        with pytest.raises(StoreError) as raised:
            memory.store(TEXT, source="chat")
        assert "may or may not be written" in str(raised.value), str(raised.value)
        assert "internal error" not in public_failure("store", raised.value)
        monkeypatch.undo()
        server.start()
        count, uncued = _whole(memory)
        assert count in (before, before + 1) and not uncued
        memory.store(TEXT, source="chat")  # stored, or deduplicated into the whole memory
        count, uncued = _whole(memory)
        assert count == before + 1 and not uncued
    finally:
        memory.close()
