"""Disk space of the embedded stores: refuse writes before the disk is full, word a full disk.

Why a margin checked before writing: on a full disk Kuzu reported an I/O error, then
"duplicated primary key", then crashed the server (2 runs in 3 on a 24 MB tmpfs); SQLite rolls
the transaction back cleanly but still fails half way through an import. Checking the free
space of the store's disk against ``MIN_FREE_DISK_MB`` before a write keeps the database out of
that state; a write that fills the disk anyway (another process took the space) fails with the
same :class:`~smriti.errors.StoreFull` error, and writes work again once space is freed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from smriti.errors import StoreFull

_MB = 1024 * 1024


def _free_bytes(path: Path) -> int | None:
    """Free bytes on the disk holding ``path`` (its nearest existing ancestor), None if unknown."""
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def full_disk(path: Path, detail: str = "") -> StoreFull:
    """The error for a write that found the disk of ``path`` full; ``detail`` is the engine's text."""
    free = _free_bytes(path)
    left = f" ({free / _MB:.1f} MB free)" if free is not None else ""
    cause = f" [{detail}]" if detail else ""
    return StoreFull(
        f"the disk holding the memory store {path} is full{left}: nothing was written, and the "
        f"memories stored before are intact. Free some space (or move STORAGE_LOCATION) and try "
        f"again.{cause}"
    )


def check_free_space(path: Path, min_free_mb: float) -> None:
    """Refuse a write while less than ``min_free_mb`` is free on the disk holding ``path``.

    Raises:
        StoreFull: below the margin (nothing has been written).
    """
    if min_free_mb <= 0:
        return
    free = _free_bytes(path)
    if free is not None and free < min_free_mb * _MB:
        raise StoreFull(
            f"the disk holding the memory store {path} is nearly full ({free / _MB:.1f} MB free, "
            f"MIN_FREE_DISK_MB is {min_free_mb:g}): nothing was written, and the memories stored "
            "before are intact. Free some space (or move STORAGE_LOCATION) and try again."
        )
