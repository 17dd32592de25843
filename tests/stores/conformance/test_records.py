"""The records part on every backend (see conftest.BACKENDS): an export imported into a fresh
store is the same memory, and importing it again changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from smriti.stores.base import Association, Cue, Relation
from smriti.stores.records import LOCAL_META_KEYS, import_into
from tests.stores.conformance.data import T0, engram, vec

pytestmark = pytest.mark.records


def _populate(store) -> None:
    store.set_meta("embedding_model", "test-model")
    for i in range(4):
        store.create_engram(
            engram(f"p{i}", f"portable memory {i}", embedding=vec(200 + i), cluster_id=i % 2, tags="t")
        )
    python = store.upsert_cue(Cue(name="python", cue_type="technology", embedding=vec(300)))
    sql = store.upsert_cue(Cue(name="sql"))
    for eid in ("p0", "p1"):
        store.link_cue(eid, python.id)
    store.link_cue("p2", sql.id)
    store.associate(Association("p0", "p1", 0.8, created_at=T0))
    store.associate(Association("p2", "p0", 0.3, relation_type="session", created_at=T0))
    store.add_cooccurrence("python", "sql", 2.0)
    store.add_relation(Relation("python", "queries", "sql", engram_id="p2", created_at=T0))


def _comparable(records: list[dict]) -> list[tuple]:
    """Records as sortable tuples; embeddings compared separately (float32 storage)."""
    out = []
    for record in records:
        if record["kind"] == "meta" and record["key"] in LOCAL_META_KEYS:
            continue  # describes the physical store, not the memories
        item = dict(record)
        item.pop("embedding", None)
        for key in ("created_at", "last_accessed_at"):
            if key in item:
                item[key] = datetime.fromisoformat(item[key]).astimezone(UTC)
        if "strength" in item:
            item["strength"] = round(float(item["strength"]), 5)
        for key in ("importance", "decay_factor"):
            if key in item:
                item[key] = round(float(item[key]), 9)
        out.append(tuple(sorted(item.items())))
    return sorted(out, key=repr)


def _embeddings(records: list[dict]) -> dict[tuple[str, str], list[float] | None]:
    return {
        (r["kind"], r.get("id", "")): r.get("embedding") for r in records if r["kind"] in ("engram", "cue")
    }


def test_export_then_import_into_a_fresh_store_round_trips(backend):
    source = backend.open("alice")
    _populate(source)
    exported = list(source.export_records())
    kinds = [r["kind"] for r in exported]
    assert kinds == sorted(
        kinds, key=["meta", "engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to"].index
    )
    assert {"meta", "engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to"} <= set(kinds)
    target = backend.open("bob")
    assert import_into(target, exported) == len(exported)
    imported = list(target.export_records())
    assert _comparable(imported) == _comparable(exported)
    before, after = _embeddings(exported), _embeddings(imported)
    assert before.keys() == after.keys()
    for key, values in before.items():
        if values is None:
            assert after[key] is None
        else:
            assert after[key] == pytest.approx(values, rel=1e-5, abs=1e-6)
    # Importing the same file again changes nothing.
    stats = target.stats()
    import_into(target, exported)
    assert _comparable(list(target.export_records())) == _comparable(exported)
    again = target.stats()
    assert (again.engrams, again.cues, again.cue_links, again.associations) == (
        stats.engrams,
        stats.cues,
        stats.cue_links,
        stats.associations,
    )


def test_writes_inside_bulk_import_read_back_after_it(store):
    with store.bulk_import(3):
        store.create_engrams(
            [engram(f"i{i}", f"imported memory {i}", embedding=vec(500 + i)) for i in range(3)]
        )
        (cue,) = store.upsert_cues([Cue("imported")])
        store.link_many({f"i{i}": [cue.id] for i in range(3)})
        store.associate_many([Association("i0", "i1", 0.4, created_at=T0)])
    assert store.count_engrams() == 3
    assert store.cue_engram_counts(["imported"]) == {"imported": 3}
    assert [h.id for h in store.vector_search(vec(501), 1)] == ["i1"]
    assert {h.id for h in store.fulltext_search("imported", 10)} == {"i0", "i1", "i2"}
    assert len(store.all_associations()) == 1
