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
  (blank-line separated; Markdown headings kept with the paragraph they title) or, in a file
  without blank lines, per line (``--split`` chooses), the file's name as the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from smriti.cli.importers.items import Item, Phases, store_items
from smriti.cli.importers.server_memory import read_server_memory
from smriti.cli.importers.text import SPLITS, Split, lines, paragraphs, read_text

__all__ = [
    "SPLITS",
    "Item",
    "Phases",
    "Source",
    "Split",
    "lines",
    "paragraphs",
    "read_items",
    "read_server_memory",
    "read_text",
    "store_items",
]

Source = Literal["server-memory", "text"]


def read_items(path: Path, source: Source, split: Split = "auto") -> tuple[list[Item], str | None]:
    """The items of ``path`` read as ``source``, and a line saying how text was split (None for
    other sources)."""
    if source == "server-memory":
        return read_server_memory(path), None
    read = read_text(path, split)
    return read.items, read.notice(split)
