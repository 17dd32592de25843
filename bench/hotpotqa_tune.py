"""Fast HotpotQA tuning: every variant asked against one cached passage store, none reinforcing.

Run from the repository root::

    .venv/bin/python -m bench.hotpotqa_tune --half tune --embedder minilm --embedding-cache --ablation
    .venv/bin/python -m bench.hotpotqa_tune --half heldout --labelled    # passages as "Title: ..."

``bench.hotpotqa`` is the full benchmark (baselines, latencies, the explain trace). Here the pool
of every loaded question's passages (deduplicated by title, as there) is stored once, clock frozen
at a fixed date, consolidated, and kept in ``bench/.cache/hotpotqa-stores/<embedder>-<form>/``
(``bench/tuning.py``); the questions of one half are asked per variant without reinforcement.
R@k = share of the two gold titles in the top k, both@k = both there (micro average).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import CACHE_DIR, markdown_table, setup_logging
from bench.hotpotqa import ABLATIONS, TYPES, USER, Scores, load_rows, pool_passages, questions_of
from bench.tuning import (
    Document,
    Variants,
    add_tuning_options,
    ask_variants,
    cached_store,
    load_variants,
    tuning_embedder,
)

STORES = "hotpotqa-stores"
# The store's and the questions' clock: the passages have no date of their own, so all are stored
# "now" and asked at the same moment; fixed, so a cached store ranks the same on every run.
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def tune_scores(
    half: str,
    embedder: Any,
    embedder_name: str,
    variants: Variants,
    cache: Path = CACHE_DIR,
    rebuild: bool = False,
    questions: int | None = None,
    labelled: bool = False,
    asker: Callable[..., None] = ask_variants,
) -> Scores:
    """Every variant's answers to the questions of ``half`` (tune = first half of the loaded
    questions, heldout = second, all); ``questions`` loads that many evenly spaced (default 500)."""
    rows = load_rows(questions)
    passages, _ = pool_passages(rows, labelled)
    asked = questions_of(rows)
    middle = len(asked) // 2
    asked = {"all": asked, "tune": asked[:middle], "heldout": asked[middle:]}[half]
    folder = cache / STORES / f"{embedder_name}-{'labelled' if labelled else 'plain'}"
    keys_of = cached_store(
        folder, USER, embedder, NOW, [Document(p.title, p.content) for p in passages], rebuild
    )
    scores = Scores()
    asker(folder, USER, embedder, NOW, keys_of, asked, variants, scores.add)
    return scores


def table(scores: Scores, variants: Variants) -> str:
    return markdown_table(
        ["variant", "R@2", "R@5", "R@10", "both@5", "both@10", *(f"{t} R@10" for t in TYPES)],
        [
            [
                name,
                *(scores.mean(name, TYPES, m) for m in ("R@2", "R@5", "R@10", "both@5", "both@10")),
                *(scores.mean(name, (t,), "R@10") for t in TYPES),
            ]
            for name in variants
        ],
    )


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("all", "tune", "heldout"), default="tune")
    parser.add_argument("--questions", type=int, default=0, help="load N evenly spaced questions (0 = all)")
    parser.add_argument("--labelled", action="store_true", help='passages as "Title: <title>\\n<text>"')
    add_tuning_options(parser, "bench.hotpotqa's ablation variants")
    args = parser.parse_args(argv)
    setup_logging()
    variants = load_variants(args.variants, args.ablation, ABLATIONS)
    started = time.perf_counter()
    scores = tune_scores(
        args.half,
        tuning_embedder(args),
        args.embedder,
        variants,
        args.cache_dir,
        args.rebuild,
        args.questions,
        args.labelled,
    )
    text = table(scores, variants)
    print(text)
    print(
        f"\n{args.half} half, {scores.count('defaults', TYPES)} questions, "
        f"{time.perf_counter() - started:.0f} s"
    )
    return text


if __name__ == "__main__":
    main()
