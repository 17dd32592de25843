"""The Kuzu store's in-memory copies never drift from the file: the Engram rows
(stores/kuzu/rows.py) and the number of engrams each cue encodes.

A seeded random walk of every write the store offers runs against a real Kuzu file; after
each step the cached reads must equal a direct read of the database, embeddings bit for bit.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from smriti.config import Settings
from smriti.stores.base import Cue, Engram
from smriti.stores.kuzu import KuzuStore, open_kuzu, schema

DIMS = 64  # the settings fixture's EMBEDDING_DIMS
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(settings: Settings):
    opened = open_kuzu(settings, "alice")
    yield opened
    opened.close()


def table(store: KuzuStore) -> dict[str, Engram]:
    """Every engram as the database returns it, bypassing the caches."""
    rows = store.db.run(f"MATCH (e:Engram) RETURN {schema.ENGRAM_RETURN}")
    return {engram.id: engram for engram in map(schema.engram_from_row, rows)}


def link_counts(store: KuzuStore) -> dict[str, int]:
    """Engrams per cue name, counted by the database (cues without links count 0)."""
    rows = store.db.run("MATCH (c:Cue) OPTIONAL MATCH (c)<-[:EncodedBy]-(e:Engram) RETURN c.name, count(e)")
    return {name: int(count) for name, count in rows}


CUE_NAMES = [f"cue-{i}" for i in range(8)]


def new_engram(rng: random.Random, number: int) -> Engram:
    embedding = None if number % 5 == 0 else np.random.default_rng(number).normal(size=DIMS).tolist()
    when = T0 + timedelta(minutes=rng.randint(0, 10_000), microseconds=rng.randint(0, 999_999))
    return Engram(
        id=f"e{number:03d}",
        content=f"memory number {number} about topic {number % 7}",
        importance=rng.random(),
        created_at=when,
        last_accessed_at=when,
        embedding=embedding,
        tags="t1,t2" if number % 3 else "",
    )


def random_fields(rng: random.Random) -> dict:
    choices = {
        "importance": lambda: rng.random(),
        "decay_factor": lambda: rng.random(),
        "cluster_id": lambda: rng.randint(-1, 5),
        "access_count": lambda: rng.randint(0, 9),
        "last_accessed_at": lambda: T0 + timedelta(days=rng.randint(0, 90), microseconds=rng.randint(0, 999)),
        "tags": lambda: rng.choice(["", "ops", "ops,db"]),
        "summary": lambda: rng.choice(["", "a summary", "another"]),
        "memory_type": lambda: rng.choice(["episodic", "semantic", "procedural"]),
        "content": lambda: f"rewritten {rng.random():.6f}",
    }
    names = rng.sample(sorted(choices), rng.randint(1, 3))
    return {name: choices[name]() for name in names}


def test_cached_rows_follow_every_write(store: KuzuStore) -> None:
    rng = random.Random(11)
    for number in range(12):
        store.create_engram(new_engram(rng, number))
    store.link_cues("e001", [Cue(name=CUE_NAMES[0])])
    store.vector_search(np.ones(DIMS).tolist(), 3)  # the first vector search loads the caches
    assert store.rows.loaded and len(store.rows) == 12
    assert store.cue_engram_counts([CUE_NAMES[0]]) == {CUE_NAMES[0]: 1}  # loads the link counts
    created = 12
    for step in range(160):
        ids = sorted(table(store))
        action = rng.choice(["create", "update", "batch", "reinforce", "delete", "link", "link_one"])
        if action == "create" or not ids:
            store.create_engram(new_engram(rng, created))
            created += 1
        elif action == "update":
            store.update_engram(rng.choice(ids), **random_fields(rng))
        elif action == "batch":  # more than four rows takes the UNWIND path
            fields = random_fields(rng)
            store.update_engrams({i: fields for i in rng.sample(ids, min(len(ids), 6))} | {"ghost": fields})
        elif action == "reinforce":
            at = T0 + timedelta(days=step, microseconds=step)
            store.reinforce([*rng.sample(ids, min(len(ids), 4)), "ghost"], at, 0.15)
        elif action == "link":
            store.link_cues(rng.choice(ids), [Cue(name=n) for n in rng.sample(CUE_NAMES, 3)])
        elif action == "link_one":
            store.link_cue(rng.choice(ids), store.upsert_cue(Cue(name=rng.choice(CUE_NAMES))).id)
        else:
            store.delete_engram(rng.choice(ids))
        assert store.cue_engram_counts([*CUE_NAMES, "no-such-cue"]) == link_counts(store), f"step {step}"
        expected = table(store)
        asked = [*sorted(expected), "ghost"]
        assert {e.id: e for e in store.get_engrams(asked)} == expected, f"step {step}: {action}"
        assert store.cluster_ids(asked) == {i: e.cluster_id for i, e in expected.items()}
    assert store.rows.loaded, "the walk ran against the cache"
    assert store.get_engram("ghost") is None


def test_cached_engrams_are_copies(store: KuzuStore) -> None:
    store.create_engram(new_engram(random.Random(1), 1))
    store.vector_search(np.ones(DIMS).tolist(), 1)
    first = store.get_engram("e001")
    first.importance = 0.0
    first.embedding[0] = 123.0
    again = store.get_engram("e001")
    assert again.importance != 0.0 and again.embedding[0] != 123.0


def test_connection_transaction_commits_or_rolls_back(store: KuzuStore) -> None:
    """The Connection's transaction() is one unit: all of it lands, or none (nested uses join)."""
    set_meta = "MERGE (m:Meta {key: $key}) SET m.value = $value"
    with store.db.transaction():
        store.db.run(set_meta, {"key": "a", "value": "1"})
        with store.db.transaction():
            store.db.run(set_meta, {"key": "b", "value": "2"})
    with pytest.raises(RuntimeError), store.db.transaction():
        store.db.run(set_meta, {"key": "c", "value": "3"})
        raise RuntimeError("abort")
    assert [store.get_meta(key) for key in "abc"] == ["1", "2", None]
    queries = store.db.queries
    store.get_meta("a")
    assert store.db.queries == queries + 1 and store.db.seconds > 0
