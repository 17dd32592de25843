"""Where an import's contents are embedded while the store pipeline stores the ones before.

An endpoint's embedder waits on the network: a thread beside the stores is enough. A local
model computes, and MiniLM in numpy does so in ~25 numpy calls a layer, each taking the GIL
back from the store pipeline's Python: in a thread beside a busy main thread it embedded 3-4x
slower than alone (bench/RESULTS.md, "Import speed, stop 40"). Such an embedder
(``embeds_on_cpu``) runs in child processes instead, each with its own copy of the model and
one BLAS thread, for an import of more than ``MIN_FOR_PROCESSES`` contents.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any

from smriti.blas import one_blas_thread

# Child processes for a local model: one per core (measured on 2 cores: the store pipeline's
# Python shares them), at most 4, each holding its own copy of the model (MiniLM: ~200 MB).
EMBED_PROCESSES = max(1, min(4, os.cpu_count() or 1))

MIN_FOR_PROCESSES = 32  # contents: fewer are embedded in a thread
Embedded = tuple[list[list[float]], float]  # the vectors, and the seconds they took
_embedder: Any = None  # in a child process: its copy of the embedder


class EmbeddingPool:
    """Embeds texts ahead, ``in_flight`` calls at a time; a context manager (shuts down)."""

    def __init__(self, embedder: Any, count: int) -> None:
        self.embedder = embedder
        self.executor: Executor
        # A few contents are embedded sooner here than the children start (~1-2 s each).
        if getattr(embedder, "embeds_on_cpu", False) and count > MIN_FOR_PROCESSES:
            # spawn, not fork: the parent has threads (the progress bar's) that fork does not copy.
            self.executor = ProcessPoolExecutor(
                EMBED_PROCESSES,
                multiprocessing.get_context("spawn"),
                initializer=_start_child,
                initargs=(embedder,),
            )
            self.in_flight = EMBED_PROCESSES
        else:
            self.executor = ThreadPoolExecutor(1, thread_name_prefix="smriti-embed")
            self.in_flight = 1

    def submit(self, texts: list[str]) -> Future[Embedded]:
        if isinstance(self.executor, ProcessPoolExecutor):
            return self.executor.submit(_embed_in_child, texts)
        return self.executor.submit(embed_timed, self.embedder, texts)

    def __enter__(self) -> EmbeddingPool:
        # One BLAS thread, set here in the calling thread: a count set in a worker thread is not
        # taken (smriti/blas.py), and OpenBLAS's 2 threads called from a worker ran 5x slower.
        self._blas = one_blas_thread()
        self._blas.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.executor.shutdown(wait=True, cancel_futures=True)
        finally:
            self._blas.__exit__(None, None, None)


def embed_timed(embedder: Any, texts: list[str]) -> Embedded:
    """The texts' vectors (plain floats) and the seconds the embedder took."""
    started = time.perf_counter()
    vectors = [list(map(float, vector)) for vector in embedder.embed_documents(texts)]
    return vectors, time.perf_counter() - started


def _start_child(embedder: Any) -> None:
    global _embedder
    from smriti.blas import one_thread_for_this_process

    one_thread_for_this_process()  # a process per core: one BLAS thread each
    _embedder = embedder


def _embed_in_child(texts: list[str]) -> Embedded:
    return embed_timed(_embedder, texts)
