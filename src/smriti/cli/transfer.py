"""Moving memories in and out for the CLI: JSON Lines export/import and backup restore.

The record format is :mod:`smriti.stores.records`; importing goes through
``Memory.import_records`` and is idempotent. An import file is read and checked completely
before anything is written, so a malformed file changes nothing.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
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


def read_records(path: Path, embedding_dims: int | None) -> list[dict[str, Any]]:
    """Read and check a whole export file (see :func:`smriti.stores.records.parse_lines`).

    Raises:
        InvalidInput: a line is not JSON, not a Smriti record, or carries embeddings of
            another dimension than this store's EMBEDDING_DIMS.
    """
    from smriti.stores.records import RecordDimensionError, RecordFormatError, parse_lines

    try:
        with path.open(encoding="utf-8") as stream:
            return parse_lines(stream, embedding_dims)
    except RecordFormatError as error:
        if isinstance(error, RecordDimensionError):
            hint = "; import with the same embedding model or use --reembed"
        elif error.message.startswith("not JSON"):  # a text or Markdown file, most likely
            hint = f" (an export is JSON Lines; for text: smriti import {path} --from text)"
        else:
            hint = ""
        raise InvalidInput(f"{path}:{error.line}: {error.message}{hint}") from None


# Meta records naming the embedding model that wrote the export: dropped when re-embedding.
EMBEDDING_META_KEYS = frozenset({"embedding_model", "embedding_dims"})
REEMBED_BATCH = 64


def reembed(records: list[dict[str, Any]], embedder: Any) -> list[dict[str, Any]]:
    """Replace engram embeddings with the configured embedder's, in batches; drop cue embeddings."""
    engrams = [r for r in records if r["kind"] == "engram"]
    for start in range(0, len(engrams), REEMBED_BATCH):
        batch = engrams[start : start + REEMBED_BATCH]
        vectors = embedder.embed_documents([r["content"] for r in batch])
        for record, vector in zip(batch, vectors, strict=True):
            record["embedding"] = [float(x) for x in vector]
    kept = []
    for record in records:
        if record["kind"] == "meta" and record.get("key") in EMBEDDING_META_KEYS:
            continue
        if record["kind"] == "cue":
            record = {**record, "embedding": None}
        kept.append(record)
    return kept


def import_from(memory: Memory, path: Path, reembed_all: bool = False) -> int:
    """Import an export file with its progress on stderr; returns the records applied.

    With ``reembed_all`` the engrams are embedded again by this memory's embedder, so an
    export made with another embedding model (or dimension) can be imported.
    """
    from smriti.cli.progress import ImportProgress

    dims = None if reembed_all else memory.context.settings.embedding_dims
    # why: parsing makes millions of floats, and the collector's full passes over a growing heap
    # took most of a 10k-memory import (9.5 s parsing with it, 1.7 s without); nothing cyclic is made
    gc.disable()
    try:
        records = read_records(Path(path), dims)
    finally:
        gc.enable()
    if reembed_all:
        records = reembed(records, memory.context.embedder)
    memories = sum(1 for record in records if record.get("kind") == "engram")
    with ImportProgress(memories, embedding=False) as progress:
        try:
            applied = memory.import_records(records, progress.add_stored)
        except (KeyError, TypeError, ValueError) as error:
            raise InvalidInput(f"{path}: import stopped at a malformed record: {error!r}") from None
    progress.console.print(progress.final(), markup=False, highlight=False)
    finish_indexes(memory, progress.console)
    return applied


def import_plain(memory: Memory, path: Path, source: str, split: str = "auto") -> dict[str, int]:
    """``smriti import --from server-memory|text``: store each item, with its progress on stderr."""
    from smriti.cli.importers import Phases, read_items, store_items
    from smriti.cli.progress import ImportProgress
    from smriti.cli.render import notice

    items, how = read_items(Path(path), source, split)  # type: ignore[arg-type]  # the CLI's choices
    if how is not None:
        notice(how)
    phases = Phases()
    with ImportProgress(len(items)) as progress:
        counts = store_items(memory, items, progress.store_one, phases, on_embedded=progress.add_embedded)
    progress.console.print(progress.final(), markup=False, highlight=False)
    progress.console.print(phases.line())  # where the time went (bench/import_speed.py reads it)
    return counts


def finish_indexes(memory: Memory, console: Any) -> None:
    """Build the vector index now (past the store's threshold), with its own bar: the next
    server then opens it from disk instead of searching exactly while it builds for minutes
    (100k memories) in the background of every short session."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    task = None
    vectors = 0

    def indexed(done: int, total: int) -> None:
        nonlocal task, vectors
        vectors = total
        if task is None:
            if done >= total:
                return
            if console.is_terminal:
                progress.start()
            task = progress.add_task("indexing vectors", total=total)
            if not console.is_terminal:
                console.print(f"indexing {total} vectors")
        progress.update(task, completed=done, total=total)

    started = time.perf_counter()
    store = memory.context.store
    # The database's own indexes too (Kuzu, FalkorDB, Neo4j vector and full-text): created here,
    # the first recall of the next server does not fall back to brute force over every
    # embedding (10-20 s at 10k on FalkorDB, measured) nor its first store wait while they fill.
    try:
        built = store.ensure_indexes(memory.context.settings.index_threshold)
        store.finish_indexes(indexed)
    finally:
        progress.stop()
    seconds = time.perf_counter() - started
    if task is None and built.get("vector_index") and seconds >= 0.5:
        vectors = store.count_engrams()  # the database's own index (Kuzu, FalkorDB) was built just now
    elif task is None:
        return
    # The benchmark reads this line (bench/scale_session.py).
    console.print(f"vector index built over {vectors} vectors in {seconds:.1f} s")


def restore_backup(settings: Settings, user: str | None, force: bool) -> dict[str, Any]:
    """Restore the user's memory from the backup (see :mod:`smriti.stores.backup`).

    Raises:
        BackupDisabled: BACKUP_TYPE=none.
    """
    from smriti.runtime import close_runtime, open_runtime

    runtime = open_runtime(settings, user=user, with_backup=True)
    try:
        return runtime.restore(force=force)
    finally:
        close_runtime(runtime, final_sync=False)
