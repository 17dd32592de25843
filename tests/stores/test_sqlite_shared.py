"""SQLite opened shared (the HTTP workers of ``smriti-mcp --workers N``): the locks, and the caches
of one opener following another's commits through the change log (stores/sqlite/changes.py).

Two stores on one file here are two openers as two processes would be (separate connections,
separate caches, separate flocks); tests/test_workers.py runs the same through real processes.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

from smriti.stores.base import Cue, Engram, StoreError
from smriti.stores.sqlite import SqliteStore, open_sqlite
from smriti.stores.sqlite.schema import CHANGE_LOG_KEEP

DIMS = 16


@pytest.fixture
def cfg(settings):
    return settings.model_copy(update={"embedding_dims": DIMS, "db_type": "sqlite", "http_workers": 2})


@pytest.fixture
def pair(cfg):
    first, second = open_sqlite(cfg, "alice"), open_sqlite(cfg, "alice")
    yield first, second
    first.close()
    second.close()


def _vector(seed: int) -> list[float]:
    return np.random.default_rng(seed).standard_normal(DIMS).astype(np.float32).tolist()


def _engram(number: int, **fields) -> Engram:
    return Engram(id=f"e{number}", content=f"memory number {number}", embedding=_vector(number), **fields)


def _found(store: SqliteStore, number: int, k: int = 5) -> bool:
    return any(hit.id == f"e{number}" for hit in store.vector_search(_vector(number), k))


def test_workers_share_the_file_and_a_lone_server_cannot_join_them(cfg, settings):
    first = open_sqlite(cfg, "alice")
    second = open_sqlite(cfg, "alice")  # a second shared opener: allowed
    assert first.capabilities.shared and second.capabilities.shared
    lone = settings.model_copy(update={"embedding_dims": DIMS, "db_type": "sqlite"})
    with pytest.raises(StoreError, match="locked by another process"):
        open_sqlite(lone, "alice")  # a stdio/shared server or the CLI: exclusive, refused
    first.close()
    second.close()
    alone = open_sqlite(lone, "alice")
    assert not alone.capabilities.shared
    with pytest.raises(StoreError, match="must be its only user"):
        open_sqlite(cfg, "alice")  # and no worker beside the lone server
    alone.close()


def test_a_search_finds_what_the_other_opener_stored_and_not_what_it_forgot(pair):
    first, second = pair
    first.create_engrams([_engram(n) for n in range(20)])
    second.warm()  # the cache is loaded: later changes must reach it through the log
    first.create_engram(_engram(20))
    assert _found(second, 20)
    assert first.remove_engram("e3")
    assert not _found(second, 3, k=20)
    # Its own writes reach its own cache the same way (the commit hooks are off when shared).
    second.create_engram(_engram(21))
    assert _found(second, 21) and _found(first, 21)
    assert second.count_engrams() == first.count_engrams() == 21


def test_a_new_memory_type_and_embedding_reach_the_other_cache(pair):
    first, second = pair
    first.create_engrams([_engram(n) for n in range(5)])
    second.warm()
    first.update_engram("e1", memory_type="semantic")
    assert [hit.id for hit in second.vector_search(_vector(1), 5, "semantic")] == ["e1"]
    with first.transaction():  # a re-embedding writes the column directly
        first.db.write(
            "UPDATE engram SET embedding = ? WHERE id = 'e2'", (np.asarray(_vector(99), "<f4").tobytes(),)
        )
    assert second.vector_search(_vector(99), 1)[0].id == "e2"


def test_a_rolled_back_write_never_reaches_another_cache(pair):
    first, second = pair
    second.warm()
    with pytest.raises(RuntimeError), first.transaction():
        first.create_engram(_engram(7))
        # Inside the writer's transaction the other opener (and this one's caches) see nothing.
        assert not _found(second, 7) and not _found(first, 7)
        raise RuntimeError("rolled back")
    assert not _found(second, 7) and not _found(first, 7)


def test_a_cue_deleted_elsewhere_and_its_rowid_reused_is_not_read_from_the_cache(pair):
    first, second = pair
    first.create_engram(_engram(1))
    old = first.upsert_cue(Cue(name="kafka"))
    first.link_cue_ids("e1", [old.id])
    assert [cue.name for cue in second.recall_rows(["e1"])[0].cues] == ["kafka"]  # cached by rowid now
    first.unlink_engram("e1")
    assert first.delete_orphan_cues() == 1
    new = first.upsert_cue(Cue(name="pulsar"))  # takes the freed rowid
    first.link_cue_ids("e1", [new.id])
    assert [cue.name for cue in second.recall_rows(["e1"])[0].cues] == ["pulsar"]


def test_a_cue_retyped_elsewhere_is_read_with_its_new_type(pair):
    first, second = pair
    first.create_engram(_engram(1))
    cue = first.upsert_cue(Cue(name="ada lovelace", cue_type="concept"))
    first.link_cue_ids("e1", [cue.id])
    assert [c.cue_type for c in second.recall_rows(["e1"])[0].cues] == ["concept"]  # cached now
    first.set_cue_types({"ada lovelace": "person"})  # an LLM analysis landing in another worker
    assert [c.cue_type for c in second.recall_rows(["e1"])[0].cues] == ["person"]


def test_an_opener_further_behind_than_the_log_keeps_reloads_its_caches(pair, monkeypatch):
    first, second = pair
    first.create_engrams([_engram(n) for n in range(3)])
    second.warm()
    # More changes than the log keeps: rows past CHANGE_LOG_KEEP are trimmed by the trigger.
    with first.transaction():
        first.db.write(
            "INSERT INTO change_log (kind) SELECT 'cue' FROM json_each(?)",
            (str(list(range(CHANGE_LOG_KEEP + 1000))),),
        )
    first.create_engram(_engram(50))
    oldest = first.db.read("SELECT min(seq) FROM change_log")[0][0]
    assert oldest > second.index.feed.seen + 1  # what the second opener saw last is gone
    reloads = []
    monkeypatch.setattr(
        second.index.vectors,
        "invalidate",
        lambda real=second.index.vectors.invalidate: (reloads.append(1), real()),
    )
    assert _found(second, 50)
    assert reloads == [1]


def test_concurrent_stores_through_both_openers_lose_nothing(pair):
    first, second = pair

    def store_many(store: SqliteStore, offset: int) -> None:
        for number in range(offset, offset + 40):
            store.create_engram(_engram(number))

    threads = [threading.Thread(target=store_many, args=(s, o)) for s, o in ((first, 0), (second, 1000))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert first.count_engrams() == second.count_engrams() == 80
    for store in (first, second):
        assert all(_found(store, n) for n in (*range(40), *range(1000, 1040)))


def test_the_change_log_is_in_the_file_for_every_opener(settings):
    lone = open_sqlite(settings.model_copy(update={"embedding_dims": DIMS, "db_type": "sqlite"}), "alice")
    lone.create_engram(_engram(1))  # a lone server logs too: workers started later read on from here
    assert lone.db.read("SELECT kind, engram FROM change_log") == [("engram", "e1")]
    lone.close()
