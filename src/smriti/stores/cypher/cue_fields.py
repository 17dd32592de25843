"""What is written to existing cues of the openCypher stores: :class:`CypherCueFields`.

Their types (a landed LLM analysis names them, ``nodes/enrich.py``) and their embeddings:
consolidation fills the embeddings of cues created without one (``nodes/index.py``), recall's
alias index reads them all at once (``stores/aliases.py``). Embeddings are written as engrams'
are, through the backend's vector parameter and expression (FalkorDB's ``vecf32``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from smriti.stores.base import Cue, normalise_cue_name
from smriti.stores.cypher.connection import UserGraph


class CypherCueFields:
    """``cues_without_embedding``, ``set_cue_embeddings``, ``cue_vectors`` and ``set_cue_types``."""

    def __init__(self, graph: UserGraph) -> None:
        self.graph = graph

    def cues_without_embedding(self, limit: int) -> list[Cue]:
        rows = self.graph.q(
            "MATCH (c:Cue {user: $user}) WHERE c.embedding IS NULL "
            "RETURN c.id AS id, c.name AS name, c.cue_type AS cue_type ORDER BY name LIMIT $n",
            n=max(0, int(limit)),
        )
        return [Cue(id=r["id"], name=r["name"], cue_type=r["cue_type"] or "keyword") for r in rows]

    def set_cue_embeddings(self, embeddings: Mapping[str, Sequence[float]]) -> None:
        rows = [{"id": id_, "v": self.graph.vector_param(v)} for id_, v in sorted(embeddings.items())]
        if rows:
            self.graph.q(
                "UNWIND $rows AS row MATCH (c:Cue {user: $user, id: row.id}) "
                f"SET c.embedding = {self.graph.vector_of('row.v')}",
                rows=rows,
            )

    def cue_vectors(self) -> tuple[list[str], np.ndarray]:
        rows = self.graph.q(
            "MATCH (c:Cue {user: $user}) WHERE c.embedding IS NOT NULL "
            "RETURN c.name AS name, c.embedding AS embedding ORDER BY name"
        )
        names = [r["name"] for r in rows]
        matrix = np.asarray([r["embedding"] for r in rows], dtype=np.float32)
        return names, matrix.reshape(len(rows), self.graph.dims)

    def set_cue_types(self, types: Mapping[str, str]) -> None:
        wanted = {normalise_cue_name(name): cue_type for name, cue_type in types.items() if cue_type}
        rows = [{"name": n, "t": t} for n, t in sorted(wanted.items()) if n]
        if rows:
            self.graph.q(
                "UNWIND $rows AS row MATCH (c:Cue {user: $user, name: row.name}) SET c.cue_type = row.t",
                rows=rows,
            )
