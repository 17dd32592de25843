"""``@modelcontextprotocol/server-memory``'s JSON Lines file (``MEMORY_FILE_PATH``).

Each observation of an entity becomes a memory ("Alice: speaks Spanish"), with the entity as a
cue; each relation becomes a memory stating it and a RelatesTo fact between the two entities' cues.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from smriti.cli.importers.items import Item
from smriti.errors import InvalidInput


def read_server_memory(path: Path) -> list[Item]:
    """Items of a server-memory file; a malformed line stops with its line number."""
    items: list[Item] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record: dict[str, Any] = json.loads(line)
            kind = record["type"]
            if kind == "entity":
                name, entity_type = str(record["name"]), str(record.get("entityType", ""))
                for observation in record.get("observations", []):
                    text = str(observation).strip()
                    if text:
                        content = text if name.lower() in text.lower() else f"{name}: {text}"
                        tags = ",".join(t for t in (name, entity_type) if t)  # the entity is a cue
                        items.append(Item(content, "server-memory", tags=tags))
            elif kind == "relation":
                source, relation, target = str(record["from"]), str(record["relationType"]), str(record["to"])
                content = f"{source} {relation.replace('_', ' ')} {target}"
                items.append(Item(content, "server-memory", relation=(source, relation, target)))
            else:
                raise KeyError(f"type {kind!r}")
        except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as error:
            raise InvalidInput(f"{path}:{number}: not a server-memory entity or relation ({error})") from None
    return items
