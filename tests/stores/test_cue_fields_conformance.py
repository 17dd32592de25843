"""Cue types on every backend (see conftest.BACKENDS): a cue's type is replaced by name (what a
landed LLM analysis does), and every read of the cue afterwards has the new type."""

from __future__ import annotations

from smriti.stores.base import Cue


def test_cue_types_are_replaced_by_name_and_read_back_everywhere(store):
    from smriti.stores.base import Engram

    store.create_engram(Engram(id="e1", content="the database engineer recommends cursors"))
    [cue] = store.link_cues("e1", [Cue(name="Database Engineer", cue_type="technology")])
    store.cues_of(["e1"])  # a backend caching cues must not keep the old type
    store.set_cue_types({"database engineer": "agent", "no such cue": "person", "cursor": ""})
    [after] = store.cues_of(["e1"])["e1"]
    assert (after.id, after.name, after.cue_type) == (cue.id, cue.name, "agent")
    assert [c.cue_type for c in store.upsert_cues([Cue(name="database-engineer")])] == ["agent"]
    assert store.cue_engram_counts(["no such cue"]) == {}  # an unknown name creates nothing
    [row] = store.recall_rows(["e1"])
    assert [(c.name, c.cue_type) for c in row.cues] == [(cue.name, "agent")]
