"""The database's own node ids an import has seen, so its edge writes seek nodes instead of
looking them up by key: :class:`NodeIds`.

An import writes ~20 edges a memory, and each edge row looked up both of its ends through a
range index (FalkorDB: ~13 us an end; 95k co-occurrences of a 10k import spent 2.6 s of server
time there, measured) although the import had just created or merged those very nodes. Where
the database has a node id it can seek (FalkorDB's ``id(n)``:
:meth:`~smriti.stores.cypher.connection.CypherConnection.node_id`), the queries that create or
merge nodes during an import also return their ids, and edge rows whose ends are all known go
by seek.

A seek is never trusted alone: the node found must still carry the label, the user and the
key the row names (a node id is reused once its node is deleted, by this user or another), so
a seek finds exactly the node the key lookup would. Rows whose seek finds nothing (a node
deleted meanwhile by another process) are written again through the key lookup, which creates
missing cues as before. Outside an import nothing is remembered (a store writes a handful of
rows, and a long-lived cache would only grow).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple


class End(NamedTuple):
    """One end of an edge row: the query variable, its label, the key property, the row field."""

    var: str
    label: str
    key: str
    field: str


class NodeIds:
    """Node ids by (label, key property, key value), remembered during one import."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str, Any], int] = {}

    def remember(self, label: str, key: str, rows: Sequence[dict[str, Any]], node: str = "node") -> None:
        """Remember ``row[node]`` as the id of the ``label`` node whose ``key`` is ``row[key]``."""
        for row in rows:
            if row.get(node) is not None:
                self._ids[(label, key, row[key])] = int(row[node])

    def split(self, rows: Sequence[dict[str, Any]], ends: Sequence[End]) -> tuple[list[dict], list[dict]]:
        """(rows whose every end is known, numbered ``_i`` and given ``_<var>`` node ids; the others)."""
        known: list[dict] = []
        unknown: list[dict] = []
        for row in rows:
            ids = [self._ids.get((end.label, end.key, row[end.field])) for end in ends]
            if None in ids:
                unknown.append(row)
            else:
                seek = {f"_{end.var}": node for end, node in zip(ends, ids, strict=True)}
                known.append({**row, "_i": len(known), **seek})
        return known, unknown


def seek_clause(ends: Sequence[End], node_id: Callable[[str], str | None]) -> str:
    """Cypher binding each end by seeking ``row._<var>`` (``node_id(var)``: the database's id
    expression), keeping a row only if every node found is still the one its key names (label,
    user, key)."""
    seeks = " ".join(f"MATCH ({e.var}) WHERE {node_id(e.var)} = row._{e.var}" for e in ends)
    checks = " AND ".join(
        f"{e.var}:{e.label} AND {e.var}.user = $user AND {e.var}.{e.key} = row.{e.field}" for e in ends
    )
    return f"{seeks} WITH {', '.join(e.var for e in ends)}, row WHERE {checks}"
