"""Every method a backend must write is enforced when the backend is constructed (issue 24)."""

from __future__ import annotations

import pytest

from smriti.stores.base import BACKEND_METHODS, GraphStore, StoreBase
from smriti.stores.cypher.store import CypherGraphStore
from smriti.stores.kuzu.store import KuzuStore
from smriti.stores.sqlite.store import SqliteStore

BACKENDS = [SqliteStore, KuzuStore, CypherGraphStore]


def _protocol_methods() -> set[str]:
    return {
        name for name, member in vars(GraphStore).items() if not name.startswith("_") and callable(member)
    }


def test_what_the_base_does_not_derive_is_abstract():
    derived = {name for name in _protocol_methods() if name not in BACKEND_METHODS}
    assert _protocol_methods() >= BACKEND_METHODS
    assert StoreBase.__abstractmethods__ == BACKEND_METHODS
    for name in derived:  # the single forms and the optional abilities: written once, in StoreBase
        assert not getattr(getattr(StoreBase, name), "__isabstractmethod__", False), name
    assert {"vector_search", "export_records", "get_meta", "close", "get_engrams"} <= BACKEND_METHODS


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda c: c.__name__)
def test_every_backend_writes_all_of_them(backend):
    assert not backend.__abstractmethods__


@pytest.mark.parametrize("missing", sorted(BACKEND_METHODS))
def test_a_backend_missing_one_is_refused_at_construction(missing):
    body = {name: (lambda self, *a, **k: None) for name in BACKEND_METHODS if name != missing}
    half = type("HalfBackend", (StoreBase,), body)
    with pytest.raises(TypeError, match=missing):
        half()
