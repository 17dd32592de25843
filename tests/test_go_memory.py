"""A Go server user's memory (``memory.kuzu``/``memory.lbug`` without Smriti's ``Meta`` table,
``RelatesTo`` and newer columns) is never changed by a run that does not keep it, and never
without a copy first (issue 44). Real Kuzu files on tmp_path; the folder is hashed."""

from __future__ import annotations

import hashlib
from datetime import datetime
from pathlib import Path

import pytest

from smriti.config import Settings
from smriti.errors import EmbedderUnknown, EmbeddingMismatchError
from smriti.memory import Memory
from smriti.stores import recorded_embedding

GO_DIMS = 48  # the Go file's embedding width: not the offline embedders' 64 or MiniLM's 384


def go_memory(folder: Path, dims: int = GO_DIMS) -> Path:
    """A ``memory.kuzu`` laid out as the Go server leaves it: no Meta table, no RelatesTo, no
    cluster_id or edge created_at, two memories and an association."""
    import kuzu

    path = folder / "memory.kuzu"
    folder.mkdir(parents=True)
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    conn.execute(
        "CREATE NODE TABLE Engram(id STRING, content STRING, summary STRING, memory_type STRING, "
        "importance DOUBLE, access_count INT64, created_at TIMESTAMP, last_accessed_at TIMESTAMP, "
        f"decay_factor DOUBLE, embedding FLOAT[{dims}], source STRING, tags STRING, PRIMARY KEY (id))"
    )
    conn.execute(
        "CREATE NODE TABLE Cue(id STRING, name STRING, cue_type STRING, "
        f"embedding FLOAT[{dims}], PRIMARY KEY (id))"
    )
    conn.execute("CREATE REL TABLE EncodedBy(FROM Engram TO Cue)")
    conn.execute(
        "CREATE REL TABLE AssociatedWith(FROM Engram TO Engram, strength DOUBLE, relation_type STRING)"
    )
    for number, text in enumerate(("Priya moved search to pgvector.", "Omar runs the Go server.")):
        conn.execute(
            "CREATE (:Engram {id: $id, content: $text, summary: '', memory_type: 'semantic', "
            "importance: 0.6, access_count: 1, created_at: $t, last_accessed_at: $t, "
            "decay_factor: 0.9, embedding: $v, source: 'go', tags: ''})",
            {
                "id": f"go-{number}",
                "text": text,
                "t": datetime(2025, 3, 4, 5, 6, 7),
                "v": [0.1 * (number + 1)] * dims,
            },
        )
    conn.execute(
        "MATCH (a:Engram {id: 'go-0'}), (b:Engram {id: 'go-1'}) "
        "CREATE (a)-[:AssociatedWith {strength: 0.5, relation_type: 'similar'}]->(b)"
    )
    conn.close()
    db.close()
    return path


def folder_digest(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def settings_for(tmp_path: Path, **given: object) -> Settings:
    """Settings as a user gives them: only ``given`` is set (the rest are defaults)."""
    return Settings(
        storage_location=tmp_path / "smriti", accessing_user="omar", llm_provider="heuristic", **given
    )


def test_the_record_of_a_go_file_is_read_without_changing_it(tmp_path):
    folder = tmp_path / "smriti" / "omar"
    go_memory(folder)
    before = folder_digest(folder)
    recorded = recorded_embedding(settings_for(tmp_path))
    assert recorded is not None
    assert (recorded.model, recorded.dims, recorded.memories) == (None, GO_DIMS, 2)
    assert folder_digest(folder) == before


def test_a_refused_offline_run_leaves_the_go_file_byte_identical(tmp_path):
    """No key, nothing set: the file records no model, so the run asks for it and changes nothing
    (it used to add Meta, RelatesTo and two columns first, then refuse)."""
    folder = tmp_path / "smriti" / "omar"
    go_memory(folder)
    before = folder_digest(folder)
    for _ in range(2):
        with pytest.raises(EmbedderUnknown, match=r"holds 2 memories but records no embedding model \(48"):
            Memory.open(settings_for(tmp_path))
    assert folder_digest(folder) == before  # no migration, no backup copy


def test_a_refused_dimension_names_only_what_the_user_set(tmp_path):
    folder = tmp_path / "smriti" / "omar"
    go_memory(folder)
    before = folder_digest(folder)
    with pytest.raises(EmbeddingMismatchError) as chosen:
        Memory.open(settings_for(tmp_path, embedding_provider="minilm"))
    assert "48-dimensional" in str(chosen.value) and "EMBEDDING_PROVIDER=minilm makes 384" in str(
        chosen.value
    )
    assert "EMBEDDING_DIMS is" not in str(chosen.value)
    with pytest.raises(EmbeddingMismatchError) as dims:
        Memory.open(settings_for(tmp_path, embedding_provider="hashing", embedding_dims=64))
    assert "EMBEDDING_DIMS=64 is set" in str(dims.value)
    assert folder_digest(folder) == before


def test_a_kept_run_copies_the_go_file_before_migrating_it(tmp_path, caplog):
    folder = tmp_path / "smriti" / "omar"
    original = go_memory(folder)
    before = folder_digest(folder)
    settings = settings_for(tmp_path, embedding_provider="hashing", embedding_dims=GO_DIMS)
    with Memory.open(settings) as memory:
        assert {item["text"] for item in memory.recall("", mode="list")["results"]} >= {
            "Priya moved search to pgvector."
        }
        memory.store("Omar moved to Smriti in 2026.")
    copies = sorted(folder.glob("memory.kuzu.bak-*"))
    assert len(copies) == 1, sorted(p.name for p in folder.iterdir())
    assert hashlib.sha256(copies[0].read_bytes()).hexdigest() == before["memory.kuzu"]  # the original
    assert "copied to memory.kuzu.bak-" in caplog.text
    assert folder_digest(folder)["memory.kuzu"] != before["memory.kuzu"]  # migrated, and kept
    with Memory.open(settings) as again:  # migrated once: no second copy
        assert again.stats()["engrams"] == 3
    assert sorted(folder.glob("memory.kuzu.bak-*")) == copies
    assert original.exists()
