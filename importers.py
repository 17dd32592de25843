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

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from smriti.errors import InvalidInput
from smriti.stores.base import Relation

if TYPE_CHECKING:
    from smriti.memory import Memory

Source = Literal["server-memory", "text"]
TEXT_SUFFIXES = (".txt", ".md", ".markdown")


@dataclass(frozen=True)
class Item:
    """One memory to store, and the fact it states (server-memory relations)."""

    content: str
    source: str
    tags: str = ""
    relation: tuple[str, str, str] | None = None  # (from, relation, to)


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


_HEADING = re.compile(r"^#{1,6}\s")


def paragraphs(text: str) -> Iterator[str]:
    """Blank-line separated paragraphs; a Markdown heading alone in its block joins the next."""
    heading = ""
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block:
            continue
        if _HEADING.match(block) and "\n" not in block:
            heading = f"{heading} {block}".strip()
            continue
        yield f"{heading}\n{block}" if heading else block
        heading = ""
    if heading:
        yield heading


def read_text(path: Path) -> list[Item]:
    """Items of a text/Markdown file, or of every such file under a folder (sorted by path)."""
    files = (
        sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES) if path.is_dir() else [path]
    )
    if not files:
        raise InvalidInput(f"{path}: no {', '.join(TEXT_SUFFIXES)} files in it")
    items = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{file}: not UTF-8 text") from None
        items += [Item(paragraph, file.name) for paragraph in paragraphs(text)]
    return items


def read_items(path: Path, source: Source) -> list[Item]:
    return read_server_memory(path) if source == "server-memory" else read_text(path)


def store_items(
    memory: Memory, items: list[Item], on_memory: Callable[[], None] | None = None
) -> dict[str, int]:
    """Store each item through the store pipeline; returns counts (stored, deduplicated, relations).

    Every item is checked before the first is stored (content length, emptiness), so a file
    with one bad item changes nothing.
    """
    from smriti.validators import check_content

    limit = memory.context.settings.max_content_chars
    for item in items:
        check_content(item.content, limit)
    counts = {"stored": 0, "deduplicated": 0, "relations": 0}
    for item in items:
        stored = memory.store(item.content, tags=item.tags, source=item.source)
        known = bool(stored.get("deduplicated"))  # imported before: its fact is there too
        counts["deduplicated" if known else "stored"] += 1
        if item.relation is not None and not known:
            source, relation, target = item.relation
            with memory.context.write_lock:
                memory.context.store.add_relations(
                    [Relation(source, relation, target, engram_id=stored["id"])]
                )
            counts["relations"] += 1
        if on_memory is not None:
            on_memory()
    return counts
