"""Store and recall are written once for every memory (issue 38, item 6): ``Memory`` inherits
them from ``MemoryFacade``. The CLI's ``SharedMemory`` checks nothing itself since issue 44 (it
would need the settings, which cost most of a command): it sends the request as given and the
shared server's tools check it with the same validators (tests/test_cli_shared.py)."""

from __future__ import annotations

from smriti.cli.shared import SharedMemory
from smriti.facade import MemoryFacade
from smriti.memory import Memory
from smriti.server.shared.client import shared_paths


def test_one_definition_of_store_and_recall():
    for name in ("store", "recall"):
        assert getattr(Memory, name) is getattr(MemoryFacade, name)
    assert "store" not in vars(Memory) and "recall" not in vars(Memory)
    assert not issubclass(SharedMemory, MemoryFacade)  # no second copy of the checks


def test_the_shared_memory_sends_a_request_as_given(settings, monkeypatch):
    """Unchecked here (the server checks it), empty fields left out as a client leaves them."""
    memory = SharedMemory(shared_paths(settings))
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(memory, "tool", lambda name, arguments: sent.append((name, arguments)) or {})
    memory.store("x" * 100_000, importance=0.5, tags="", source="cli")
    memory.recall(query="billing", limit=10_000, memory_type=None)
    assert sent == [
        ("smriti_store", {"content": "x" * 100_000, "importance": 0.5, "source": "cli"}),
        ("smriti_recall", {"query": "billing", "limit": 10_000}),
    ]
