"""One BLAS thread for the whole process: Smriti's products are small or bound by memory.

OpenBLAS starts a thread per core and, on a busy machine, its threads spin waiting for each
other. Smriti's matrix work is matrix-vector products (the exact vector scan of up to 20k
memories, 2-4 ms) and MiniLM's small matrices (tokens x 384): one thread is faster for both.
On the 2 shared cores of the development machine a MiniLM memory of 35 tokens took 50-130 ms
with two threads and 25 ms with one, and the scan of 10k x 1,536 float32 took 8.0 ms with two,
2.2 ms with one (``numpy``'s own single-threaded ``einsum`` loop, used before: 3.9 ms).

A limit set and restored around each call does not hold across threads (OpenBLAS keeps one
count for the process), so it is set once, for the process, by whichever part of Smriti first
does matrix work: the vector cache of an embedded store, or MiniLM's weights when they load.
"""

from __future__ import annotations

import logging
import threading

logger = logging.getLogger(__name__)

_done = False
_lock = threading.Lock()


def one_blas_thread() -> None:
    """Keep this process's BLAS on one thread (idempotent; a no-op without ``threadpoolctl``)."""
    global _done
    if _done:
        return
    with _lock:
        if _done:
            return
        _done = True
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # why: an install without it keeps numpy's default, slower, not wrong
            logger.debug("threadpoolctl is not installed: BLAS keeps its default thread count")
            return
        ThreadpoolController().limit(limits=1, user_api="blas")
