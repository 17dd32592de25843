"""A ``.txt``/``.md`` file, or every such file under a folder.

A memory per paragraph (blank-line separated; Markdown headings kept with the paragraph they
title), the file's name as the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from smriti.cli.importers.items import Item
from smriti.errors import InvalidInput

TEXT_SUFFIXES = (".txt", ".md", ".markdown")

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
