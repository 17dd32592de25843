"""Protocol methods a backend hands to a collaborator, instead of a method that forwards.

A backend's store class is built from collaborators (SQLite's engram table, graph and search
index; Kuzu's and Cypher's reads, writes and search), and most protocol methods are carried out
by exactly one of them. Instead of a method per protocol name that only calls the collaborator
(71 of them across the three backends before), the class names the collaborator's method once::

    class SqliteStore(StoreBase):
        cues_of = handed("graph", Graph.cues_of)

``store.cues_of`` is then the collaborator's own bound method (``store.graph.cues_of``): no
forwarding call in between. What is checked, and when:

* by mypy, the collaborator's method has the protocol method's signature (``handed`` keeps the
  types of the method it is given, and the class attribute overrides the declaration in the
  method's part, which StoreBase inherits through GraphStore: :mod:`smriti.stores.parts`);
* at import, the name is a :class:`~smriti.stores.base.GraphStore` method, the collaborator
  is declared in the class body (``graph: Graph``: a misspelt ``handed("grpah", ...)`` fails
  when the class is defined, not at its first call), and the collaborator's method takes the
  protocol's parameters first, with the same names, kinds and defaults (a caller's keywords
  reach it), and any more only with defaults;
* at construction, as before, every method of ``stores.base.BACKEND_METHODS`` is written or
  handed on (StoreBase declares them abstract; a handed one counts as written).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Concatenate, cast

from smriti.stores.base import PROTOCOL_METHODS, GraphStore


class Forward:
    """A protocol method carried out by ``method`` of the collaborator in ``self.<attribute>``."""

    __slots__ = ("attribute", "method")

    def __init__(self, attribute: str, method: Callable[..., Any]) -> None:
        self.attribute, self.method = attribute, method

    def __set_name__(self, owner: type, name: str) -> None:
        if name not in PROTOCOL_METHODS:
            raise TypeError(f"{owner.__name__}.{name} is not a GraphStore method: write it in the class")
        if self.attribute not in collaborators(owner):
            raise TypeError(
                f"{owner.__name__}.{name} is handed to {self.attribute!r}, which {owner.__name__} does "
                f"not declare: add '{self.attribute}: <its class>' to the class body"
            )
        if not _accepts(self.method, getattr(GraphStore, name)):
            raise TypeError(
                f"{owner.__name__}.{name}: {self.method.__qualname__} takes other parameters than "
                f"GraphStore.{name}"
            )

    def __get__(self, store: object, owner: type | None = None) -> Any:
        if store is None:  # on the class: the declaration, callable as an unbound method
            return self
        return getattr(getattr(store, self.attribute), self.method.__name__)

    def __call__(self, store: object, *args: Any, **kwargs: Any) -> Any:
        """``type(store).name(store, ...)``, as a method read from the class is called."""
        return self.__get__(store)(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<handed to .{self.attribute}: {self.method.__qualname__}>"


def handed[**P, R](
    attribute: str, method: Callable[Concatenate[Any, P], R]
) -> Callable[Concatenate[Any, P], R]:
    """Declare a protocol method as ``method`` of the collaborator held in ``self.<attribute>``.

    Typed as the method itself, so mypy checks it against the protocol method it overrides.
    """
    # why the cast: a Forward is a descriptor that reads as the collaborator's bound method.
    return cast(Callable[Concatenate[Any, P], R], Forward(attribute, method))


def collaborators(cls: type) -> set[str]:
    """The attributes ``cls`` (or a base) declares in its class body (``graph: Graph``)."""
    return {name for klass in cls.__mro__ for name in vars(klass).get("__annotations__", {})}


def _parameters(method: Callable[..., Any]) -> list[inspect.Parameter]:
    return list(inspect.signature(method).parameters.values())[1:]  # after self


def _accepts(method: Callable[..., Any], declared: Callable[..., Any]) -> bool:
    """``method`` takes the declared parameters first (names, kinds, defaults), and any more it
    takes have defaults of their own."""
    have, want = _parameters(method), _parameters(declared)
    same = [(p.name, p.kind, p.default) for p in have[: len(want)]] == [
        (p.name, p.kind, p.default) for p in want
    ]
    return same and all(p.default is not inspect.Parameter.empty for p in have[len(want) :])


def forwarded(cls: type) -> dict[str, Forward]:
    """The protocol methods ``cls`` hands to collaborators, by name (a subclass may write one)."""
    found: dict[str, Forward] = {}
    for klass in reversed(cls.__mro__):
        for name, member in vars(klass).items():
            if isinstance(member, Forward):
                found[name] = member
            else:
                found.pop(name, None)
    return found
