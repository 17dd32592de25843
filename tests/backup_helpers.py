"""Shared pieces of the backup tests: settings, a filled memory and a full picture of a store."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from smriti.config import Settings
from smriti.stores.backup import RetryPolicy
from smriti.stores.records import LOCAL_META_KEYS

# Milliseconds of backoff: the retry path is exercised without slowing the suite down.
FAST_RETRY = RetryPolicy(attempts=3, initial_delay=0.01, max_delay=0.02)

MEMORIES = [
    "Alice prefers PostgreSQL with pgvector for retrieval augmented generation projects.",
    "The deploy pipeline for project Atlas runs on GitHub Actions every night at 02:00 UTC.",
    "Bob recommends cursor-based pagination for the orders API because offsets get slow.",
    "Alice and Bob moved the Atlas database to PostgreSQL 16 last spring.",
    "Cursor-based pagination keeps the Atlas orders API fast for large customers.",
    "GitHub Actions caches the Python wheels of project Atlas between nightly runs.",
]


def with_settings(settings: Settings, **changes: Any) -> Settings:
    """A validated copy of ``settings`` (so missing backup settings still fail like in production)."""
    return Settings.model_validate({**settings.model_dump(), **changes})


def fill(memory: Any, texts: list[str] = MEMORIES) -> list[str]:
    """Store ``texts`` and give some engrams distinct cluster ids; returns the engram ids."""
    ids = [memory.store(text, importance=0.6, tags="backup,test", source="tests")["id"] for text in texts]
    store = memory.context.store
    for position, engram_id in enumerate(ids):
        store.update_engram(engram_id, cluster_id=position % 3)
    return ids


def picture(store: Any) -> dict[str, Any]:
    """Everything a round trip must keep, read through the store's own API and its export."""
    records = [
        record
        for record in store.export_records()
        if not (record["kind"] == "meta" and record["key"] in LOCAL_META_KEYS)
    ]
    ids = sorted(record["id"] for record in records if record["kind"] == "engram")
    engrams = {engram.id: asdict(engram) for engram in store.get_engrams(ids)}
    cues = {name: sorted(cue.name for cue in found) for name, found in store.cues_of(ids).items()}
    return {
        "records": records,
        "engrams": engrams,
        "cues_of": cues,
        "associations": sorted(
            (a.source_id, a.target_id, a.strength, a.relation_type) for a in store.all_associations()
        ),
        "relations": sorted((r.source, r.relation, r.target, r.engram_id) for r in store.relations_of(ids)),
    }


def assert_same_memory(before: dict[str, Any], after: dict[str, Any]) -> None:
    """Engrams (embeddings and cluster ids included), cues and every edge kind are equal."""
    assert after["engrams"].keys() == before["engrams"].keys()
    for engram_id, engram in before["engrams"].items():
        restored = after["engrams"][engram_id]
        assert restored["embedding"] == engram["embedding"], engram_id
        assert restored["cluster_id"] == engram["cluster_id"], engram_id
        assert restored == engram, engram_id
    for key in ("cues_of", "associations", "relations", "records"):
        assert after[key] == before[key], key
    kinds = {record["kind"] for record in before["records"]}
    # The memory under test really has every kind of node and edge, or the comparison proves little.
    assert {"engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to"} <= kinds, kinds


def leftovers(folder: Path) -> list[str]:
    """Temporary snapshot files a sync or restore must never leave behind."""
    return sorted(path.name for path in folder.glob(".backup-*"))


def export_dies_half_way(store: Any, monkeypatch: Any, after: int) -> None:
    """Make ``store.export_records`` raise OSError after ``after`` records (an interrupted sync)."""
    real_export = store.export_records

    def dies_half_way():
        for number, record in enumerate(real_export()):
            if number == after:
                raise OSError("disk full")
            yield record

    monkeypatch.setattr(store, "export_records", dies_half_way)
