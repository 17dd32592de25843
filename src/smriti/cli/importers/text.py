"""A ``.txt``/``.md`` file, or every such file under a folder.

A memory per paragraph (blank-line separated; Markdown headings kept with the paragraph they
title), or per line, the file's name as the source. ``--split auto`` (the default) splits a
file by paragraphs when it has blank lines between its text, and by lines when it has none: a
file of one fact per line is as many memories as lines, not one paragraph too long to store
(issue 44). What was used is reported per file (:class:`TextItems`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from smriti.cli.importers.items import Item
from smriti.errors import InvalidInput

TEXT_SUFFIXES = (".txt", ".md", ".markdown")

Split = Literal["auto", "paragraphs", "lines"]
SPLITS: tuple[Split, ...] = ("auto", "paragraphs", "lines")

_HEADING = re.compile(r"^#{1,6}\s")
_BLANK_LINES = re.compile(r"\n\s*\n")


def _blocks(blocks: list[str]) -> Iterator[str]:
    """The blocks in order; a Markdown heading alone in its block joins the next block."""
    heading = ""
    for block in blocks:
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


def paragraphs(text: str) -> Iterator[str]:
    """Blank-line separated paragraphs; a Markdown heading alone in its block joins the next."""
    return _blocks(_BLANK_LINES.split(text))


def lines(text: str) -> Iterator[str]:
    """One item per non-empty line; a Markdown heading line joins the line after it."""
    return _blocks(text.splitlines())


def split_of(text: str, split: Split) -> Literal["paragraphs", "lines"]:
    """What ``auto`` means for ``text``: paragraphs when blank lines separate its text, else lines."""
    if split != "auto":
        return split
    return "paragraphs" if _BLANK_LINES.search(text.strip()) else "lines"


@dataclass
class TextItems:
    """The items of the files read, and how each file was split (for the notice)."""

    items: list[Item] = field(default_factory=list)
    by: dict[str, list[str]] = field(default_factory=lambda: {"paragraphs": [], "lines": []})

    def notice(self, split: Split) -> str:
        """One line saying how the text was split, and how to choose."""
        parts = []
        for how, names in self.by.items():
            if names:
                files = names[0] if len(names) == 1 else f"{len(names)} files"
                parts.append(f"{files} by {how}")
        why = " (auto: by lines where a file has no blank lines)" if split == "auto" else ""
        return f"split {', '.join(parts)}{why}; choose with --split paragraphs|lines"


def read_text(path: Path, split: Split = "auto") -> TextItems:
    """Items of a text/Markdown file, or of every such file under a folder (sorted by path)."""
    files = (
        sorted(p for p in path.rglob("*") if p.suffix.lower() in TEXT_SUFFIXES) if path.is_dir() else [path]
    )
    if not files:
        raise InvalidInput(f"{path}: no {', '.join(TEXT_SUFFIXES)} files in it")
    read = TextItems()
    for file in files:
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"{file}: not UTF-8 text") from None
        how = split_of(text, split)
        read.by[how].append(file.name)
        pieces = paragraphs(text) if how == "paragraphs" else lines(text)
        read.items += [Item(piece, file.name) for piece in pieces]
    return read
