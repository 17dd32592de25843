"""Team notes asked in other words: the paraphrase benchmark, in process, every variant on one store.

Run from the repository root::

    .venv/bin/python -m bench.paraphrase --split tune --embedder minilm --embedding-cache   # choose here
    .venv/bin/python -m bench.paraphrase --split heldout --embedder minilm --embedding-cache --ablation

The data are in ``bench/paraphrase/`` (hand-written for this benchmark; ``docs/recall.md`` says how):
``notes.jsonl``, short notes of an engineering team's IDE memory (``id``, ``kind``, ``content``,
``occurred_at``), and ``questions.jsonl``: one question per note asked by someone who forgot its
words, questions that need two notes (``kind`` = ``two-note``, both ids relevant) and questions
that name the tool, service, team or person (``names_thing``). Each question has a ``split``
(tune or heldout, alternating within a kind).

Every note of the set is stored into ONE memory (as a team's memory is), one store each, without
``source``, with ``occurred_at``; clock frozen 1 h after the last note, one consolidation; the
store is kept in ``bench/.cache/paraphrase-stores/<embedder>-team/`` (``bench/tuning.py``). Then
the split's questions are asked by every variant of Smriti recall (the defaults first;
``--variants v.json`` or ``--ablation`` = ``bench.locomo.ABLATIONS``), none reinforcing, by Smriti
search (mode=search, vector only) and by the same-run baselines of ``bench/baselines.py`` over the
same notes: BM25 (Smriti's tokenizer, and plain words), dense cosine with the same embedder, and
the reciprocal-rank fusion of BM25 and dense.

Scoring is strict about merged notes: a result counts for the note whose store created it only,
so a note the store merged into a sibling ("The S3 client was configured ..." into "The Redis
client ...") is lost, as it is for a user; the report counts such merges. R@k = share of the
question's relevant notes in the top k (R@1 = top-1 for one-note questions), MRR = 1 / rank of the
first relevant note in the top 10 (0 when none). Tables: all questions, the paraphrased ones (one
note, the thing not named), those that name the thing, the two-note ones, and each kind.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.baselines import BM25Retriever, DenseRetriever, FusionRetriever, rank_with_baselines
from bench.common import CACHE_DIR, RecallScores, command_line, markdown_table, setup_logging
from bench.locomo import ABLATIONS
from bench.tuning import (
    DEFAULTS,
    Document,
    Variants,
    add_tuning_options,
    ask_variants,
    cached_store,
    load_variants,
    tuning_embedder,
)

DATA = Path(__file__).resolve().parent / "paraphrase"
KS = (1, 5, 10)
SPLITS = ("tune", "heldout")
KINDS = ("decision", "owner", "convention", "incident", "version", "date", "preference", "config",
         "meeting", "list")  # fmt: skip
TWO_NOTE = "two-note"
USER = "team"
STORES = "paraphrase-stores"
SMRITI_SEARCH = "Smriti search (vector only)"
PLAIN_BM25 = "BM25 (plain words)"
BASELINES = [BM25Retriever.name, PLAIN_BM25, DenseRetriever.name, FusionRetriever.name]
# Every group a question can fall in: (split, kind, names the thing); shapes averages over all.
GROUPS = tuple((s, k, n) for s in SPLITS for k in (*KINDS, TWO_NOTE) for n in (False, True))
METRICS = ("R@1", "R@5", "R@10", "MRR")
SHORT = {  # column titles of the systems
    DEFAULTS: "recall",
    SMRITI_SEARCH: "search",
    BM25Retriever.name: "BM25",
    PLAIN_BM25: "BM25 plain",
    DenseRetriever.name: "dense",
    FusionRetriever.name: "RRF",
}


@dataclass(frozen=True)
class Note:
    key: str  # n001 ...
    kind: str
    content: str
    when: datetime


@dataclass(frozen=True)
class Question:
    key: str  # q001 ...
    text: str
    relevant: tuple[str, ...]  # note keys
    kind: str  # the note's kind, or "two-note"
    names_thing: bool
    split: str

    @property
    def group(self) -> tuple[str, str, bool]:
        return (self.split, self.kind, self.names_thing)


# -- data -----------------------------------------------------------------------------------


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_notes(folder: Path = DATA, limit: int | None = None) -> list[Note]:
    """The notes in file order (the first ``limit`` when given)."""
    notes = [
        Note(r["id"], r["kind"], r["content"], datetime.fromisoformat(r["occurred_at"]))
        for r in _rows(folder / "notes.jsonl")
    ]
    return notes[:limit] if limit else notes


def load_questions(
    split: str = "all", folder: Path = DATA, notes: Iterable[Note] | None = None
) -> list[Question]:
    """The questions of ``split`` (tune, heldout or all); with ``notes``, only those whose relevant
    notes are all among them (a slice for smoke tests)."""
    known = {n.key for n in notes} if notes is not None else None
    questions = [
        Question(r["id"], r["question"], tuple(r["relevant"]), r["kind"], bool(r["names_thing"]), r["split"])
        for r in _rows(folder / "questions.jsonl")
    ]
    return [q for q in questions if split in ("all", q.split) and (known is None or set(q.relevant) <= known)]


def notes_end(notes: list[Note]) -> datetime:
    return max(n.when for n in notes) + timedelta(hours=1)


# -- scores ---------------------------------------------------------------------------------


class ParaphraseScores(RecallScores):
    """Per system, one row per question: ((split, kind, names_thing), R@k, H@k, both@k, MRR).

    A result stands for the first note stored into it only (strict about merges); the notes merged
    into another note's memory that showed up in a result are kept in ``merged``.
    """

    def __init__(self) -> None:
        super().__init__(KS)
        self.merged: set[str] = set()

    def add(self, system: str, question: Question, ranked: list[list[str]]) -> None:
        for ids in ranked:
            self.merged.update(ids[1:])
        firsts = [ids[:1] for ids in ranked]
        self.record(system, question.group, question.relevant, firsts)
        wanted = set(question.relevant)
        rank = next((i for i, ids in enumerate(firsts[: max(KS)], 1) if wanted & set(ids)), None)
        self.rows[system][-1][1]["MRR"] = 1.0 / rank if rank else 0.0


def select(split: str, kind: str | None = None, names_thing: bool | None = None) -> tuple[Hashable, ...]:
    """The groups of ``split`` (or both for "all"), of one kind and/or names_thing when given."""
    return tuple(
        g for g in GROUPS if split in ("all", g[0]) and kind in (None, g[1]) and names_thing in (None, g[2])
    )


def row_groups(split: str) -> list[tuple[str, tuple[Hashable, ...]]]:
    """The rows of a table: all, paraphrased, names the thing, two-note, then each kind."""
    rows = [
        ("all", select(split)),
        ("paraphrased (one note)", tuple(g for g in select(split, names_thing=False) if g[1] != TWO_NOTE)),
        ("names the thing", select(split, names_thing=True)),
        (TWO_NOTE, select(split, TWO_NOTE)),
    ]
    return rows + [(kind, select(split, kind)) for kind in KINDS]


def tables(
    scores: ParaphraseScores, systems: list[str], split: str, short: dict[str, str] | None = None
) -> str:
    """One table per metric: a row per group of questions, a column per system."""
    names = {**SHORT, **(short or {})}
    head = ["questions", "n", *(names.get(s, s) for s in systems)]
    groups = [(label, g) for label, g in row_groups(split) if scores.count(systems[0], g)]
    parts = []
    for metric in METRICS:
        rows = [[label, scores.count(systems[0], g), *(scores.mean(s, g, metric) for s in systems)]
                for label, g in groups]  # fmt: skip
        title = "top-1 (R@1)" if metric == "R@1" else ("MRR (top 10)" if metric == "MRR" else metric)
        parts.append(f"#### {title}, {split}\n\n" + markdown_table(head, rows))
    return "\n\n".join(parts) + "\n"


def report(scores: ParaphraseScores, systems: list[str], splits: Iterable[str], short=None) -> str:
    """The tables of each split, and the merge count."""
    body = "".join(
        f"### {split} questions\n\n" + tables(scores, systems, split, short) + "\n" for split in splits
    )
    merged = ", ".join(sorted(scores.merged)) or "none"
    return body + f"Notes merged into another note's memory (seen in results): {merged}.\n"


def report_splits(split: str) -> list[str]:
    return [*SPLITS, "all"] if split == "all" else [split]


# -- runs -----------------------------------------------------------------------------------


def tune_scores(
    split: str,
    embedder: Any,
    embedder_name: str,
    variants: Variants,
    cache: Path = CACHE_DIR,
    rebuild: bool = False,
    notes_limit: int | None = None,
    baselines: bool = False,
    scores: ParaphraseScores | None = None,
    asker: Callable[..., None] = ask_variants,
) -> ParaphraseScores:
    """Every variant's answers (and, with ``baselines``, Smriti search and the baselines') to the
    questions of ``split``; all notes are stored (the first ``notes_limit`` when given, and only
    the questions they answer are asked)."""
    scores = scores if scores is not None else ParaphraseScores()
    notes = load_notes(limit=notes_limit)
    asked = load_questions(split, notes=notes)
    end = notes_end(notes)
    suffix = f"-first{notes_limit}" if notes_limit else ""
    folder = cache / STORES / f"{embedder_name}-{USER}{suffix}"
    documents = [Document(n.key, n.content, "", n.when) for n in notes]
    keys_of = cached_store(folder, USER, embedder, end, documents, rebuild)
    search = SMRITI_SEARCH if baselines else None
    asker(folder, USER, embedder, end, keys_of, asked, variants, scores.add, search=search)
    if baselines:
        warm = getattr(embedder, "warm", None)
        if warm is not None:
            warm(q.text for q in asked)
        pairs = [(n.key, n.content) for n in notes]
        rank_with_baselines(pairs, asked, embedder, PLAIN_BM25, scores.add, defaultdict(list), max(KS))
    return scores


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=(*SPLITS, "all"), default="tune")
    parser.add_argument("--notes", type=int, default=None, help="store only the first N notes (smoke tests)")
    add_tuning_options(parser, "bench.locomo's ablation variants")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    variants = load_variants(args.variants, args.ablation, ABLATIONS)
    embedder = tuning_embedder(args)
    started = time.perf_counter()
    scores = tune_scores(
        args.split,
        embedder,
        args.embedder,
        variants,
        args.cache_dir,
        args.rebuild,
        args.notes,
        baselines=True,
    )
    systems = [*variants, SMRITI_SEARCH, *BASELINES]
    notes = len(load_notes(limit=args.notes))
    body = (
        f"Command: `{command_line('bench.paraphrase', argv)}`\n\n"
        f"Paraphrase set, {args.split} split: {notes} notes in one memory, "
        f"{scores.count(DEFAULTS, select(args.split))} questions; {args.embedder} embeddings; Smriti "
        f"variants without reinforcement; {time.perf_counter() - started:.0f} s\n\n"
        + report(scores, systems, report_splits(args.split))
    )
    print(body)
    return {"scores": scores, "systems": systems, "variants": list(variants), "body": body}


if __name__ == "__main__":
    main()
