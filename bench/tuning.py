"""Shared plumbing of the tuning benchmarks (``locomo_tune``, ``notes``, ``hotpotqa_tune``, ``shapes``).

A tuning run answers "does this setting help?" quickly and without one variant shaping the next:

* each corpus is stored once through the store pipeline and consolidated, and the store is kept
  under ``bench/.cache/<kind>-stores/<embedder>-<name>/`` with an index of engram id -> document
  keys; a later run reopens it and only asks. The index records a fingerprint of the documents
  (keys, contents, sources, dates), so a different slice rebuilds by itself, and a digest of the
  library's sources: a store kept from other library code is reused with a warning (most changes
  are to recall); pass ``--rebuild`` after changing what the store pipeline writes;
* every variant ``{name: {setting: value}}`` asks every question against the same store, with the
  recall pipeline built without its reinforce step (so access counts, last access and decay stay
  as the store left them) and the memory's clock frozen where the store froze it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import CACHE_DIR, add_embedder_option, bench_settings, embedder_dims, make_embedder

logger = logging.getLogger("smriti.bench.tuning")

Variants = dict[str, dict[str, Any]]
DEFAULTS = "defaults"
INDEX_FILE = "keys_of.json"


@dataclass(frozen=True)
class Document:
    """One memory to store: ``key`` is what the benchmark scores (a dia_id, a note id, a title)."""

    key: str
    content: str
    source: str = ""
    occurred_at: datetime | None = None


# -- options ------------------------------------------------------------------------------------


def add_tuning_options(parser: argparse.ArgumentParser, ablation_help: str) -> None:
    """``--variants``, ``--ablation``, ``--rebuild``, ``--cache-dir``, ``--embedder`` and
    ``--embedding-cache``."""
    parser.add_argument("--variants", type=Path, default=None, help="a JSON file {name: {setting: value}}")
    parser.add_argument("--ablation", action="store_true", help=ablation_help)
    parser.add_argument(
        "--rebuild", action="store_true", help="store the corpora again (after a store change)"
    )
    parser.add_argument(
        "--cache-dir", type=Path, default=CACHE_DIR, help="where stores are kept (default bench/.cache)"
    )
    add_embedder_option(parser)
    parser.add_argument(
        "--embedding-cache", action="store_true", help="remember MiniLM vectors in bench/.cache between runs"
    )


def load_variants(path: Path | None, ablation: bool, ablations: Mapping[str, dict[str, Any]]) -> Variants:
    """The defaults first, then the file's variants or, with ``ablation``, ``ablations``."""
    variants: Variants = {DEFAULTS: {}}
    if path is not None:
        variants |= json.loads(Path(path).read_text())
    elif ablation:
        variants |= dict(ablations)
    return variants


def tuning_embedder(args: argparse.Namespace) -> Any:
    return make_embedder(args.embedder, cache=args.embedding_cache)


# -- stores -------------------------------------------------------------------------------------


def open_memory(folder: Path, user: str, embedder: Any, now: datetime):
    """The benchmark's memory in ``folder`` (offline settings, nothing pruned), clock frozen at ``now``."""
    from smriti.memory import Memory

    settings = bench_settings(folder, prune_threshold=0.0, embedding_dims=embedder_dims(embedder))
    memory = Memory.open(settings, user=user, llm=None, embedder=embedder)
    memory.context.clock = lambda: now
    return memory


def fingerprint(documents: Sequence[Document], user: str, now: datetime) -> str:
    digest = hashlib.sha1(f"{user}\n{now.isoformat()}\n".encode())
    for d in documents:
        when = d.occurred_at.isoformat() if d.occurred_at else ""
        digest.update(f"{d.key}\x00{d.content}\x00{d.source}\x00{when}\x01".encode())
    return digest.hexdigest()


