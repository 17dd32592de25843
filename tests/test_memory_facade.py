"""Store and recall are written once for every memory (issue 38, item 6): ``Memory`` and the
CLI's ``SharedMemory`` inherit them from ``MemoryFacade`` instead of copying them by hand."""

from __future__ import annotations

from datetime import datetime

import pytest

from smriti.cli.shared import SharedMemory
from smriti.errors import InvalidInput
from smriti.facade import MemoryFacade
from smriti.memory import Memory
from smriti.server.shared.client import shared_paths


def test_one_definition_of_store_and_recall():
    for name in ("store", "recall"):
        assert getattr(Memory, name) is getattr(MemoryFacade, name)
        assert getattr(SharedMemory, name) is getattr(MemoryFacade, name)
    assert "store" not in vars(Memory) and "recall" not in vars(SharedMemory)


def test_the_shared_memory_checks_a_request_with_its_settings_before_asking_the_server(settings):
    # No shared server runs on these paths: a request that reached it would fail to connect.
    memory = SharedMemory(shared_paths(settings), settings.model_copy(update={"max_content_chars": 10}))
    with pytest.raises(InvalidInput, match="content"):
        memory.store("a memory longer than ten characters")
    with pytest.raises(InvalidInput, match="limit"):
        memory.recall("billing", limit=settings.memory_fabric_max_results + 1)
    with pytest.raises(InvalidInput, match="created_at"):
        memory.store("short", created_at=datetime(2020, 1, 1))
