"""``smriti import`` leaves the vector index built and saved for the next server."""

from __future__ import annotations

import json

import pytest

from smriti.cli.transfer import import_from
from smriti.memory import Memory
from smriti.providers.hashing import HashingEmbeddings


@pytest.fixture
def small_threshold(monkeypatch):
    import smriti.stores.sqlite.search as search

    monkeypatch.setattr(search, "ANN_THRESHOLD", 200)


def _records(path, count: int, dims: int) -> None:
    embedder = HashingEmbeddings(dims)
    with path.open("w") as out:
        for k in range(count):
            text = f"memory {k} about topic {k % 17} and place {k % 5}"
            record = {
                "kind": "engram",
                "id": f"m-{k:04d}",
                "content": text,
                "created_at": "2026-01-01T00:00:00+00:00",
                "last_accessed_at": "2026-01-01T00:00:00+00:00",
                "embedding": embedder.embed_query(text),
            }
            out.write(json.dumps(record) + "\n")


def test_import_builds_and_saves_the_vector_index(settings, tmp_path, small_threshold):
    path = tmp_path / "records.jsonl"
    _records(path, 300, settings.embedding_dims)
    with Memory.open(settings) as memory:
        assert import_from(memory, path) >= 300
        cache = memory.context.store.index.vectors
        assert cache.ann_ready  # built before import returned, not left to a later server
        assert cache.index_progress() == (300, 300)
    saved = settings.storage_location / "alice" / "memory.sqlite.vectors"
    assert saved.exists()
    with Memory.open(settings) as memory:
        store = memory.context.store
        store.warm()
        assert store.index.vectors.ann_ready  # opened from disk, no rebuild
        hits = store.vector_search(
            HashingEmbeddings(settings.embedding_dims).embed_query("memory 7 about topic 7"), 3
        )
        assert hits[0].id == "m-0007"


def test_a_small_import_builds_no_index(settings, tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    _records(path, 50, settings.embedding_dims)
    with Memory.open(settings) as memory:
        import_from(memory, path)
        assert not memory.context.store.index.vectors.ann_ready
    err = capsys.readouterr().err
    assert "imported 50/50" in err or "importing memories" in err
    assert "indexing" not in err and "vector index built" not in err  # no bar for nothing
    assert not (settings.storage_location / "alice" / "memory.sqlite.vectors").exists()
