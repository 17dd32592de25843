"""The record export of an openCypher store (see :mod:`smriti.stores.records`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from smriti.stores import records as rec
from smriti.stores.cypher.connection import UserGraph
from smriti.stores.cypher.graph import CypherGraphReads
from smriti.stores.cypher.rows import CUE_COLUMNS, ENGRAM_COLUMNS, cue_from_row, engram_from_row

EXPORT_PAGE = 500


def export_records(graph: UserGraph, reads: CypherGraphReads) -> Iterator[dict[str, Any]]:
    """Every node and edge of the user in records.KINDS order, sorted within a kind."""
    for row in graph.q("MATCH (m:Meta {user: $user}) RETURN m.key AS key, m.value AS value ORDER BY key"):
        yield rec.meta_record(row["key"], row["value"])
    after = ""
    join = graph.connection.embedding_join("e")
    while True:  # keyset pages: engrams carry their embeddings, so never all in one reply
        rows = graph.q(
            "MATCH (e:Engram {user: $user}) WHERE e.id > $after WITH e ORDER BY e.id LIMIT $page "
            f"{join.clause} RETURN {ENGRAM_COLUMNS}, {join.expression} AS embedding ORDER BY id",
            after=after,
            page=EXPORT_PAGE,
        )
        for row in rows:
            yield rec.engram_record(engram_from_row(row))
        if len(rows) < EXPORT_PAGE:
            break
        after = rows[-1]["id"]
    for row in graph.q(f"MATCH (c:Cue {{user: $user}}) RETURN {CUE_COLUMNS} ORDER BY name"):
        yield rec.cue_record(cue_from_row(row))
    for row in graph.q(
        "MATCH (e:Engram {user: $user})-[:EncodedBy]->(c:Cue {user: $user}) "
        "RETURN e.id AS engram_id, c.name AS cue ORDER BY engram_id, cue"
    ):
        yield rec.encoded_by_record(row["engram_id"], row["cue"])
    for association in reads.all_associations():
        yield rec.association_record(association)
    for row in graph.q(
        "MATCH (a:Cue {user: $user})-[r:CoOccurs]->(b:Cue {user: $user}) "
        "RETURN a.name AS source, b.name AS target, r.strength AS strength ORDER BY source, target"
    ):
        yield rec.co_occurs_record(row["source"], row["target"], float(row["strength"]))
    for relation in reads.relations("", "source, relation, target, engram_id"):
        yield rec.relation_record(relation)
