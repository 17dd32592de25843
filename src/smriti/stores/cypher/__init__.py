"""The openCypher stores: one implementation composed of small collaborators
(:mod:`.store`, :mod:`.connection`, :mod:`.rows`, :mod:`.graph`, :mod:`.batch`, :mod:`.search`,
:mod:`.export`) and one :class:`~smriti.stores.cypher.connection.CypherConnection` per database
(:mod:`.falkordb`, :mod:`.neo4j`: connection, vector literal, index DDL and index query procedures).

The database modules are imported by :func:`smriti.stores.make_store` only when selected,
so a Kuzu user never needs the FalkorDB or Neo4j client installed.
"""

from smriti.stores.cypher.store import CypherGraphStore

__all__ = ["CypherGraphStore"]
