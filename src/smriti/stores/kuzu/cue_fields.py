"""What is written to existing cues of the embedded store: :class:`CueFields`.

Their types (a landed LLM analysis names them, ``nodes/enrich.py``) and their embeddings:
consolidation fills the embeddings of cues created without one (``nodes/index.py``), recall's
alias index reads them all at once (``stores/aliases.py``). Kuzu cannot ``SET`` a fixed-size
list column from a parameter of another length, so sizes are checked before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from smriti.stores.base import Cue, check_dims, normalise_cue_name
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.graph import CueMap


class CueFields:
    """``cues_without_embedding``, ``set_cue_embeddings``, ``cue_vectors`` and ``set_cue_types``.

    Args:
        db: the store's connection.
        cues: the cue map (its ``has_embedding`` flags follow the writes).
        dims: the embedding dimension.
    """

    def __init__(self, db: Connection, cues: CueMap, dims: int) -> None:
        self.db = db
        self.cues = cues
        self.dims = dims

    @locked
    def cues_without_embedding(self, limit: int) -> list[Cue]:
        rows = self.db.run(
            "MATCH (c:Cue) WHERE c.embedding IS NULL "
            "RETURN c.id, c.name, c.cue_type ORDER BY c.name LIMIT $n",
            {"n": max(0, int(limit))},
        )
        return [Cue(id=id_, name=name, cue_type=cue_type or "keyword") for id_, name, cue_type in rows]

    @locked
    def set_cue_embeddings(self, embeddings: Mapping[str, Sequence[float]]) -> None:
        for cue_id, embedding in embeddings.items():
            check_dims(embedding, self.dims, f"the embedding of cue {cue_id!r}")
        rows = [{"id": cue_id, "v": [float(x) for x in v]} for cue_id, v in sorted(embeddings.items())]
        if not rows:
            return
        # Cue.id is the primary key: each row is a key lookup, not a scan.
        self.db.run("UNWIND $rows AS row MATCH (c:Cue {id: row.id}) SET c.embedding = row.v", {"rows": rows})
        by_id = {info.id: info for info in self.cues.names().values()}
        for cue_id in embeddings:
            if (info := by_id.get(cue_id)) is not None:
                info.has_embedding = True

    @locked
    def cue_vectors(self) -> tuple[list[str], np.ndarray]:
        rows = self.db.run(
            "MATCH (c:Cue) WHERE c.embedding IS NOT NULL RETURN c.name, c.embedding ORDER BY c.name"
        )
        names = [name for name, _ in rows]
        matrix = np.asarray([v for _, v in rows], dtype=np.float32).reshape(len(rows), self.dims)
        return names, matrix

    @locked
    def set_cue_types(self, types: Mapping[str, str]) -> None:
        wanted = {normalise_cue_name(name): cue_type for name, cue_type in types.items() if cue_type}
        known = self.cues.names()
        rows = [{"id": known[n].id, "t": t} for n, t in sorted(wanted.items()) if n in known]
        if not rows:
            return
        self.db.run("UNWIND $rows AS row MATCH (c:Cue {id: row.id}) SET c.cue_type = row.t", {"rows": rows})
        for name, cue_type in wanted.items():
            if name in known:
                known[name].cue_type = cue_type
