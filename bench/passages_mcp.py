"""HotpotQA passages through MCP: the passages benchmark as a client gets it.

Run from the repository root::

    .venv/bin/python -m bench.passages_mcp --offline-default --embedder minilm --embedding-cache
    .venv/bin/python -m bench.passages_mcp --half heldout --labelled --offline-default --embedder minilm

Every loaded question's passages (``bench.hotpotqa``: deduplicated by title, ``"<title>: <text>"``
or with ``--labelled`` ``"Title: <title>\\n<text>"``) are stored in one fresh ``smriti-mcp`` over
stdio, one ``smriti_store`` each, with no ``source`` (a shared source would let conversation
context link one question's passages) and no date; one ``smriti_manage consolidate``; then the
half's questions are asked with ``smriti_recall`` (limit 10, defaults, reinforcement included)
and all again with ``mode=search``. The server is ``bench.locomo_mcp``'s (its environment and
session code). BM25, dense cosine and their fusion index the same passages in this process: the
same-run baselines. R@k = share of the two gold passages in the top k; both@k = both there.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench import locomo_mcp
from bench.baselines import BM25Retriever, DenseRetriever, FusionRetriever, rank_with_baselines
from bench.common import (
    command_line,
    make_embedder,
    section_preamble,
    setup_logging,
    write_embedder_section,
)
from bench.hotpotqa import (
    KS,
    PLAIN_BM25,
    USER,
    Scores,
    load_rows,
    pool_passages,
    quality_tables,
    questions_of,
)
from bench.locomo_mcp import SMRITI_MCP, SMRITI_MCP_SEARCH
from bench.tuning import Document


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("all", "tune", "heldout"), default="heldout")
    parser.add_argument(
        "--questions", type=int, default=0, help="N evenly spaced questions loaded (0 = all 500)"
    )
    parser.add_argument("--labelled", action="store_true", help='passages as "Title: <title>\\n<text>"')
    locomo_mcp.add_embedder_server_options(parser)
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    command = command_line("bench.passages_mcp", argv)
    embedder = make_embedder(args.embedder, cache=args.embedding_cache)
    rows = load_rows(args.questions)
    passages, _ = pool_passages(rows, args.labelled)
    questions = questions_of(rows)
    middle = len(questions) // 2
    questions = {"all": questions, "tune": questions[:middle], "heldout": questions[middle:]}[args.half]

    scores, timing = Scores(), defaultdict(list)
    started = time.perf_counter()
    pairs = [(p.title, p.content) for p in passages]
    rank_with_baselines(pairs, questions, embedder, PLAIN_BM25, scores.add, timing, max(KS))
    with tempfile.TemporaryDirectory(prefix="smriti-passages-mcp-") as folder:
        from bench.embedding_server import EmbeddingServer

        with EmbeddingServer(embedder) as endpoint:
            url = locomo_mcp.embeddings_url(args, endpoint)
            env = locomo_mcp.server_env(
                Path(folder), USER, url, getattr(embedder, "dims", None), args.offline_default
            )
            documents = [Document(p.title, p.content) for p in passages]
            log = Path(folder) / "server.log"
            locomo_mcp.store_and_score_both_modes(env, documents, questions, log, scores.add, timing)
    elapsed = time.perf_counter() - started

    systems = [SMRITI_MCP, SMRITI_MCP_SEARCH, BM25Retriever.name, PLAIN_BM25, DenseRetriever.name,
               FusionRetriever.name]  # fmt: skip
    calls = locomo_mcp.BOTH_MODES_CALLS
    body = (
        section_preamble(command, locomo_mcp.settings_note(args))
        + f"- Data: {len(passages)} passages{' (labelled)' if args.labelled else ''}, {len(questions)} "
        f"questions ({args.half}); wall time {elapsed:.0f} s; load average at the end "
        f"{os.getloadavg()[0]:.1f}\n\n"
        + quality_tables(scores, systems)
        + "\n### Through MCP (ms, client side)\n\n"
        + locomo_mcp.latency_table(timing, calls)
        + "\n"
    )
    print(body)
    name = f"passages-mcp-{args.half}" + ("-labelled" if args.labelled else "")
    write_embedder_section(
        name + ("-offline-default" if args.offline_default else ""),
        f"HotpotQA passages through MCP, {args.half} half"
        + (", labelled" if args.labelled else "")
        + (", offline default" if args.offline_default else ""),
        args.embedder,
        body,
        args.results,
    )
    return {"scores": scores, "systems": systems, "body": body}


if __name__ == "__main__":
    main()
