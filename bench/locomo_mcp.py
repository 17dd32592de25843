"""LoCoMo evidence recall through MCP: the headline figures, measured as a client gets them.

Run from the repository root::

    .venv/bin/python -m bench.locomo_mcp --split heldout --embedder minilm --embedding-cache
    .venv/bin/python -m bench.locomo_mcp --split heldout                 # the offline hashing default

Per conversation, a fresh ``smriti-mcp`` is started over stdio (its own storage folder, user =
the conversation) with the server's default settings except: the heuristic analyser (no LLM),
background consolidation off (one ``smriti_manage consolidate`` runs after the stores instead)
and, for ``--embedder minilm``, all-MiniLM-L6-v2 served over the OpenAI-compatible embeddings
path by a local HTTP endpoint (``bench/embedding_server.py``; ``EMBEDDING_DIMS=384``). The
hashing run uses the server's offline default embedder at its default size (1536). Every turn is
one ``smriti_store`` (content ``"Speaker: text"``, ``source`` = the session, ``occurred_at`` = the
session's date); every question one ``smriti_recall`` (limit 10, the pipeline's defaults, its
reinforcement included). Unlike ``bench/locomo.py`` the server's clock is the real one, so the
conversation (2022-2023) is years old for recency; the ranking is otherwise the same code.

BM25, dense cosine (same embedder) and their reciprocal-rank fusion index the same turns in this
process, as in ``bench/locomo.py``: the same-run baselines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from bench.baselines import BM25Retriever, DenseRetriever, FusionRetriever, rank_with_baselines
from bench.common import (
    add_embedder_option,
    command_line,
    latency_summary,
    make_embedder,
    markdown_table,
    section_preamble,
    setup_logging,
    write_embedder_section,
)
from bench.embedding_server import EmbeddingServer
from bench.locomo import (
    KS,
    PLAIN_BM25,
    SPLITS,
    Question,
    Scores,
    Turn,
    conversation_questions,
    conversation_turns,
    quality_tables,
    split_samples,
)
from bench.scale_session import script
from bench.tuning import Document

SMRITI_MCP = "Smriti recall through MCP (defaults)"
SMRITI_MCP_SEARCH = "Smriti search through MCP (vector only)"
# The calls a run in both modes makes, as latency_table shows them.
BOTH_MODES_CALLS = (
    ("smriti_store", "mcp:store"),
    ("smriti_recall", "mcp:recall"),
    ("smriti_recall search", "mcp:search"),
)


def server_env(
    storage: Path, user: str, embeddings_url: str | None, dims: int | None, offline_default: bool = False
) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(storage),
        "STORAGE_LOCATION": str(storage),
        "ACCESSING_USER": user,
        "LLM_PROVIDER": "heuristic",
        "CONSOLIDATION_INTERVAL": "0",
        "PRUNE_THRESHOLD": "0",
        "LOG_LEVEL": "WARNING",
        "SMRITI_SHARED": "false",  # one private server per conversation
    }
    if offline_default:  # no provider, no key: what `make run` gives (the local MiniLM where installed)
        return env
    if embeddings_url:
        env |= {
            "EMBEDDING_PROVIDER": "openai",
            "EMBEDDING_BASE_URL": embeddings_url,
            "EMBEDDING_API_KEY": "bench",
            "EMBEDDING_MODEL": "all-MiniLM-L6-v2",
            "EMBEDDING_DIMS": str(dims),
        }
    else:
        env["EMBEDDING_PROVIDER"] = "hashing"
    return env


async def store_and_ask(
    env: dict[str, str],
    documents: list[Document],
    questions: list[str],
    log: Path,
    modes: tuple[str, ...] = ("recall",),
    limit: int = max(KS),
) -> tuple[dict[str, list[list[list[str]]]], dict[str, list[float]]]:
    """Through one ``smriti-mcp`` session over stdio: one ``smriti_store`` per document (``source``
    and ``occurred_at`` when it has them), one ``smriti_manage consolidate``, then every question
    once per mode (``smriti_recall``, ``limit`` results; the modes in order, so a later one meets
    what an earlier recall reinforced). Returns per mode the ranked document keys per question, and
    the client-side timings in ms (``store``, ``consolidate``, ``recall``/``search``)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    command = script("smriti-mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    timing: dict[str, list[float]] = defaultdict(list)
    keys_of: dict[str, list[str]] = defaultdict(list)
    rankings: dict[str, list[list[list[str]]]] = {mode: [] for mode in modes}
    with log.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            for document in documents:
                arguments: dict[str, Any] = {"content": document.content}
                if document.source:
                    arguments["source"] = document.source
                if document.occurred_at is not None:
                    arguments["occurred_at"] = document.occurred_at.isoformat()
                started = time.perf_counter()
                stored = await client.call_tool("smriti_store", arguments)
                timing["store"].append((time.perf_counter() - started) * 1000)
                if stored.is_error:
                    raise RuntimeError(f"smriti_store failed: {stored.content}")
                keys_of[stored.structured_content["id"]].append(document.key)
            started = time.perf_counter()
            done = await client.call_tool("smriti_manage", {"action": "consolidate"})
            timing["consolidate"].append((time.perf_counter() - started) * 1000)
            if done.is_error:
                raise RuntimeError(f"consolidate failed: {done.content}")
            for mode in modes:
                for question in questions:
                    started = time.perf_counter()
                    result = await client.call_tool(
                        "smriti_recall", {"query": question, "limit": limit, "mode": mode}
                    )
                    timing[mode].append((time.perf_counter() - started) * 1000)
                    if result.is_error:
                        raise RuntimeError(f"smriti_recall failed: {result.content}")
                    items = result.structured_content["results"]
                    rankings[mode].append([keys_of.get(item["id"], []) for item in items])
    return rankings, timing


async def ask_through_mcp(
    env: dict[str, str], turns: list[Turn], questions: list[Question], log: Path
) -> tuple[list[list[list[str]]], dict[str, list[float]]]:
    """Store the turns, consolidate once, ask every question; the ranked dia ids and the timings."""
    documents = [Document(t.dia_id, t.content, t.session, t.when) for t in turns]
    rankings, timing = await store_and_ask(env, documents, [q.text for q in questions], log)
    return rankings["recall"], timing


def store_and_score_both_modes(
    env: dict[str, str],
    documents: list[Document],
    questions: list[Any],
    log: Path,
    record: Callable[[str, Any, list[list[str]]], None],
    timing: dict[str, list[float]],
) -> None:
    """:func:`store_and_ask` in modes recall and search: each ranking is recorded under
    SMRITI_MCP or SMRITI_MCP_SEARCH, the client timings under ``mcp:<call>``."""
    rankings, mcp_timing = anyio.run(
        store_and_ask, env, documents, [q.text for q in questions], log, ("recall", "search")
    )
    for system, mode in ((SMRITI_MCP, "recall"), (SMRITI_MCP_SEARCH, "search")):
        for question, ranked in zip(questions, rankings[mode], strict=True):
            record(system, question, ranked)
    for key, values in mcp_timing.items():
        timing[f"mcp:{key}"].extend(values)


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """The options of a LoCoMo benchmark through ``smriti-mcp``: the split's slice, and
    :func:`add_embedder_server_options`."""
    parser.add_argument("--split", choices=sorted(SPLITS), default="heldout")
    parser.add_argument("--conversations", type=int, default=None, help="first N conversations of the split")
    parser.add_argument("--questions", type=int, default=0, help="N evenly spaced questions each (0 = all)")
    add_embedder_server_options(parser)


def add_embedder_server_options(parser: argparse.ArgumentParser) -> None:
    """The options of any benchmark through ``smriti-mcp``: embedder, offline default, results."""
    parser.add_argument("--embedding-cache", action="store_true", help="MiniLM vectors kept in bench/.cache")
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    add_embedder_option(parser)
    parser.add_argument(
        "--offline-default",
        action="store_true",
        help="the server picks its own embedder with no key (EMBEDDING_PROVIDER=auto: the local MiniLM "
        "where installed); --embedder then sets the baselines' dense embedder only",
    )
    parser.add_argument("--verbose", action="store_true")


def embeddings_url(args: argparse.Namespace, endpoint: EmbeddingServer) -> str | None:
    """The local embedding endpoint the server is given: MiniLM over the OpenAI path, unless the
    server picks its own embedder (``--offline-default``) or hashes."""
    return endpoint.base_url if args.embedder == "minilm" and not args.offline_default else None


def settings_note(args: argparse.Namespace) -> str:
    """The section's settings line for a run through ``smriti-mcp``."""
    return (
        "smriti-mcp over stdio, default settings and no key: the offline default embedder "
        f"(EMBEDDING_PROVIDER=auto), {args.embedder} for the baselines"
        if args.offline_default
        else f"smriti-mcp over stdio, default settings, {args.embedder} embeddings"
        + (" over the OpenAI-compatible path (384 dims)" if args.embedder == "minilm" else " (1536 dims)")
    ) + ", heuristic analyser, consolidation once after the stores, real clock"


def latency_table(timing: dict[str, list[float]], calls: tuple[tuple[str, str], ...]) -> str:
    rows = [
        [what, *(round(v, 1) for v in (s["n"], s["p50"], s["p95"], s["mean"]))]
        for what, key in calls
        for s in [latency_summary(timing[key])]
    ]
    return markdown_table(["call", "n", "p50", "p95", "mean"], rows)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_server_options(parser)
    parser.add_argument("--max-turns", type=int, default=None, help="store only the first N turns")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    command = command_line("bench.locomo_mcp", argv)
    embedder = make_embedder(args.embedder, cache=args.embedding_cache)
    samples = split_samples(args.split, args.conversations)

    scores, timing = Scores(), defaultdict(list)
    started = time.perf_counter()
    turns_total = 0
    with (
        tempfile.TemporaryDirectory(prefix="smriti-locomo-mcp-") as folder,
        EmbeddingServer(embedder) as endpoint,
    ):
        url = embeddings_url(args, endpoint)
        for sample in samples:
            turns = conversation_turns(sample, args.max_turns)
            known = {t.dia_id for t in turns} if args.max_turns else None
            questions, _ = conversation_questions(sample, args.questions, known)
            turns_total += len(turns)
            documents = [(t.dia_id, t.content) for t in turns]
            rank_with_baselines(documents, questions, embedder, PLAIN_BM25, scores.add, timing, max(KS))
            storage = Path(folder) / sample["sample_id"]
            storage.mkdir()
            env = server_env(
                storage, sample["sample_id"], url, getattr(embedder, "dims", None), args.offline_default
            )
            rankings, mcp_timing = anyio.run(
                ask_through_mcp, env, turns, questions, Path(folder) / "server.log"
            )
            for question, ranked in zip(questions, rankings, strict=True):
                scores.add(SMRITI_MCP, question, ranked)
            for key, values in mcp_timing.items():
                timing[f"mcp:{key}"].extend(values)
    elapsed = time.perf_counter() - started

    systems = [SMRITI_MCP, BM25Retriever.name, PLAIN_BM25, DenseRetriever.name, FusionRetriever.name]
    consolidate_ms = statistics.fmean(timing["mcp:consolidate"])
    body = (
        section_preamble(command, settings_note(args))
        + f"- Data: conversations {', '.join(s['sample_id'] for s in samples)}; {turns_total} turns; "
        f"wall time {elapsed:.0f} s; load average at the end {os.getloadavg()[0]:.1f}\n\n"
        + quality_tables(scores, systems)
        + "\n### Through MCP (ms, client side)\n\n"
        + latency_table(timing, (("smriti_store", "mcp:store"), ("smriti_recall", "mcp:recall")))
        + f"\n\nConsolidation, one call a conversation: {consolidate_ms:.0f} ms mean.\n"
    )
    print(body)
    write_embedder_section(
        f"locomo-mcp-{args.split}" + ("-offline-default" if args.offline_default else ""),
        f"LoCoMo through MCP, {args.split} conversations"
        + (", offline default" if args.offline_default else ""),
        args.embedder,
        body,
        args.results,
    )
    return {"scores": scores, "timing": timing, "systems": systems, "body": body}


if __name__ == "__main__":
    main()
