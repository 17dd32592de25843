"""Cue types and cue embeddings on every backend (see conftest.BACKENDS): a cue's type is
replaced by name (what a landed LLM analysis does); cues are created without an embedding, the
ones missing one are listed, set in a batch and read back as the matrix alias matching searches;
a vector of the wrong size is refused and nothing is written."""

from __future__ import annotations

import numpy as np
import pytest

from smriti.errors import EmbeddingMismatchError
from smriti.stores.base import Cue

from .conftest import DIMS


def _vector(dims: int, seed: int) -> list[float]:
    return [float(x) for x in np.random.default_rng(seed).standard_normal(dims).astype(np.float32)]


def test_missing_cue_embeddings_are_listed_set_and_read_back(store):
    dims = DIMS
    store.upsert_cues([Cue(name="pottery"), Cue(name="camping", cue_type="concept"), Cue(name="kids")])
    missing = store.cues_without_embedding(10)
    assert [c.name for c in missing] == ["camping", "kids", "pottery"]
    assert store.cues_without_embedding(2) == missing[:2]
    names, matrix = store.cue_vectors()
    assert names == [] and matrix.shape == (0, dims)

    ids = {c.name: c.id for c in missing}
    wanted = {"pottery": _vector(dims, 1), "kids": _vector(dims, 2)}
    store.set_cue_embeddings(
        {ids[name]: vector for name, vector in wanted.items()} | {"no-such-id": _vector(dims, 3)}
    )

    assert [c.name for c in store.cues_without_embedding(10)] == ["camping"]
    names, matrix = store.cue_vectors()
    assert names == ["kids", "pottery"]
    assert matrix.dtype == np.float32 and matrix.shape == (2, dims)
    for row, name in enumerate(names):
        np.testing.assert_allclose(matrix[row], wanted[name], rtol=1e-6)
    # The cue itself is unchanged: same id and type, and an upsert of the name keeps it.
    [kept] = store.upsert_cues([Cue(name="camping", cue_type="person")])
    assert (kept.id, kept.cue_type) == (ids["camping"], "concept")


def test_a_cue_embedding_of_another_size_is_refused_and_nothing_is_written(store):
    dims = DIMS
    store.upsert_cues([Cue(name="pottery"), Cue(name="camping")])
    ids = {c.name: c.id for c in store.cues_without_embedding(10)}
    with pytest.raises(EmbeddingMismatchError):
        store.set_cue_embeddings({ids["camping"]: _vector(dims, 1), ids["pottery"]: [0.5] * (dims + 1)})
    assert [c.name for c in store.cues_without_embedding(10)] == ["camping", "pottery"]
    assert store.cue_vectors()[0] == []


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
