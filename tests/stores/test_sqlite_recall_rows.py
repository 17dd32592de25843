"""SqliteStore.recall_rows reads engrams and their cues in one statement (engram columns plus a
``group_concat`` of cue rowids): it must return what the two statements it replaced returned,
the same engrams in the same order with the same fields, vectors and cues (in the same order),
on a real store whose cues were deleted and whose rowids were reused."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from smriti.stores.base import Cue, Engram
from smriti.stores.sqlite import open_sqlite
from smriti.stores.sqlite.engrams import IDS, id_list
from smriti.stores.sqlite.schema import ENGRAM_SELECT, engram_from_row

DIMS = 8


def reference_rows(store, ids):
    """What recall_rows returned before: the engram rows, then the (engram id, cue) edges joined
    to the cue table, each engram's cues in the order the join read them."""
    rows = store.db.read(f"SELECT {ENGRAM_SELECT} FROM engram e WHERE e.id IN {IDS}", (id_list(ids),))
    found = {row[0]: engram_from_row(row) for row in rows}
    edges = store.db.read(
        "SELECT e.id, c.id, c.name, c.cue_type FROM engram e JOIN encoded_by x ON x.engram = e.rowid "
        f"JOIN cue c ON c.rowid = x.cue WHERE e.id IN {IDS}",
        (id_list(list(found)),),
    )
    cues: dict[str, list[tuple[str, str, str]]] = {}
    for engram_id, cue_id, name, cue_type in edges:
        cues.setdefault(engram_id, []).append((cue_id, name, cue_type or "keyword"))
    return [(found[i], cues.get(i, [])) for i in ids if i in found]


@pytest.fixture
def store(settings):
    opened = open_sqlite(settings.model_copy(update={"embedding_dims": DIMS}), "rows")
    yield opened
    opened.close()


def test_recall_rows_equal_the_two_statement_read_for_many_id_sets(store):
    rng = random.Random(7)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    engrams = [
        Engram(
            id=f"e{i:03d}",
            content=f"memory {i}",
            summary=f"s{i}",
            importance=rng.random(),
            access_count=i % 5,
            created_at=start + timedelta(hours=i),
            last_accessed_at=start + timedelta(hours=2 * i),
            embedding=None if i % 9 == 0 else [rng.uniform(-1, 1) for _ in range(DIMS)],
            source=f"src{i % 4}",
            tags="a,b" if i % 3 else "",
            cluster_id=i % 6 - 1,
            facts="one fact\nanother" if i % 4 == 0 else "",
        )
        for i in range(60)
    ]
    store.create_engrams(engrams)
    names = [f"cue-{j}" for j in range(40)]
    cues = store.upsert_cues(
        [Cue(name=n, cue_type="person" if j % 5 == 0 else "keyword") for j, n in enumerate(names)]
    )
    links = {e.id: [c.id for c in rng.sample(cues, rng.randint(0, 12))] for e in engrams if e.id != "e007"}
    store.link_many(links)
    store.recall_rows([e.id for e in engrams])  # fill the cue cache, then delete cues and reuse rowids
    for engram_id in ("e010", "e011"):
        store.unlink_engram(engram_id)
    store.delete_orphan_cues()
    fresh = store.upsert_cues([Cue(name=f"new-{j}", cue_type="place") for j in range(5)])
    store.link_many({"e010": [c.id for c in fresh], "e012": [fresh[0].id]})

    everything = [e.id for e in engrams]
    id_sets = [everything, ["e007", "e010", "nope", "e003", "e003"], []]
    id_sets += [rng.sample(everything, rng.randint(1, 60)) for _ in range(50)]
    for ids in id_sets:
        got = store.recall_rows(ids)
        want = reference_rows(store, ids)
        assert [row.engram.id for row in got] == [engram.id for engram, _ in want]
        for row, (engram, engram_cues) in zip(got, want, strict=True):
            assert row.engram == dataclasses.replace(engram, embedding=None)
            embedding = engram.embedding
            if embedding is None:
                assert row.vector is None
            else:
                assert row.vector.dtype == np.float32 and row.vector.tolist() == embedding
            assert [(c.id, c.name, c.cue_type) for c in row.cues] == engram_cues
    assert any(row.cues for row in store.recall_rows(everything))