def library_digest() -> str:
    """A digest of the library's Python sources: a store kept from other code may be stale."""
    import smriti

    skip = {"bench", "tests", "notebooks", "examples", "build", "node_modules", "__pycache__"}
    digest = hashlib.sha1()
    for folder, subfolders, files in os.walk(Path(smriti.__file__).resolve().parent):
        subfolders[:] = sorted(d for d in subfolders if d not in skip and not d.startswith("."))
        for name in sorted(f for f in files if f.endswith(".py")):
            digest.update(Path(folder, name).read_bytes())
    return digest.hexdigest()


def cached_store(
    folder: Path,
    user: str,
    embedder: Any,
    now: datetime,
    documents: Sequence[Document],
    rebuild: bool = False,
) -> dict[str, list[str]]:
    """Store ``documents`` one at a time and consolidate once (clock frozen at ``now``), or reuse the
    store kept in ``folder`` from an earlier run of the same documents; engram id -> document keys
    (a near-duplicate the store merged stands for several keys)."""
    index = folder / INDEX_FILE
    wanted = fingerprint(documents, user, now)
    if index.exists() and not rebuild:
        kept = json.loads(index.read_text())
        if kept.get("fingerprint") == wanted:
            if kept.get("library") != library_digest():
                logger.warning(
                    "%s was stored by other library code: pass --rebuild if the store path changed", folder
                )
            return kept["keys_of"]
        logger.warning("%s holds other documents: storing again", folder)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    warm = getattr(embedder, "warm", None)
    if warm is not None:  # CachedEmbeddings: embed the contents in batches first
        warm(d.content for d in documents)
    logger.warning("storing %d documents into %s", len(documents), folder)
    keys_of: dict[str, list[str]] = defaultdict(list)
    with open_memory(folder, user, embedder, now) as memory:
        for d in documents:
            stored = memory.store(d.content, source=d.source, occurred_at=d.occurred_at)
            keys_of[stored["id"]].append(d.key)
        memory.consolidate(now=now)
    index.write_text(
        json.dumps(
            {
                "fingerprint": wanted,
                "library": library_digest(),
                "documents": len(documents),
                "keys_of": keys_of,
            }
        )
    )
    return dict(keys_of)


# -- asking -------------------------------------------------------------------------------------


def without_reinforce(memory: Any) -> None:
    """Recall through a pipeline without the reinforce step (``Memory.recall`` runs
    ``memory._recall_pipeline``, a cached property, so the instance's own value wins)."""
    from smriti.pipelines.recall import build_recall_pipeline

    pipeline = build_recall_pipeline(reinforce=False)
    if "reinforce" in pipeline.nodes:
        raise RuntimeError("build_recall_pipeline(reinforce=False) still reinforces")
    memory.__dict__["_recall_pipeline"] = pipeline
    if memory._recall_pipeline is not pipeline:
        raise RuntimeError("Memory no longer recalls through _recall_pipeline: update bench/tuning.py")


Record = Callable[[str, Any, list[list[str]]], None]


def ask_variants(
    folder: Path,
    user: str,
    embedder: Any,
    now: datetime,
    keys_of: Mapping[str, list[str]],
    questions: Iterable[Any],
    variants: Variants,
    record: Record,
    search: str | None = None,
    limit: int = 10,
) -> None:
    """Ask every question (its ``.text``) once per variant, none reinforcing; ``record(system,
    question, ranked)`` gets the document keys of each result. With ``search``, also mode=search
    (vector only) under that system name."""
    questions = list(questions)
    runs = [(name, update, "recall") for name, update in variants.items()]
    if search:
        runs.append((search, {}, "search"))
    with open_memory(folder, user, embedder, now) as memory:
        without_reinforce(memory)
        defaults = memory.context.settings
        try:
            for name, update, mode in runs:
                memory.context.settings = defaults.model_copy(update=update)
                for q in questions:
                    result = memory.recall(q.text, limit=limit, mode=mode)
                    record(name, q, [list(keys_of.get(item["id"], [])) for item in result["results"]])
        finally:
            memory.context.settings = defaults
