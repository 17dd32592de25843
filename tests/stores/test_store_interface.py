"""Every method a backend must write is enforced when the backend is constructed (issue 24); every
method has one home among the typed parts (issue 43), and the conformance suite runs per part."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Protocol

import pytest

from smriti.stores.base import BACKEND_METHODS, LIFECYCLE, PART_OF, PROTOCOL_METHODS, GraphStore, StoreBase
from smriti.stores.cypher.store import CypherGraphStore
from smriti.stores.kuzu.store import KuzuStore
from smriti.stores.operations import Forward, collaborators, forwarded, handed
from smriti.stores.parts import PARTS, methods
from smriti.stores.sqlite.store import SqliteStore

BACKENDS = [SqliteStore, KuzuStore, CypherGraphStore]
ROOT = Path(__file__).resolve().parents[2] / "src" / "smriti"


def _protocol_methods() -> set[str]:
    return set(PROTOCOL_METHODS)


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


# ----------------------------------------------------------------------------- operation groups
STORE_FILES = ["stores/sqlite/store.py", "stores/kuzu/store.py", "stores/cypher/store.py"]


def _forwarding_methods(path: Path) -> list[str]:
    """Methods whose body (after a docstring) is only ``[return] self.<collaborator>.<method>(its
    own parameters)``: what ``@operations`` declares instead (the count in issue 24's closing)."""
    found = []
    for cls in [n for n in ast.parse(path.read_text()).body if isinstance(n, ast.ClassDef)]:
        for fn in [n for n in cls.body if isinstance(n, ast.FunctionDef)]:
            body = fn.body[1:] if fn.body and isinstance(fn.body[0], ast.Expr) else fn.body
            call = body[0].value if len(body) == 1 and isinstance(body[0], ast.Return | ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
                continue
            owner = call.func.value
            if not (
                isinstance(owner, ast.Attribute)
                and isinstance(owner.value, ast.Name)
                and owner.value.id == "self"
            ):
                continue
            params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
            values = [*call.args, *(k.value for k in call.keywords)]
            if all(isinstance(v, ast.Name) and v.id in params for v in values):
                found.append(f"{cls.name}.{fn.name}")
    return found


def test_no_protocol_method_only_forwards_to_a_collaborator():
    forwarding = [m for f in STORE_FILES for m in _forwarding_methods(ROOT / f)]
    protocol = _protocol_methods()
    assert [m for m in forwarding if m.partition(".")[2] in protocol] == []


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda c: c.__name__)
def test_each_backend_hands_protocol_methods_to_its_collaborators(backend):
    handed = forwarded(backend)
    assert len(handed) >= 15 and set(handed) <= _protocol_methods()
    assert all(isinstance(vars(backend)[name], Forward) for name in handed)  # declared, not written


def test_on_a_real_store_the_method_is_the_collaborators_bound_method(tmp_path):
    with SqliteStore(tmp_path / "memory.sqlite", user="alice", dims=8) as store:
        assert store.cues_of.__self__ is store.graph
        assert store.get_engrams.__func__ is type(store.engrams).get
        assert store.count_engrams() == 0


class _Collaborator:
    def cues_of(self, engram_ids):
        return {}

    def neighbours(self, ids):  # the protocol names it engram_ids: a caller's keyword would miss
        return []

    def explode(self):
        return None


DECLARED = {"__annotations__": {"graph": "_Collaborator"}}  # a class body's `graph: _Collaborator`


@pytest.mark.parametrize(
    ("name", "method", "message"),
    [
        ("explode", _Collaborator.explode, "not a GraphStore method"),
        ("neighbours", _Collaborator.neighbours, "takes other parameters"),
        ("all_associations", _Collaborator.cues_of, "takes other parameters"),
    ],
)
def test_a_wrong_declaration_is_refused_at_import(name, method, message):
    with pytest.raises(TypeError, match=message):
        type("Half", (StoreBase,), {**DECLARED, name: handed("graph", method)})


def test_a_misspelt_collaborator_is_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match="handed to 'grpah', which Typo does not declare"):
        type("Typo", (StoreBase,), {**DECLARED, "cues_of": handed("grpah", _Collaborator.cues_of)})
    with pytest.raises(TypeError, match="does not declare"):

        class Undeclared(StoreBase):  # the collaborator is only made in __init__: not enough
            cues_of = handed("graph", _Collaborator.cues_of)

            def __init__(self) -> None:
                self.graph = _Collaborator()


