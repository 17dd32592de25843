"""Compiling production's graphs ahead of the first call.

A server calls :func:`compile_in_background` first thing, so LangGraph's import and the compile
overlap its handshake, its store's opening and its embedder's loading. Its own module because it
names the recall and store pipelines, which are built on :mod:`smriti.pipelines.stages`.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


def compile_graphs() -> None:
    """Import LangGraph and compile production's recall and store graphs (each once per process:
    a call that asks for one meanwhile waits for this compile instead of making its own)."""
    from smriti.pipelines.recall import recall_pipeline
    from smriti.pipelines.store import store_pipeline

    _ = recall_pipeline.graph, store_pipeline.graph  # recall first: a first call's likeliest


def compile_in_background() -> threading.Thread:
    """:func:`compile_graphs` in a daemon thread, started now: a server calls it first thing, so
    LangGraph's import overlaps its handshake, its store's opening and its embedder's loading."""
    thread = threading.Thread(target=_compile_quietly, name="smriti-compile", daemon=True)
    thread.start()
    return thread


def _compile_quietly() -> None:
    try:
        compile_graphs()
    except Exception:  # why: the first call compiles (or reports the failure) itself
        log.debug("compiling the graphs in the background failed", exc_info=True)
