"""Moving memories in and out for the CLI: JSON Lines export/import and backup restore.

The record format is :mod:`smriti.stores.records`; importing goes through
``Memory.import_records`` and is idempotent. An import file is read and checked completely
before anything is written, so a malformed file changes nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import InvalidInput

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.memory import Memory


def export_to(memory: Memory, path: str) -> int:
    """Write every record as one JSON line to ``path`` (``-``: stdout); returns the count.

    A file is written next to its destination and renamed into place, so an interrupted
    export never leaves half a file behind under the final name.
    """
    if path == "-":
        return _write_records(memory, sys.stdout)
    target = Path(path)
    partial = target.with_name(target.name + ".partial")
    with partial.open("w", encoding="utf-8") as stream:
        count = _write_records(memory, stream)
    os.replace(partial, target)
    return count


def _write_records(memory: Memory, stream: Any) -> int:
    count = 0
    for record in memory.export_records():
        stream.write(json.dumps(record, ensure_ascii=False) + "\n")
        count += 1
    stream.flush()
    return count


def read_records(path: Path, embedding_dims: int) -> list[dict[str, Any]]:
    """Parse and check an export file.

    Raises:
        InvalidInput: a line is not JSON, not a Smriti record, or carries embeddings of
            another dimension than this store's EMBEDDING_DIMS.
    """
    from smriti.stores.records import KINDS

    records: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise InvalidInput(f"{path}:{number}: not JSON ({error.msg})") from None
            kind = record.get("kind") if isinstance(record, dict) else None
            if kind not in KINDS:
                raise InvalidInput(f"{path}:{number}: not a Smriti export record (kind {kind!r})")
            embedding = record.get("embedding")
            if kind == "engram" and embedding is not None and len(embedding) != embedding_dims:
                raise InvalidInput(
                    f"{path}:{number}: the export has {len(embedding)}-dimensional embeddings but this "
                    f"store uses EMBEDDING_DIMS={embedding_dims}; import with the same embedding model"
                )
            records.append(record)
    return records


def import_from(memory: Memory, path: Path) -> int:
    """Import an export file with a progress bar on stderr; returns the records applied."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from smriti.cli_render import err

    records = read_records(Path(path), memory.context.settings.embedding_dims)
    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err()) as progress:
        task = progress.add_task("import", total=len(records))

        def tracked() -> Any:
            for record in records:
                yield record
                progress.advance(task)

        try:
            return memory.import_records(tracked())
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInput(f"{path}: import stopped at a malformed record: {error!r}") from None


def restore_backup(settings: Settings, user: str | None, force: bool) -> dict[str, Any]:
    """Restore the user's memory from the backup (see :mod:`smriti.stores.backup`).

    Raises:
        BackupDisabled: BACKUP_TYPE=none.
    """
    from smriti.server_runtime import close_runtime, open_runtime

    runtime = open_runtime(settings, user=user, with_backup=True)
    try:
        return runtime.restore(force=force)
    finally:
        close_runtime(runtime, final_sync=False)
