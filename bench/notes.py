"""LoCoMo observations as short notes: recall of IDE-style facts, in process, every variant on one store.

Run from the repository root::

    .venv/bin/python -m bench.notes --split tune --embedder minilm --embedding-cache   # choose here
    .venv/bin/python -m bench.notes --split heldout --embedder minilm --embedding-cache --ablation

Each conversation's ``observation`` facts (``[fact, evidence]`` per speaker per session; see
shared/bench/README.md) are stored one fact per memory: content = the fact, ``occurred_at`` = the
session's date, no ``source``; clock frozen 1 h after the last session, one consolidation. The
store is built once and kept in ``bench/.cache/notes-stores/<embedder>-<conversation>/``
(``bench/tuning.py``). The QA questions of categories 1-4 are asked; a note is relevant when one
of its evidence dia_ids is among the question's evidence (both normalised as ``bench.locomo``
does); questions with no relevant note are skipped.

Systems: every variant of Smriti recall (the defaults first; ``--variants v.json`` or
``--ablation`` = ``bench.locomo.ABLATIONS``), none reinforcing, Smriti search (mode=search,
vector only), and the same-run baselines of ``bench/baselines.py`` over the same notes: BM25
(Smriti's tokenizer and plain words), dense cosine with the same embedder, and the
reciprocal-rank fusion of BM25 and dense. R@k = share of the question's relevant notes in the top
k; Hit@k = at least one there. "All" is the micro average over the questions of categories 1-4
(the average ``bench.locomo`` reports); each category is shown on its own too.
"""

from __future__ import annotations

import argparse
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.baselines import BM25Retriever, DenseRetriever, FusionRetriever, rank_with_baselines
from bench.common import (
    CACHE_DIR,
    RecallScores,
    command_line,
    markdown_table,
    setup_logging,
    spaced,
)
from bench.locomo import (
    ABLATIONS,
    CATEGORIES,
    PLAIN_BM25,
    SCORED,
    SPLITS,
    normalise_evidence,
    session_time,
    split_samples,
)
from bench.tuning import (
    Document,
    Variants,
    add_tuning_options,
    ask_variants,
    cached_store,
    load_variants,
    tuning_embedder,
)

KS = (1, 5, 10)
STORES = "notes-stores"
SMRITI_SEARCH = "Smriti search (vector only)"
BASELINES = [BM25Retriever.name, PLAIN_BM25, DenseRetriever.name, FusionRetriever.name]


@dataclass
class Note:
    key: str  # N<session>:<speaker>:<index>, unique in its conversation
    content: str
    when: datetime
    evidence: list[str]


@dataclass
class NoteQuestion:
    text: str
    category: int
    relevant: list[str]  # note keys


class NoteScores(RecallScores):
    """Per system, one row per question: (category, R@k, H@k, both@k for k in 1, 5, 10)."""

    def __init__(self) -> None:
        super().__init__(KS)

    def add(self, system: str, question: NoteQuestion, ranked: list[list[str]]) -> None:
        self.record(system, question.category, question.relevant, ranked)


# -- data -----------------------------------------------------------------------------------


def conversation_notes(sample: dict[str, Any]) -> list[Note]:
    """Every observation of the conversation, in session order, with its session's date."""
    conversation, observation = sample["conversation"], sample["observation"]
    sessions = sorted(observation, key=lambda k: int(re.search(r"\d+", k)[0]))
    notes = []
    for key in sessions:
        number = int(re.search(r"\d+", key)[0])
        when = session_time(conversation[f"session_{number}_date_time"])
        for speaker, facts in observation[key].items():
            for index, (fact, evidence) in enumerate(facts):
                ids = normalise_evidence([evidence] if isinstance(evidence, str) else list(evidence))
                notes.append(Note(f"N{number}:{speaker}:{index}", fact, when, ids))
    return notes


