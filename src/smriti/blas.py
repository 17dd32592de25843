"""One BLAS thread while Smriti does matrix work, and the caller's own count back afterwards.

OpenBLAS starts a thread per core and, on a busy machine, its threads spin waiting for each
other. Smriti's matrix work is matrix-vector products (the exact vector scan of up to 20k
memories, 2-4 ms) and MiniLM's small matrices (tokens x 384): one thread is faster for both.
On the 2 shared cores of the development machine a MiniLM memory of 35 tokens took 50-130 ms
with two threads and 25 ms with one, and the scan of 10k x 1,536 float32 took 8.0 ms with two,
2.2 ms with one (``numpy``'s own single-threaded ``einsum`` loop, used before: 3.9 ms).

Smriti is also a library inside somebody else's program, whose BLAS is that program's to set:
so the limit is scoped, not set for good. :func:`one_blas_thread` is a context manager around
Smriti's own numpy work. OpenBLAS keeps one thread count for the whole process, so a limit set
and restored around each call by each thread would not hold (a thread leaving would restore the
count while another is still inside): the scopes are counted instead. The first to enter saves
the process's counts and sets one thread, the last to leave restores them. While any Smriti
scope is open, other numpy work in the process runs on one BLAS thread too; outside, the
program's own setting holds. Entering and leaving cost ~3 microseconds (threadpoolctl's library
controllers, found once, ~1 ms).

One caveat, measured with the OpenBLAS numpy ships (0.3.34): once the main thread has set the
count, a count set from another thread is not taken (``openblas_get_num_threads`` reads the old
one). A scope opened in a worker thread is then a no-op, which leaves the program's setting
alone but runs Smriti's work on its threads. Smriti's own servers, whose worker threads do the
matrix work, therefore set one thread for their whole process at start
(:func:`one_thread_for_this_process`); the library and the CLI use the scopes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_libraries: list[Any] | None = None  # threadpoolctl's BLAS library controllers, found once
_open_scopes = 0
_saved: list[int] = []  # each library's thread count when the first scope opened


def _blas_libraries() -> list[Any]:
    """The loaded BLAS libraries' controllers (none without ``threadpoolctl``); called under the lock."""
    global _libraries
    if _libraries is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # why: an install without it keeps numpy's default, slower, not wrong
            logger.debug("threadpoolctl is not installed: BLAS keeps its default thread count")
            _libraries = []
        else:
            _libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
    return _libraries


def prepare() -> None:
    """Find the BLAS libraries now (a store's vector cache does, before its first query)."""
    with _lock:
        _blas_libraries()


def one_thread_for_this_process() -> None:
    """One BLAS thread for good: for Smriti's own server processes, called where they start."""
    with _lock:
        for library in _blas_libraries():
            library.set_num_threads(1)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with the process's BLAS on one thread; the count before comes back when
    the last open scope (of any thread) closes."""
    global _open_scopes, _saved
    with _lock:
        if _open_scopes == 0:
            libraries = _blas_libraries()
            _saved = [library.num_threads for library in libraries]
            for library in libraries:
                library.set_num_threads(1)
        _open_scopes += 1
    try:
        yield
    finally:
        with _lock:
            _open_scopes -= 1
            if _open_scopes == 0:
                for library, count in zip(_blas_libraries(), _saved, strict=True):
                    library.set_num_threads(count)
