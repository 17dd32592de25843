"""LoCoMo retrieval benchmark: evidence recall@k of Smriti against keyword and dense baselines.

Run from the repository root::

    .venv/bin/python -m bench.locomo                          # all 5 conversations, 999 questions
    .venv/bin/python -m bench.locomo --conversations 1 --questions 20   # a quick slice

Each conversation gets its own store (one user per conversation). Every dialogue turn is
one memory: content ``"Speaker: text"`` (plus ``[image: caption]`` when the turn shared a
picture), source = the session (``session_3``), occurred_at = the session's date (the
memory's time). The memory's clock is frozen one hour after the last session, so recency and
time windows see the conversation's own timeline. After storing, consolidation runs once at
that time (Leiden clusters, the HNSW/FTS indexes) with ``prune_threshold=0`` so that old turns
fade but are not deleted.

Then every question is asked, in this order, against the same store:

1. Smriti recall (full pipeline: cues + vector + full text, hops, clusters, composite score);
2. Smriti recall with relevance-only scoring (recency/importance/decay weights 0), an
   ablation that shows what the composite score's non-relevance terms do;
3. Smriti search (vector only).

Recall reinforces what it returns (access count, last access, decay factor), so questions
asked earlier change later rankings, as they would in use; modes 2 and 3 ignore those fields.
The baselines (``bench/baselines.py``: BM25, dense cosine with the same hashing embedder,
and their reciprocal-rank fusion) index the same turns. Recall@k = |evidence in top k| /
|evidence|; hit@k = at least one evidence turn in the top k. "All" averages the questions of
categories 1-4 (micro average); category 5 (adversarial) is reported on its own.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.baselines import BM25Retriever, DenseRetriever, FusionRetriever, rank_with_baselines
from bench.common import (
    RecallScores,
    add_embedder_option,
    bench_settings,
    command_line,
    data_dir,
    embedder_dims,
    latency_summary,
    lost_hit_rows,
    make_embedder,
    markdown_table,
    ratio,
    section_preamble,
    setup_logging,
    spaced,
    step_time_table,
    stopwatch,
    write_embedder_section,
)

logger = logging.getLogger("smriti.bench.locomo")

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
SCORED = (1, 2, 3, 4)
KS = (5, 10)
# The full pipeline takes ~0.7 s a question here (see the step timings in RESULTS.md), so the
# default asks 20 evenly spaced questions of each conversation (100 in all, ~7 minutes on 2 cores);
# ``--questions 0`` asks all 999 (about 30 minutes).
DEFAULT_QUESTIONS = 20
SMRITI_RECALL = "Smriti recall (full pipeline)"
SMRITI_RELEVANCE = "Smriti recall, relevance-only score (ablation)"
SMRITI_SEARCH = "Smriti search (vector only)"
# Each stage off in turn (``--ablation``): system name -> the settings that turn it off.
ABLATIONS = {
    "- hub names left out of the query embedding (query_hub_names=false)": {"query_hub_names": False},
    "- the turn after favoured (context_backward=1)": {"context_backward": 1.0},
    "- both": {"query_hub_names": False, "context_backward": 1.0},
    "- conversation context (context_weight=0)": {"context_weight": 0.0},
    "- cross-reference boost (boost 1.0)": {"memory_fabric_boost_factor": 1.0},
    "- who a memory is about (subject_weight=0)": {"subject_weight": 0.0},
    "- the bridge to what the best hits name (bridge_weight=0)": {"bridge_weight": 0.0},
    "- query focus (entity, subject, intent and time weights 0)": {
        "entity_hint_weight": 0.0,
        "subject_weight": 0.0,
        "intent_type_weight": 0.0,
        "time_window_weight": 0.0,
    },
    "- score share in fusion (fusion_score_share=0: ranks only)": {"fusion_score_share": 0.0},
    # Off by default (each measured below 2 points): what turning each on does.
    "+ multi-hop expansion (max_hops=2)": {"max_hops": 2},
    "+ relation traversal (relation_traversal=true)": {"relation_traversal": True},
    "+ multi-hop + relation traversal (the pipeline before issue 25)": {
        "max_hops": 2,
        "relation_traversal": True,
    },
    "+ spreading activation (graph_activation=true)": {"graph_activation": True},
    "+ episodes (episode_weight=0.6, episode_evidence=1)": {"episode_weight": 0.6, "episode_evidence": 1},
    "+ spread over episodes (max_per_episode=4)": {"max_per_episode": 4},
}
# Public conversations used to choose the weights and thresholds of the new stages (tune), and
# the ones reported as held out: the figures that count are the held-out ones.
SPLITS = {"tune": (0, 1), "heldout": (2, 3, 4), "all": (0, 1, 2, 3, 4)}
PLAIN_BM25 = "BM25, plain words (as in the reference figures)"
REFERENCE_R10 = {"Dense (MiniLM)": 0.49, "BM25": 0.52, "RRF": 0.57}
REFERENCE_R5 = {"Dense (MiniLM)": 0.40, "BM25": 0.45, "RRF": 0.48}


@dataclass
class Turn:
    dia_id: str
    session: str
    when: datetime
    content: str


@dataclass
class Question:
    text: str
    category: int
    evidence: list[str]


class Scores(RecallScores):
    """Per system: one row per question (category, recall@k..., hit@k...), see :class:`RecallScores`."""

    def __init__(self) -> None:
        super().__init__(KS)

    def add(self, system: str, question: Question, ranked: list[list[str]]) -> None:
        self.record(system, question.category, question.evidence, ranked)
        # Session level: the question's evidence sessions, found when any returned turn is of one.
        sessions = [[dia.split(":")[0] for dia in ids] for ids in ranked]
        self.rows[system][-1][1]["S@10"] = len(
            {d.split(":")[0] for d in question.evidence} & {s for ids in sessions[:10] for s in ids}
        ) / len({d.split(":")[0] for d in question.evidence})


# -- data -----------------------------------------------------------------------------------


def normalise_evidence(raw: list[str]) -> list[str]:
    """``"D8:6; D9:17"`` -> D8:6, D9:17; ``"D:11:26"`` -> D11:26; ``"D30:05"`` -> D30:5; junk dropped."""
    out: list[str] = []
    for item in raw:
        for piece in re.split(r"[;,\s]+", item):
            match = re.fullmatch(r"D:?(\d+):(\d+)", piece.strip())
            if match:
                dia = f"D{int(match[1])}:{int(match[2])}"
                if dia not in out:
                    out.append(dia)
    return out


def split_samples(split: str, conversations: int | None = None) -> list[dict[str, Any]]:
    """The conversations of ``split`` (``SPLITS``), the first ``conversations`` of them when given."""
    every = json.loads((data_dir() / "locomo_public.json").read_text())
    return [every[i] for i in SPLITS[split] if i < len(every)][:conversations]


def session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` as an aware UTC datetime."""
    return datetime.strptime(text, "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def conversation_turns(sample: dict[str, Any], max_turns: int | None = None) -> list[Turn]:
    conversation = sample["conversation"]
    sessions = sorted(
        (k for k in conversation if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
    )
    turns = []
    for session in sessions:
        when = session_time(conversation[f"{session}_date_time"])
        for turn in conversation[session]:
            content = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                content += f" [image: {turn['blip_caption']}]"
            turns.append(Turn(turn["dia_id"], session, when, content))
    return turns[:max_turns] if max_turns else turns


def conversation_questions(
    sample: dict[str, Any], limit: int | None, known: set[str] | None = None
) -> tuple[list[Question], int]:
    """``limit`` questions with usable evidence, evenly spaced over the file, and how many had none.

    With ``known`` (the dia_ids stored), only questions whose evidence is all among them count.
    """
    questions, skipped = [], 0
    for qa in sample["qa"]:
        evidence = normalise_evidence(qa.get("evidence", []))
        if known is not None and not set(evidence) <= known:
            continue
        if not evidence:
            skipped += 1
            continue
        questions.append(Question(qa["question"], int(qa["category"]), evidence))
    return spaced(questions, limit), skipped


# -- one conversation ---------------------------------------------------------------------------


def run_conversation(
    turns: list[Turn],
    sample: dict[str, Any],
    questions: list[Question],
    storage: Path,
    scores: Scores,
    timing: dict[str, list],
    embedder: Any,
    variants: dict[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Index the turns in the baselines and Smriti, ask every question; returns per-question traces."""
    from smriti.memory import Memory

    end = max(t.when for t in turns) + timedelta(hours=1)

    documents = [(turn.dia_id, turn.content) for turn in turns]
    bm25_ranked = rank_with_baselines(documents, questions, embedder, PLAIN_BM25, scores.add, timing, max(KS))

    settings = bench_settings(storage, prune_threshold=0.0, embedding_dims=embedder_dims(embedder))
    memory = Memory.open(settings, user=sample["sample_id"], llm=None, embedder=embedder)
    memory.context.clock = lambda: end
    dia_of: dict[str, list[str]] = defaultdict(list)
    last_session = turns[-1].session
    try:
        for turn in turns:
            with stopwatch(timing["store:smriti"]):
                stored = memory.store(turn.content, source=turn.session, occurred_at=turn.when)
            dia_of[stored["id"]].append(turn.dia_id)
        started = time.perf_counter()
        memory.consolidate(now=end)
        timing["consolidate"].append((time.perf_counter() - started) * 1000)

        def ask(system: str, mode: str, explain: bool = False) -> list[dict[str, Any]]:
            out = []
            for index, q in enumerate(questions):
                with stopwatch(timing[f"recall:{system}"]):
                    result = memory.recall(q.text, limit=max(KS), mode=mode, explain=explain)
                ranked = [dia_of.get(item["id"], []) for item in result["results"]]
                scores.add(system, q, ranked)
                if explain:
                    out.append(explain_record(q, result, ranked, bm25_ranked[index], dia_of, last_session))
            return out

        # The full pipeline first: the passes after it do not depend on what it reinforced.
        records = ask(SMRITI_RECALL, "recall", explain=True)
        default_settings = memory.context.settings
        memory.context.settings = default_settings.model_copy(
            update={"score_weight_recency": 0.0, "score_weight_importance": 0.0, "score_weight_decay": 0.0}
        )
        ask(SMRITI_RELEVANCE, "recall")
        memory.context.settings = default_settings
        ask(SMRITI_SEARCH, "search")
        for system, off in (variants or {}).items():
            memory.context.settings = default_settings.model_copy(update=off)
            ask(system, "recall")
        memory.context.settings = default_settings
        return records
    finally:
        memory.close()


def explain_record(q, result, ranked, bm25_ranked, dia_of, last_session) -> dict[str, Any]:
    """What one explained recall tells: node timings, result ids, and, for a question BM25 finds in
    its top 10 but Smriti misses, the best evidence rank among each trace step's candidates
    (the trace keeps 25 per step) and the score components of the returned top 10."""
    evidence = set(q.evidence)
    record: dict[str, Any] = {
        "category": q.category,
        "node_ms": {entry["node"]: entry["ms"] for entry in result["trace"]},
        "ids": [item["id"] for item in result["results"]],
        "last_session": sum(1 for item in result["results"] if item["source"] == last_session),
        "miss": False,
    }
    smriti_hit = any(set(ids) & evidence for ids in ranked[:10])
    bm25_hit = any(set(ids) & evidence for ids in bm25_ranked[:10])
    if bm25_hit and not smriti_hit:
        ranks = {}
        for entry in result["trace"]:
            hit = [i for i, c in enumerate(entry["candidates"]) if set(dia_of.get(c["id"], [])) & evidence]
            ranks[entry["node"]] = hit[0] + 1 if hit else None
        parts = ("similarity", "recency", "importance", "decay")
        record.update(
            miss=True,
            ranks=ranks,
            components={p: statistics.fmean(i["components"][p] for i in result["results"]) for p in parts},
        )
    return record


# -- report -----------------------------------------------------------------------------------


def quality_tables(scores: Scores, systems: list[str]) -> str:
    headers = ["system", *(f"R@{k}" for k in KS), *(f"H@{k}" for k in KS), "session R@10"]
    overall = markdown_table(
        [*headers, "questions"],
        [
            [
                s,
                *(scores.mean(s, SCORED, f"{m}@{k}") for m in "RH" for k in KS),
                scores.mean(s, SCORED, "S@10"),
                scores.count(s, SCORED),
            ]
            for s in systems
        ],
    )
    per_category = []
    for k in KS:
        cats = [c for c in CATEGORIES if scores.count(systems[0], (c,))]
        per_category.append(
            markdown_table(
                ["system", *(f"{CATEGORIES[c]} ({scores.count(systems[0], (c,))})" for c in cats)],
                [[s, *(scores.mean(s, (c,), f"R@{k}") for c in cats)] for s in systems],
            )
        )
    return (
        "### Evidence recall, categories 1-4 (micro average over questions)\n\n"
        f"{overall}\n\n### Recall@5 per category (questions)\n\n{per_category[0]}\n\n"
        f"### Recall@10 per category (questions)\n\n{per_category[1]}\n"
    )


def speed_tables(timing: dict[str, list], systems: list[str]) -> str:
    store_rows = []
    base_store = latency_summary(timing["store:bm25"])["mean"]
    for label, key in (("Smriti store pipeline", "store:smriti"), ("BM25 add", "store:bm25"),
                       ("Dense add (embed + append)", "store:dense")):  # fmt: skip
        s = latency_summary(timing[key])
        store_rows.append([label, s["n"], 1000 / s["mean"], s["mean"], s["p50"], s["p95"],
                           ratio(s["mean"], base_store)])  # fmt: skip
    bm25 = latency_summary(timing[f"recall:{BM25Retriever.name}"])["mean"]
    dense = latency_summary(timing[f"recall:{DenseRetriever.name}"])["mean"]
    recall_rows = []
    for system in systems:
        s = latency_summary(timing[f"recall:{system}"])
        recall_rows.append([system, s["n"], s["mean"], s["p50"], s["p95"], ratio(s["mean"], bm25),
                            ratio(s["mean"], dense)])  # fmt: skip
    consolidate = latency_summary(timing["consolidate"])
    return (
        "### Store (per turn, ms)\n\n"
        + markdown_table(["path", "turns", "turns/s", "mean", "p50", "p95", "x BM25 mean"], store_rows)
        + f"\n\nConsolidation once per conversation (Leiden, indexes): mean {consolidate['mean']:.0f} ms.\n\n"
        "### Recall (per question, top 10, ms)\n\n"
        + markdown_table(
            ["system", "queries", "mean", "p50", "p95", "x BM25 mean", "x dense mean"], recall_rows
        )
        + "\n"
    )


def diagnosis_text(records: list[dict[str, Any]]) -> str:
    """The full pipeline's explain traces: time per step, result diversity, and where BM25's hits got lost."""
    slots = sum(len(r["ids"]) for r in records)
    distinct = len({id_ for r in records for id_ in r["ids"]})  # uuids: unique across conversations
    last = sum(r["last_session"] for r in records)
    text = (
        step_time_table(records)
        + f"\n\nThe full pipeline returned {distinct} distinct memories in {slots} top-10 slots "
        f"({distinct / max(slots, 1):.2f} distinct per slot); {last / max(slots, 1):.0%} of the slots "
        "hold a turn of the conversation's last session.\n\n"
    )
    misses = [r for r in records if r["miss"]]
    if not misses:
        return text + "No question was found by BM25 in its top 10 and missed by Smriti recall.\n"
    steps = ["cue_traverse", "vector_search", "fulltext_search", "gather", "cross_reference",
             "score"]  # fmt: skip
    rows = lost_hit_rows(misses, steps)
    parts = misses[0]["components"].keys()
    components = ", ".join(f"{p} {statistics.fmean(r['components'][p] for r in misses):.3f}" for p in parts)
    return (
        text
        + f"#### Where Smriti recall loses BM25's hits\n\n{len(misses)} questions had evidence in BM25's "
        "top 10 but not in Smriti recall's top 10. Per trace step of those same runs: in how many an "
        "evidence turn is among the step's candidates (the trace keeps the first 25), in how many within "
        "the first 10, and its median rank there (`cross_reference` is the ranking by fused relevance "
        "just before the composite score).\n\n"
        + markdown_table(["trace step", "evidence among candidates", "within top 10", "median rank"], rows)
        + f"\n\nMean weighted score components of the top 10 returned for these questions: {components} "
        "(similarity = 0.4 x fused relevance).\n"
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=None, help="first N conversations (default all)")
    parser.add_argument(
        "--split",
        choices=sorted(SPLITS),
        default="all",
        help="tune = conversations 0-1 (where the new stages' weights were chosen), heldout = 2-4, all",
    )
    parser.add_argument("--ablation", action="store_true", help="also run the pipeline with each stage off")
    parser.add_argument(
        "--variants",
        type=Path,
        default=None,
        help="a JSON file {name: {setting: value}} run instead of the built-in ablation (for tuning)",
    )
    parser.add_argument(
        "--embedding-cache", action="store_true", help="remember MiniLM vectors in bench/.cache between runs"
    )
    parser.add_argument(
        "--questions",
        type=int,
        default=DEFAULT_QUESTIONS,
        help=f"N evenly spaced questions per conversation (default {DEFAULT_QUESTIONS}; 0 = all)",
    )
    parser.add_argument(
        "--max-turns", type=int, default=None, help="store only the first N turns (questions on them only)"
    )
    parser.add_argument("--results", type=Path, default=None, help="results file (default bench/RESULTS.md)")
    add_embedder_option(parser)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    variants = json.loads(args.variants.read_text()) if args.variants else ABLATIONS if args.ablation else {}
    embedder = make_embedder(args.embedder, cache=args.embedding_cache)
    setup_logging(args.verbose)
    command = command_line("bench.locomo", argv)
    samples = split_samples(args.split, args.conversations)

    scores, timing = Scores(), defaultdict(list)
    records: list[dict[str, Any]] = []
    skipped = turns = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="smriti-locomo-") as folder:
        for sample in samples:
            kept = conversation_turns(sample, args.max_turns)
            known = {t.dia_id for t in kept} if args.max_turns else None
            questions, dropped = conversation_questions(sample, args.questions, known)
            skipped += dropped
            turns += len(kept)
            logger.info("%s: %d turns, %d questions", sample["sample_id"], len(kept), len(questions))
            records += run_conversation(
                kept, sample, questions, Path(folder), scores, timing, embedder, variants
            )
    elapsed = time.perf_counter() - started

    systems = [SMRITI_RECALL, SMRITI_RELEVANCE, SMRITI_SEARCH, BM25Retriever.name, PLAIN_BM25,
               DenseRetriever.name, FusionRetriever.name]  # fmt: skip
    systems += list(variants)
    total_q = sum(len(rows) for rows in [scores.rows[SMRITI_RECALL]])
    body = (
        section_preamble(
            command,
            f"sqlite store, {type(embedder).__name__}({embedder_dims(embedder)}), "
            "heuristic analyser (llm=None), "
            "scoring_profile=composite (defaults), prune_threshold=0, clock frozen 1 h after the last "
            "session",
        )
        + f"- Split: {args.split} (conversations {', '.join(s['sample_id'] for s in samples)}); the new "
        "stages' weights were chosen on conv-26 and conv-30 (split tune)\n"
        + (
            "- Embeddings cached between runs (bench/.cache): recall latencies below exclude "
            "embedding the query\n"
            if args.embedding_cache
            else ""
        )
        + f"- Data: {len(samples)} conversation(s), {turns} turns, {total_q} questions "
        f"({skipped} without usable evidence skipped); wall time {elapsed:.0f} s\n\n"
        + quality_tables(scores, systems)
        + "\nReference figures (shared/bench/README.md, all-MiniLM-L6-v2, categories 1-4): "
        + ", ".join(f"{k} R@10 {v:.2f}" for k, v in REFERENCE_R10.items())
        + "; "
        + ", ".join(f"{k} R@5 {v:.2f}" for k, v in REFERENCE_R5.items())
        + ".\n\n"
        + speed_tables(timing, systems)
        + "\n### Inside the full pipeline\n\n"
        + diagnosis_text(records)
    )
    print(body)
    name = "locomo" if args.split == "all" else f"locomo-{args.split}"
    title = "LoCoMo evidence retrieval" + ("" if args.split == "all" else f", {args.split} conversations")
    write_embedder_section(name, title, args.embedder, body, args.results)
    return {"scores": scores, "timing": timing, "systems": systems, "records": records, "body": body}


if __name__ == "__main__":
    main()
