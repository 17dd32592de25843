"""Team notes asked in other words, through MCP: the paraphrase benchmark as a client gets it.

Run from the repository root::

    .venv/bin/python -m bench.paraphrase_mcp --offline-default --embedder minilm --embedding-cache
    .venv/bin/python -m bench.paraphrase_mcp --embedder minilm --embedding-cache  # the OpenAI path
    .venv/bin/python -m bench.paraphrase_mcp --split tune --private   # one in-process server

The notes and questions of ``bench/paraphrase.py`` (``bench/paraphrase/``): every note stored into
one memory through a real ``smriti-mcp`` over stdio, one ``smriti_store`` each (no ``source``,
``occurred_at`` = the note's date), one ``smriti_manage consolidate``, then every question of the
split asked with ``smriti_recall`` (limit 10, the defaults, reinforcement included) and all again
with ``mode=search`` (vector only). By default the stdio server is the relay to the user's shared
server (SMRITI_SHARED on, as MCP clients run it), stopped with ``smriti stop`` at the end;
``--private`` serves stdio in process instead. Otherwise the server's environment is
``bench.locomo_mcp``'s: the heuristic analyser, background consolidation off, the real clock.

BM25 (Smriti's tokenizer and plain words), dense cosine with the ``--embedder`` embedder and their
reciprocal-rank fusion index the same notes in this process: the same-run baselines. Scores as in
``bench/paraphrase.py`` (strict about merged notes; R@1, R@5, R@10 and MRR per group of questions).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.baselines import rank_with_baselines
from bench.common import command_line, make_embedder, section_preamble, setup_logging, write_embedder_section
from bench.embedding_server import EmbeddingServer
from bench.locomo_mcp import (
    BOTH_MODES_CALLS,
    SMRITI_MCP,
    SMRITI_MCP_SEARCH,
    add_embedder_server_options,
    embeddings_url,
    latency_table,
    server_env,
    settings_note,
    store_and_score_both_modes,
)
from bench.paraphrase import (
    BASELINES,
    KS,
    PLAIN_BM25,
    SPLITS,
    USER,
    ParaphraseScores,
    load_notes,
    load_questions,
    report,
    report_splits,
)
from bench.scale_session import script
from bench.tuning import Document

logger = logging.getLogger("smriti.bench.paraphrase_mcp")
SHORT = {SMRITI_MCP: "recall", SMRITI_MCP_SEARCH: "search"}


def stop_shared_server(env: dict[str, str]) -> str:
    """``smriti stop`` for the shared server of ``env`` (it outlives the relay until idle); what it
    said ("stopped pid N" when the relay had started one)."""
    done = subprocess.run(
        [*script("smriti"), "stop"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    said = " ".join((done.stdout + done.stderr).split())
    if "stopped pid" not in said:
        logger.warning("smriti stop: %s", said or f"exit {done.returncode}")
    return said


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="heldout")
    parser.add_argument("--notes", type=int, default=None, help="store only the first N notes (smoke tests)")
    parser.add_argument(
        "--private", action="store_true", help="SMRITI_SHARED=false: stdio served in process, no relay"
    )
    add_embedder_server_options(parser)
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    command = command_line("bench.paraphrase_mcp", argv)
    embedder = make_embedder(args.embedder, cache=args.embedding_cache)
    notes = load_notes(limit=args.notes)
    questions = load_questions(args.split, notes=notes)

    scores, timing = ParaphraseScores(), defaultdict(list)
    started = time.perf_counter()
    warm = getattr(embedder, "warm", None)
    if warm is not None:
        warm([n.content for n in notes] + [q.text for q in questions])
    pairs = [(n.key, n.content) for n in notes]
    rank_with_baselines(pairs, questions, embedder, PLAIN_BM25, scores.add, timing, max(KS))
    with (
        tempfile.TemporaryDirectory(prefix="smriti-paraphrase-mcp-") as folder,
        EmbeddingServer(embedder) as endpoint,
    ):
        env = server_env(
            Path(folder),
            USER,
            embeddings_url(args, endpoint),
            getattr(embedder, "dims", None),
            args.offline_default,
        )
        env["SMRITI_SHARED"] = "false" if args.private else "true"
        documents = [Document(n.key, n.content, "", n.when) for n in notes]
        stopped = "in process"
        try:
            store_and_score_both_modes(
                env, documents, questions, Path(folder) / "client.log", scores.add, timing
            )
        finally:
            if not args.private:
                stopped = "the relay to the shared server (SMRITI_SHARED on; after the run "
                stopped += f"`smriti stop`: {stop_shared_server(env)})"
    elapsed = time.perf_counter() - started

    systems = [SMRITI_MCP, SMRITI_MCP_SEARCH, *BASELINES]
    body = (
        section_preamble(command, settings_note(args) + f"; stdio served by {stopped}")
        + f"- Data: bench/paraphrase, {len(notes)} notes in one memory, {len(questions)} questions "
        f"({args.split}); wall time {elapsed:.0f} s; load average at the end {os.getloadavg()[0]:.1f}\n\n"
        + report(scores, systems, report_splits(args.split), SHORT)
        + "\n### Through MCP (ms, client side)\n\n"
        + latency_table(timing, BOTH_MODES_CALLS)
        + f"\n\nConsolidation, one call: {statistics.fmean(timing['mcp:consolidate']):.0f} ms.\n"
    )
    print(body)
    write_embedder_section(
        f"paraphrase-mcp-{args.split}" + ("-offline-default" if args.offline_default else ""),
        f"Paraphrase set (team notes asked in other words) through MCP, {args.split} questions"
        + (", offline default" if args.offline_default else ""),
        args.embedder,
        body,
        args.results,
    )
    return {"scores": scores, "timing": timing, "systems": systems, "body": body}


if __name__ == "__main__":
    main()
