"""What is written to existing cues of the embedded store: :class:`CueFields`.

Their types, which a landed LLM analysis names (``nodes/enrich.py``); the cue map's copies
follow the write.
"""

from __future__ import annotations

from collections.abc import Mapping

from smriti.stores.base import normalise_cue_name
from smriti.stores.kuzu.connection import Connection, locked
from smriti.stores.kuzu.graph import CueMap


class CueFields:
    """``set_cue_types``.

    Args:
        db: the store's connection.
        cues: the cue map (its types follow the writes).
    """

    def __init__(self, db: Connection, cues: CueMap) -> None:
        self.db = db
        self.cues = cues

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
