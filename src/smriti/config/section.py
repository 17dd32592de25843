"""What makes a class of fields a named section of the settings.

A section is a pydantic ``BaseModel`` holding the fields of one concern, with a short slug
(``smriti config SECTION``), a title and a docstring that the generated reference
(``docs/settings.md``) and ``smriti config`` print. :class:`~smriti.config.settings.Settings`
inherits every section, so a field stays a flat attribute (``settings.recall_limit``) and its
environment variable keeps its name: sections change how the settings are documented and shown,
never how they are read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel


class Section(BaseModel):
    """Base of a settings section: its ``slug`` and ``title``; its docstring says what it covers."""

    slug: ClassVar[str]
    title: ClassVar[str]


def absolute_path(value: Path) -> Path:
    """A path setting as every process reads it: ``~`` expanded and made absolute where the
    settings are read. A relative STORAGE_LOCATION was resolved once by the relay (against the
    client's working directory) and again by the shared server it started inside the user
    folder: a nested store and socket (issue 37). ``abspath``, not ``resolve()``: ".." is folded
    but a symlinked folder keeps the name it was given."""
    return Path(os.path.abspath(value.expanduser()))
