"""LoCoMo observations as notes, through MCP: the notes benchmark as a client gets it.

Run from the repository root::

    .venv/bin/python -m bench.notes_mcp --split heldout --offline-default --embedder minilm --embedding-cache
    .venv/bin/python -m bench.notes_mcp --split heldout --embedder minilm --embedding-cache  # OpenAI path
    .venv/bin/python -m bench.notes_mcp --split heldout                  # hashing embedder

The notes and questions of ``bench/notes.py`` (one observation fact per memory: content = the fact,
``occurred_at`` = the session's date, no ``source``; questions of categories 1-4 with a relevant
note), stored and asked through a fresh ``smriti-mcp`` per conversation over stdio, exactly as
``bench/locomo_mcp.py`` runs turns (its server environment and session code): default settings
except the heuristic analyser, background consolidation off (one ``smriti_manage consolidate``
after the stores), the real clock. Every question is asked with ``smriti_recall`` (limit 10, the
defaults, reinforcement included), then all again with ``mode=search`` (vector only).

BM25 (Smriti's tokenizer and plain words), dense cosine with the ``--embedder`` embedder and
their reciprocal-rank fusion index the same notes in this process: the same-run baselines.
R@k = share of the relevant notes in the top k, Hit@k = at least one there; "all" is the micro
average over the questions of categories 1-4.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.baselines import rank_with_baselines
from bench.common import command_line, make_embedder, section_preamble, setup_logging, write_embedder_section
from bench.embedding_server import EmbeddingServer
from bench.locomo import PLAIN_BM25, split_samples
from bench.locomo_mcp import (
    BOTH_MODES_CALLS,
    SMRITI_MCP,
    SMRITI_MCP_SEARCH,
    add_server_options,
    embeddings_url,
    latency_table,
    server_env,
    settings_note,
    store_and_score_both_modes,
)
from bench.notes import BASELINES, KS, NoteScores, conversation_notes, note_questions, tables
from bench.tuning import Document


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_options(parser)
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    command = command_line("bench.notes_mcp", argv)
    embedder = make_embedder(args.embedder, cache=args.embedding_cache)
    samples = split_samples(args.split, args.conversations)

    scores, timing = NoteScores(), defaultdict(list)
    started = time.perf_counter()
    notes_total = 0
    with (
        tempfile.TemporaryDirectory(prefix="smriti-notes-mcp-") as folder,
        EmbeddingServer(embedder) as endpoint,
    ):
        url = embeddings_url(args, endpoint)
        for sample in samples:
            notes = conversation_notes(sample)
            questions = note_questions(sample, notes, args.questions or None)
            notes_total += len(notes)
            warm = getattr(embedder, "warm", None)
            if warm is not None:
                warm([n.content for n in notes] + [q.text for q in questions])
            pairs = [(n.key, n.content) for n in notes]
            rank_with_baselines(pairs, questions, embedder, PLAIN_BM25, scores.add, timing, max(KS))
            storage = Path(folder) / sample["sample_id"]
            storage.mkdir()
            env = server_env(
                storage, sample["sample_id"], url, getattr(embedder, "dims", None), args.offline_default
            )
            documents = [Document(n.key, n.content, "", n.when) for n in notes]
            log = Path(folder) / "server.log"
            store_and_score_both_modes(env, documents, questions, log, scores.add, timing)
    elapsed = time.perf_counter() - started

    systems = [SMRITI_MCP, SMRITI_MCP_SEARCH, *BASELINES]
    calls = BOTH_MODES_CALLS
    body = (
        section_preamble(command, settings_note(args))
        + f"- Data: conversations {', '.join(s['sample_id'] for s in samples)}; {notes_total} notes; "
        f"wall time {elapsed:.0f} s; load average at the end {os.getloadavg()[0]:.1f}\n\n"
        + tables(scores, systems)
        + "\n### Through MCP (ms, client side)\n\n"
        + latency_table(timing, calls)
        + f"\n\nConsolidation, one call a conversation: {statistics.fmean(timing['mcp:consolidate']):.0f} "
        "ms mean.\n"
    )
    print(body)
    write_embedder_section(
        f"notes-mcp-{args.split}" + ("-offline-default" if args.offline_default else ""),
        f"LoCoMo notes through MCP, {args.split} conversations"
        + (", offline default" if args.offline_default else ""),
        args.embedder,
        body,
        args.results,
    )
    return {"scores": scores, "timing": timing, "systems": systems, "body": body}


if __name__ == "__main__":
    main()
