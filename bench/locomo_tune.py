"""Fast LoCoMo tuning and ablation: every variant asked against the same stores, none reinforcing.

Run from the repository root::

    .venv/bin/python -m bench.locomo_tune --split tune --variants v.json    # choose weights here
    .venv/bin/python -m bench.locomo_tune --split heldout --ablation        # then check them here

``bench.locomo`` is the full benchmark (baselines, latencies, the explain trace, one reinforcing
pass before the variants). This one answers "does this stage help?" in minutes: each
conversation is stored once through the store pipeline and consolidated (kept in
``bench/.cache/locomo-stores/`` per embedder and conversation, so a second run only asks; pass
``--rebuild`` after changing what a store writes), and every variant, the defaults first, asks
every question of categories 1-4 with the recall pipeline built without its reinforce step, so no
variant shapes the next (``bench/tuning.py``).
A variant is ``{name: {setting: value}}``; ``--ablation`` runs ``bench.locomo.ABLATIONS``.
Prints a Markdown table (R@5, R@10, session R@10, R@10 per category; micro averages over the
questions of categories 1-4, as ``bench.locomo``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import CACHE_DIR, make_embedder, markdown_table, setup_logging, spaced
from bench.locomo import (
    ABLATIONS,
    CATEGORIES,
    SCORED,
    SPLITS,
    Scores,
    conversation_questions,
    conversation_turns,
    split_samples,
)
from bench.tuning import Document, Variants, add_tuning_options, ask_variants, cached_store, load_variants

STORES = "locomo-stores"


def tune_scores(
    split: str,
    embedder: Any,
    embedder_name: str,
    variants: Variants,
    cache: Path = CACHE_DIR,
    rebuild: bool = False,
    conversations: int | None = None,
    questions: int | None = None,
    max_turns: int | None = None,
    asker: Callable[..., None] = ask_variants,
) -> Scores:
    """Every variant's answers to the questions of categories 1-4 of ``split``, one store per
    conversation (turn = memory, source = session, occurred_at = session date, clock frozen 1 h
    after the last session). ``conversations``, ``questions`` (evenly spaced, per conversation)
    and ``max_turns`` take a slice."""
    scores = Scores()
    for sample in split_samples(split, conversations):
        turns = conversation_turns(sample, max_turns)
        end = max(t.when for t in turns) + timedelta(hours=1)
        user = sample["sample_id"]
        folder = cache / STORES / f"{embedder_name}-{user}"
        documents = [Document(t.dia_id, t.content, t.session, t.when) for t in turns]
        keys_of = cached_store(folder, user, embedder, end, documents, rebuild)
        known = {t.dia_id for t in turns} if max_turns else None
        asked = spaced(
            [q for q in conversation_questions(sample, None, known)[0] if q.category in SCORED], questions
        )
        asker(folder, user, embedder, end, keys_of, asked, variants, scores.add)
    return scores


def table(scores: Scores, variants: Variants) -> str:
    return markdown_table(
        ["variant", "R@5", "R@10", "session R@10", *(f"{CATEGORIES[c]} R@10" for c in SCORED)],
        [
            [
                name,
                *(scores.mean(name, SCORED, m) for m in ("R@5", "R@10", "S@10")),
                *(scores.mean(name, (c,), "R@10") for c in SCORED),
            ]
            for name in variants
        ],
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=sorted(SPLITS), default="tune")
    add_tuning_options(parser, "bench.locomo's ablation variants")
    args = parser.parse_args(argv)
    setup_logging()
    variants = load_variants(args.variants, args.ablation, ABLATIONS)
    # MiniLM vectors are always cached here (the tuning loop asks the same questions run after run).
    embedder = make_embedder(args.embedder, cache=args.embedding_cache or args.embedder == "minilm")
    started = time.perf_counter()
    scores = tune_scores(args.split, embedder, args.embedder, variants, args.cache_dir, args.rebuild)
    text = table(scores, variants)
    print(text)
    asked = scores.count("defaults", SCORED)
    print(f"\n{args.split} split, {asked} questions, {time.perf_counter() - started:.0f} s")
    return text


if __name__ == "__main__":
    main()
