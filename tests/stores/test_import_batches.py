"""A bulk import writes memories in batches, each one whole (with its cue links, relations and
associations) in one transaction; an interrupted import keeps the batches before it and
resumes when run again. Real SQLite files (the default backend's transactions)."""

from __future__ import annotations

import pytest

from smriti.config import Settings
from smriti.stores.base import Association, Engram, Relation
from smriti.stores.records import (
    association_record,
    encoded_by_record,
    engram_record,
    import_into,
    relation_record,
)
from smriti.stores.sqlite import open_sqlite

DIMS = 8
MEMORIES = 25


def export_of(count: int) -> list[dict]:
    """Records as an export lists them: every engram first, then the edges."""
    engrams = [Engram(content=f"memory number {i} about topic{i % 3}", id=f"m{i:03d}") for i in range(count)]
    for number, engram in enumerate(engrams):
        engram.embedding = [float((number + d) % 5) + 1.0 for d in range(DIMS)]
    records = [engram_record(e) for e in engrams]
    records += [encoded_by_record(e.id, name) for e in engrams for name in (f"topic{e.id[-1]}", "shared-cue")]
    records += [
        relation_record(Relation(f"person{i}", "likes", "tea", engram_id=e.id)) for i, e in enumerate(engrams)
    ]
    records += [
        association_record(Association(engrams[i].id, engrams[-1 - i].id, 0.5)) for i in range(count // 2)
    ]
    return records


@pytest.fixture
def store(tmp_path):
    settings = Settings(
        storage_location=tmp_path, accessing_user="alice", embedding_dims=DIMS, db_type="sqlite"
    )
    opened = open_sqlite(settings, "alice")
    yield opened
    opened.close()


def whole(store, engram_id: str) -> bool:
    return bool(store.cues_of([engram_id]).get(engram_id)) and bool(store.relations_of([engram_id]))


def test_progress_counts_memories_and_every_memory_is_whole(store):
    seen: list[int] = []
    applied = import_into(store, export_of(MEMORIES), on_memories=seen.append, batch_size=10)
    assert seen == [10, 10, 5]
    assert applied == len(export_of(MEMORIES))
    assert store.count_engrams() == MEMORIES
    assert all(whole(store, f"m{i:03d}") for i in range(MEMORIES))
    # associations across batches land with the later batch
    assert {a.target_id for a in store.neighbours(["m000"])} | {
        a.source_id for a in store.neighbours(["m000"])
    } >= {"m024"}


def test_an_interrupted_import_keeps_whole_batches_and_resumes(store, monkeypatch):
    records = export_of(MEMORIES)
    calls = {"n": 0}
    real = type(store).add_relations

    def failing_on_the_second_batch(self, relations, cue_type="keyword"):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # the user pressed Ctrl-C during the second batch
        return real(self, relations, cue_type)

    monkeypatch.setattr(type(store), "add_relations", failing_on_the_second_batch)
    with pytest.raises(KeyboardInterrupt):
        import_into(store, records, batch_size=10)
    present = [e.id for e in store.get_engrams([f"m{i:03d}" for i in range(MEMORIES)])]
    assert present == [f"m{i:03d}" for i in range(10)]  # the first batch, and nothing of the second
    assert all(whole(store, engram_id) for engram_id in present)

    monkeypatch.setattr(type(store), "add_relations", real)
    import_into(store, records, batch_size=10)  # run again: it resumes
    assert store.count_engrams() == MEMORIES
    assert all(whole(store, f"m{i:03d}") for i in range(MEMORIES))
    assert len(store.relations_of([f"m{i:03d}" for i in range(MEMORIES)])) == MEMORIES  # nothing doubled
