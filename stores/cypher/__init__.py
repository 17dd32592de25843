"""The openCypher stores: one implementation (:mod:`.store`, :mod:`.graph`, :mod:`.batch`,
:mod:`.search`) and a handful of hooks per database (:mod:`.falkordb`, :mod:`.neo4j`:
connection, vector literal, index DDL and index query procedures).

The database modules are imported by :func:`smriti.stores.make_store` only when selected,
so a Kuzu user never needs the FalkorDB or Neo4j client installed.
"""

from smriti.stores.cypher.store import CypherGraphStore

__all__ = ["CypherGraphStore"]