def test_every_real_backend_declares_the_collaborators_it_hands_to():
    for backend in (SqliteStore, KuzuStore, CypherGraphStore):
        assert {forward.attribute for forward in forwarded(backend).values()} <= collaborators(backend)


def test_a_backend_whose_declarations_cover_the_rest_constructs():
    written = {name: (lambda self, *a, **k: None) for name in BACKEND_METHODS if name != "cues_of"}
    backend = type(
        "Grouped", (StoreBase,), {**DECLARED, **written, "cues_of": handed("graph", _Collaborator.cues_of)}
    )
    store = backend()
    store.graph = _Collaborator()
    assert store.cues_of(["x"]) == {} and store.cues_of.__self__ is store.graph


def test_read_from_the_class_a_handed_method_is_called_as_an_unbound_method(tmp_path):
    with SqliteStore(tmp_path / "memory.sqlite", user="alice", dims=8) as store:
        assert SqliteStore.count_engrams(store) == 0 == store.count_engrams()


# ----------------------------------------------------------------------------- typed parts
CONFORMANCE = Path(__file__).resolve().parent / "conformance"


def _homes(protocol: type, parts: dict[str, type]) -> dict[str, list[str]]:
    """Each public method ``protocol`` has (its own or inherited from a protocol base): the parts
    declaring it, "lifecycle" for ``protocol`` itself."""
    declared = {"lifecycle": protocol, **parts}
    names = {
        name for klass in protocol.__mro__ if getattr(klass, "_is_protocol", False) for name in methods(klass)
    }
    return {name: [part for part, cls in declared.items() if name in methods(cls)] for name in names}


def test_every_graphstore_method_belongs_to_exactly_one_part_or_the_lifecycle():
    homes = _homes(GraphStore, PARTS)
    assert {name: places for name, places in homes.items() if len(places) != 1} == {}
    assert set(homes) == PROTOCOL_METHODS == set(PART_OF)
    assert {name: places[0] for name, places in homes.items()} == PART_OF
    assert all(part in GraphStore.__mro__ for part in PARTS.values())
    assert {"close", "transaction", "write_batch", "exclusive", "stats"} == LIFECYCLE
    sizes = {part: len(methods(cls)) for part, cls in PARTS.items()}
    assert sizes == {
        "engrams": 15,
        "cues": 20,
        "associations": 4,
        "clusters": 3,
        "search": 5,
        "meta": 4,
        "records": 2,
    }


def test_a_method_without_a_home_or_with_two_is_found():
    class Extra(Protocol):
        def vector_search(self) -> None: ...  # a second home for a SearchPart method

    class Grown(GraphStore, Extra, Protocol):
        def forget_everything(self) -> None: ...  # added beside the parts, in none of them

    homes = _homes(Grown, {**PARTS, "extra": Extra})
    assert homes["vector_search"] == ["search", "extra"]
    assert _homes(Grown, PARTS)["forget_everything"] == ["lifecycle"]  # Grown's own: not GraphStore's
    assert "forget_everything" not in PROTOCOL_METHODS  # the real GraphStore has no such method


def _marker(module: ast.Module) -> str | None:
    """The part a conformance module names in ``pytestmark = pytest.mark.<part>``."""
    for node in module.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["pytestmark"]:
            value = node.value
            if isinstance(value, ast.Attribute) and ast.unparse(value.value) == "pytest.mark":
                return value.attr
    return None


def _called(module: ast.Module) -> set[str]:
    """Names called as methods anywhere in the module (``store.cues_of(...)``)."""
    return {
        node.func.attr
        for node in ast.walk(module)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
    }


def test_the_conformance_suite_runs_per_part_and_calls_every_method_of_each():
    modules = sorted(CONFORMANCE.glob("test_*.py"))
    called: dict[str, set[str]] = {part: set() for part in ("lifecycle", *PARTS)}
    for path in modules:
        tree = ast.parse(path.read_text())
        part = _marker(tree)
        assert part in called, f"{path.name}: pytestmark names no part ({part!r})"
        assert path.stem == f"test_{part}" or path.stem.startswith(f"test_{part}_"), path.name
        called[part] |= _called(tree)
    for part, cls in PARTS.items():
        assert methods(cls) - called[part] == set(), f"the {part} tests never call these"
    assert {"stats", "transaction", "write_batch"} <= called["lifecycle"]
