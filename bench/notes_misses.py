"""Where recall and plain vector search part on notes: the questions each wins, by category.

Run from the repository root (the cached note stores of ``bench.shapes``)::

    .venv/bin/python -m bench.notes_misses --split heldout --embedder minilm --embedding-cache

Every question of the split is asked twice of the same store, without reinforcement: a default
recall and ``mode=search`` (vector only, the "dense" baseline as a client gets it). Per LoCoMo
category: how many questions each finds more of the relevant notes for in its top 5 and what
that is worth in R@5 points; then, for the questions recall loses, how far down recall put the
relevant notes that search had in its top 5, and a few of them with the notes recall put first.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from typing import Any

from bench import notes
from bench.common import setup_logging
from bench.locomo import CATEGORIES, SCORED
from bench.tuning import add_tuning_options, open_memory, tuning_embedder, without_reinforce


def recall_at(ranked: list[str], relevant: list[str], k: int = 5) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "heldout"), default="heldout")
    parser.add_argument("--examples", type=int, default=6, help="lost questions shown")
    add_tuning_options(parser, "unused")
    args = parser.parse_args(argv)
    setup_logging()
    wins: Counter = Counter()
    losses: Counter = Counter()
    points: defaultdict[int, float] = defaultdict(float)
    asked: Counter = Counter()
    ranks: Counter = Counter()
    lost: list[str] = []

    def asker(folder, user, embedder, now, keys_of, questions, variants, record, **_: Any) -> None:
        content = {}
        with open_memory(folder, user, embedder, now) as memory:
            without_reinforce(memory)
            for question in questions:
                runs = {}
                for mode in ("recall", "search"):
                    items = memory.recall(question.text, limit=20, mode=mode)["results"]
                    runs[mode] = [keys_of.get(item["id"], ["?"])[0] for item in items]
                    content.update({keys_of.get(i["id"], ["?"])[0]: i["text"] for i in items})
                ours, dense = (recall_at(runs[m], question.relevant) for m in ("recall", "search"))
                asked[question.category] += 1
                points[question.category] += ours - dense
                if ours > dense:
                    wins[question.category] += 1
                elif ours < dense:
                    losses[question.category] += 1
                    for key in set(runs["search"][:5]) & set(question.relevant) - set(runs["recall"][:5]):
                        rank = runs["recall"].index(key) + 1 if key in runs["recall"] else None
                        ranks["6-10" if rank and rank <= 10 else "11-20" if rank else "not in 20"] += 1
                        if len(lost) < args.examples:
                            above = " | ".join(content[k][:60] for k in runs["recall"][:2])
                            lost.append(
                                f"{question.text}\n    missed: {content[key][:90]}\n    first: {above}"
                            )

    notes.tune_scores(
        args.split, tuning_embedder(args), args.embedder, {"defaults": {}}, args.cache_dir, asker=asker
    )
    print("| category | questions | recall finds more | search finds more | R@5 points, recall - search |")
    print("|---|---:|---:|---:|---:|")
    for category in SCORED:
        n = asked[category]
        print(f"| {CATEGORIES[category]} | {n} | {wins[category]} | {losses[category]} | "
              f"{100 * points[category] / max(n, 1):+.1f} |")  # fmt: skip
    print(f"\nrelevant notes in search's top 5 that recall put lower: {dict(ranks)}\n")
    for example in lost:
        print(example)
    return {"wins": wins, "losses": losses, "ranks": ranks}


if __name__ == "__main__":
    main()
