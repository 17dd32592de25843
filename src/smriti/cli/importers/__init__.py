"""Ways in from elsewhere: the MCP reference memory server's file, and text or Markdown files.

Unlike ``smriti import`` of an export (records with ids, cues and embeddings, written in bulk),
these bring plain text: each item goes through the store pipeline, so it is analysed, embedded,
linked and deduplicated like a memory stored by a client (importing a file twice adds nothing
the second time).

* ``server-memory``: ``@modelcontextprotocol/server-memory``'s JSON Lines file
  (``MEMORY_FILE_PATH``). Each observation of an entity becomes a memory ("Alice: speaks
  Spanish"), with the entity as a cue; each relation becomes a memory stating it and a
  RelatesTo fact between the two entities' cues.
* ``text``: a ``.txt``/``.md`` file, or every such file under a folder: a memory per paragraph
  (blank-line separated; Markdown headings kept with the paragraph they title), the file's
  name as the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from smriti.cli.importers.items import Item, Phases, store_items
from smriti.cli.importers.server_memory import read_server_memory
from smriti.cli.importers.text import paragraphs, read_text

__all__ = [
    "Item",
    "Phases",
    "Source",
    "paragraphs",
    "read_items",
    "read_server_memory",
    "read_text",
    "store_items",
]

Source = Literal["server-memory", "text"]


def read_items(path: Path, source: Source) -> list[Item]:
    """The items of ``path`` read as ``source``."""
    return read_server_memory(path) if source == "server-memory" else read_text(path)
