"""Smriti's numpy work runs on one BLAS thread and gives the embedding program its own thread
count back (issue 38, item 6).

Each check runs in a fresh Python process: OpenBLAS keeps one count per process (and, once the
main thread has set it, ignores counts set from other threads), so a check in the test process
would depend on what earlier tests did.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import json, threading
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
from smriti import blas

def blas_threads():
    return sorted({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
"""


def _run(body: str) -> dict:
    script = PRELUDE + textwrap.dedent(body)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_scope_sets_one_thread_and_restores_the_callers_count():
    seen = _run("""
        threadpool_limits(limits=2, user_api="blas")  # the program's own setting
        if blas_threads() != [2]:
            print(json.dumps({"skip": blas_threads()})); raise SystemExit
        seen = {}
        with blas.one_blas_thread():
            seen["inside"] = blas_threads()
            with blas.one_blas_thread():
                seen["nested"] = blas_threads()
            seen["after nested"] = blas_threads()
        seen["after"] = blas_threads()
        print(json.dumps(seen))
    """)
    if "skip" in seen:
        pytest.skip(f"this BLAS cannot run two threads: {seen}")
    assert seen == {"inside": [1], "nested": [1], "after nested": [1], "after": [2]}


def test_overlapping_scopes_of_two_threads_restore_once_the_last_closes():
    seen = _run("""
        entered, release_first, release_second = threading.Event(), threading.Event(), threading.Event()
        seen = {"before": blas_threads()}

        def first():
            with blas.one_blas_thread():
                entered.set()
                release_first.wait(10)

        def second():
            entered.wait(10)
            with blas.one_blas_thread():
                release_first.set()
                release_second.wait(10)

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        threads[0].join(10)
        seen["first left, second inside"] = blas_threads()
        release_second.set()
        threads[1].join(10)
        seen["both left"] = blas_threads()
        print(json.dumps(seen))
    """)
    if seen["before"] == [1]:
        pytest.skip("this BLAS runs one thread anyway")
    assert seen["first left, second inside"] == [1]
    assert seen["both left"] == seen["before"]


def test_a_program_embedding_smriti_keeps_its_blas_threads(tmp_path):
    """A store's vector cache and a recall's scan: the program's
    count is the same afterwards, and the vector scan ran on one thread."""
    seen = _run(f"""
        from contextlib import contextmanager
        from smriti.config import Settings
        from smriti.memory import Memory
        from smriti.stores import vectors

        threadpool_limits(limits=2, user_api="blas")
        if blas_threads() != [2]:
            print(json.dumps({{"skip": blas_threads()}})); raise SystemExit
        inside, real = [], blas.one_blas_thread

        @contextmanager
        def observed():
            with real():
                inside.append(blas_threads())
                yield

        blas.one_blas_thread = observed  # the vector module reads it from the blas module
        settings = Settings(storage_location={str(tmp_path)!r}, accessing_user="alice",
                            llm_provider="heuristic", embedding_provider="hashing", embedding_dims=64)
        memory = Memory.open(settings)
        try:
            for text in ("Priya chose Postgres for billing", "Ravi prefers cursor pagination"):
                memory.store(text)
            found = memory.recall("billing database", limit=2)["total_results"]
        finally:
            memory.close()
        matrix = np.random.default_rng(7).standard_normal((400, 64)).astype(np.float32)
        rows, _ = vectors.best_rows(matrix[3], matrix, np.linalg.norm(matrix, axis=1), np.arange(400), 5)
        print(json.dumps({{"found": found, "row 3": 3 in rows.tolist(), "inside": inside,
                          "after": blas_threads()}}))
    """)
    if "skip" in seen:
        pytest.skip(f"this BLAS cannot run two threads: {seen}")
    assert seen["found"] >= 1 and seen["row 3"]
    assert seen["inside"] and all(count == [1] for count in seen["inside"])
    assert seen["after"] == [2]


def test_the_server_sets_one_thread_for_its_whole_process():
    seen = _run("""
        blas.one_thread_for_this_process()
        with blas.one_blas_thread():
            pass
        print(json.dumps({"after": blas_threads()}))
    """)
    assert seen == {"after": [1]}
