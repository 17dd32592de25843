"""What is written to existing cues of the openCypher stores: :class:`CypherCueFields`.

Their types, which a landed LLM analysis names (``nodes/enrich.py``).
"""

from __future__ import annotations

from collections.abc import Mapping

from smriti.stores.base import normalise_cue_name
from smriti.stores.cypher.connection import UserGraph


class CypherCueFields:
    """``set_cue_types``."""

    def __init__(self, graph: UserGraph) -> None:
        self.graph = graph

    def set_cue_types(self, types: Mapping[str, str]) -> None:
        wanted = {normalise_cue_name(name): cue_type for name, cue_type in types.items() if cue_type}
        rows = [{"name": n, "t": t} for n, t in sorted(wanted.items()) if n]
        if rows:
            self.graph.q(
                "UNWIND $rows AS row MATCH (c:Cue {user: $user, name: row.name}) SET c.cue_type = row.t",
                rows=rows,
            )