def note_questions(sample: dict[str, Any], notes: list[Note], limit: int | None = None) -> list[NoteQuestion]:
    """The questions of categories 1-4 with at least one relevant note (``limit`` evenly spaced)."""
    notes_of: dict[str, list[str]] = defaultdict(list)
    for note in notes:
        for dia in note.evidence:
            notes_of[dia].append(note.key)
    questions = []
    for qa in sample["qa"]:
        if int(qa["category"]) not in SCORED:
            continue
        relevant = [
            key for dia in normalise_evidence(qa.get("evidence", [])) for key in notes_of.get(dia, [])
        ]
        if relevant:
            questions.append(NoteQuestion(qa["question"], int(qa["category"]), list(dict.fromkeys(relevant))))
    return spaced(questions, limit)


def notes_end(notes: list[Note]) -> datetime:
    return max(n.when for n in notes) + timedelta(hours=1)


# -- runs ---------------------------------------------------------------------------------------


def tune_scores(
    split: str,
    embedder: Any,
    embedder_name: str,
    variants: Variants,
    cache: Path = CACHE_DIR,
    rebuild: bool = False,
    conversations: int | None = None,
    questions: int | None = None,
    baselines: bool = False,
    scores: NoteScores | None = None,
    asker: Callable[..., None] = ask_variants,
) -> NoteScores:
    """Every variant's answers (and, with ``baselines``, Smriti search and the baselines') to the
    notes questions of ``split``; ``questions`` evenly spaced per conversation when given."""
    scores = scores if scores is not None else NoteScores()
    timing: dict[str, list] = defaultdict(list)
    for sample in split_samples(split, conversations):
        notes = conversation_notes(sample)
        asked = note_questions(sample, notes, questions)
        user, end = sample["sample_id"], notes_end(notes)
        folder = cache / STORES / f"{embedder_name}-{user}"
        documents = [Document(n.key, n.content, "", n.when) for n in notes]
        keys_of = cached_store(folder, user, embedder, end, documents, rebuild)
        search = SMRITI_SEARCH if baselines else None
        asker(folder, user, embedder, end, keys_of, asked, variants, scores.add, search=search)
        if baselines:
            warm = getattr(embedder, "warm", None)
            if warm is not None:
                warm(q.text for q in asked)
            pairs = [(n.key, n.content) for n in notes]
            rank_with_baselines(pairs, asked, embedder, PLAIN_BM25, scores.add, timing, max(KS))
    return scores


def tables(scores: NoteScores, systems: list[str]) -> str:
    """An overall table (micro average over categories 1-4) and one table per category."""
    metrics = ("R@1", "R@5", "R@10", "H@5")

    def rows(groups: tuple[int, ...]) -> list[list[Any]]:
        return [[s, *(scores.mean(s, groups, m) for m in metrics)] for s in systems]

    head = ["system", "R@1", "R@5", "R@10", "Hit@5"]
    parts = [
        f"### All, categories 1-4 ({scores.count(systems[0], SCORED)} questions, micro average)\n\n"
        + markdown_table(head, rows(SCORED))
    ]
    for c in SCORED:
        if scores.count(systems[0], (c,)):
            parts.append(
                f"### {CATEGORIES[c]} ({scores.count(systems[0], (c,))} questions)\n\n"
                + markdown_table(head, rows((c,)))
            )
    return "\n\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=sorted(SPLITS), default="tune")
    parser.add_argument("--conversations", type=int, default=None, help="first N conversations of the split")
    parser.add_argument(
        "--questions", type=int, default=None, help="N evenly spaced questions a conversation"
    )
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
        args.conversations,
        args.questions,
        baselines=True,
    )
    systems = [*variants, SMRITI_SEARCH, *BASELINES]
    samples = split_samples(args.split, args.conversations)
    body = (
        f"Command: `{command_line('bench.notes', argv)}`\n\n"
        f"Notes, {args.split} split ({', '.join(s['sample_id'] for s in samples)}), {args.embedder} "
        f"embeddings; Smriti variants without reinforcement; {time.perf_counter() - started:.0f} s\n\n"
        + tables(scores, systems)
    )
    print(body)
    return {"scores": scores, "systems": systems, "variants": list(variants), "body": body}


if __name__ == "__main__":
    main()
