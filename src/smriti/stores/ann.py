"""The approximate tier of :class:`~smriti.stores.vectors.VectorCache`: a usearch HNSW graph
and its file beside the database.

By default the graph stores float32 copies of the vectors (``dtype="f32"``), so
:meth:`Index.get` hands back exactly what was added: the cache re-scores HNSW candidates from
them, and does not keep a second copy of indexed vectors in RAM. A quantised graph (``f16``:
half the memory, ``i8``: a quarter; VECTOR_INDEX_DTYPE) only finds the candidates: the cache
re-scores them from the exact embeddings its owner reads back (the SQLite store: one indexed
read of the candidates' BLOBs), so results stay ranked by exact cosine.

A saved index is two files: ``PATH`` (usearch's own format, opened memory-mapped) and
``PATH.json``, written after it, which records what the graph covers: the id of each key
(null for a key whose memory was removed), a fingerprint of each key's vector (its dot product
with a fixed random vector, so a changed embedding under the same id is noticed), the owner's
``generation`` token, the graph parameters, and the size and head/tail hashes of ``PATH`` (a
file that was replaced or cut short is not opened). Both are written to temporary files and
renamed, the sidecar last.

Measured on the development machine (2 cores, hashing embeddings of HotpotQA/LoCoMo text,
1,536 dims): see :data:`ANN_THRESHOLD` and the module docstring of ``stores/vectors.py``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from usearch.index import Index

logger = logging.getLogger(__name__)

FORMAT = 1
_HASHED = 1 << 16  # bytes hashed at each end of the index file


@dataclass(frozen=True)
class AnnParams:
    """HNSW parameters (usearch names). ``expansion_search`` is the beam width of a query up
    to 100k vectors, wider past it (``vectors.search_beam``); the cache asks for
    ``max(4k, 50)`` candidates, which widens it further."""

    connectivity: int = 16
    expansion_add: int = 128
    expansion_search: int = 256
    dtype: str = "f32"  # what the graph keeps of each vector: f32, f16 or i8 (see the docstring)


def _usearch() -> type[Index]:
    """usearch is imported on first use only: with it loaded, LadybugDB 0.15's failing
    ``INSTALL vector`` (offline) crashes the process (segfault, measured)."""
    from usearch.index import Index

    return Index


def new_index(dims: int, params: AnnParams) -> Index:
    return _usearch()(
        ndim=dims,
        metric="cos",
        dtype=params.dtype,
        connectivity=params.connectivity,
        expansion_add=params.expansion_add,
        expansion_search=params.expansion_search,
    )


def restore(path: Path, params: AnnParams, view: bool = False) -> Index:
    """Open a saved index (``view``: memory-mapped, read-only: it must never take an insert)."""
    index = _usearch().restore(str(path), view=view)
    if index is None:
        raise ValueError(f"{path} is not a usearch index")
    # Not kept in the file. usearch's setters exist; its type hints show read-only properties.
    index.expansion_add = params.expansion_add  # type: ignore[misc]
    index.expansion_search = params.expansion_search  # type: ignore[misc]
    return index


def fingerprints(matrix: np.ndarray) -> np.ndarray:
    """One float per row: its dot product with a fixed random unit vector."""
    draw = np.random.default_rng(1536).standard_normal(matrix.shape[1])
    probe = np.asarray(draw / np.linalg.norm(draw), dtype=np.float32)
    if not len(matrix):
        return np.zeros(0, dtype=np.float32)
    return np.einsum("ij,j->i", matrix, probe).astype(np.float32)


def _file_digest(path: Path) -> str:
    size = path.stat().st_size
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as handle:
        digest.update(handle.read(_HASHED))
        handle.seek(max(0, size - _HASHED))
        digest.update(handle.read(_HASHED))
    return f"{size}:{digest.hexdigest()}"


def _prefetch(path: Path) -> None:
    """Ask the kernel to read the file into the page cache in the background: a query on a
    cold memory map otherwise waits for its random page faults (~0.75 s at 100k)."""
    with contextlib.suppress(AttributeError, OSError):
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(descriptor)


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def save(
    index: Index,
    path: Path,
    ids: list[str | None],
    prints: np.ndarray,
    generation: str | None,
    params: AnnParams,
) -> None:
    """Write ``index`` and its sidecar atomically (temporary files, then renames)."""
    # per process: HTTP workers sharing a memory may each save at their exit
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    index.save(str(temporary))
    meta = {
        "format": FORMAT,
        "dims": int(index.ndim),
        "params": asdict(params),
        "generation": generation,
        "file": _file_digest(temporary),
        "ids": ids,
        "prints": base64.b64encode(np.asarray(prints, dtype="<f4").tobytes()).decode(),
    }
    side = sidecar(path)
    side_temporary = side.with_name(f"{side.name}.{os.getpid()}.tmp")
    side_temporary.write_text(json.dumps(meta, separators=(",", ":")))
    os.replace(temporary, path)
    os.replace(side_temporary, side)


@dataclass
class Saved:
    """A saved index opened memory-mapped, with what its sidecar says it covers."""

    index: Index
    ids: list[str | None]
    prints: np.ndarray
    generation: str | None


_warned: set[str] = set()


def open_saved(path: Path, dims: int, params: AnnParams) -> Saved | None:
    """The saved index at ``path`` opened memory-mapped, or None when there is none or it is
    stale or damaged (logged once per path; the caller rebuilds and overwrites it)."""
    side = sidecar(path)
    if not path.exists() or not side.exists():
        return None
    try:
        meta: dict[str, Any] = json.loads(side.read_text())
        built = meta.get("params") or {}
        # The expansions are query/build-time knobs; the graph's shape is its connectivity and
        # what it keeps of each vector.
        shape = (meta.get("format"), meta.get("dims"), built.get("connectivity"), built.get("dtype", "f32"))
        if shape != (FORMAT, dims, params.connectivity, params.dtype):
            raise ValueError("written with other parameters")
        if meta.get("file") != _file_digest(path):
            raise ValueError("the index file does not match its sidecar")
        ids = list(meta["ids"])
        prints = np.frombuffer(base64.b64decode(meta["prints"]), dtype="<f4").astype(np.float32)
        if len(prints) != len(ids):
            raise ValueError("sidecar lists differ in length")
        _prefetch(path)
        index = restore(path, params, view=True)
        if index is None or index.ndim != dims or len(index) > len(ids):
            raise ValueError("unexpected index contents")
        return Saved(index, ids, prints, meta.get("generation"))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
        if str(path) not in _warned:
            _warned.add(str(path))
            logger.warning("ignoring the saved vector index %s (%s): rebuilding it", path, error)
        return None
