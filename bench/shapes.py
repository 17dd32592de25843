"""Recall on every shape of memory at once: one command to choose weights without favouring one shape.

Run from the repository root::

    .venv/bin/python -m bench.shapes --split tune --embedder minilm --embedding-cache --variants v.json
    .venv/bin/python -m bench.shapes --split heldout --embedder minilm --embedding-cache --labelled

Shapes, all in process with the same variants (the defaults first; ``--variants v.json`` =
``{name: {setting: value}}`` or ``--ablation`` = ``bench.locomo.ABLATIONS``), none reinforcing
(``bench/tuning.py``):

* turns: LoCoMo dialogue turns (``bench.locomo_tune``): tune = conv-26/30, heldout = conv-41/42/43;
* notes: LoCoMo observations, one fact per memory (``bench.notes``): the same conversations;
* passages: HotpotQA passages in one pool (``bench.hotpotqa_tune``): the first half of the 500
  questions for tune, the second for heldout;
* passages-labelled (``--labelled``): the same passages stored as ``"Title: <title>\\n<text>"``;
* paraphrase: hand-written team notes in one memory, asked in other words (``bench.paraphrase``):
  the questions marked tune or heldout.

Every store is built once and kept in ``bench/.cache`` (per embedder and conversation), and MiniLM
vectors are cached with ``--embedding-cache``, so a re-run only asks the questions; ``--jobs 2``
asks two shapes at a time in separate processes.

Prints one table: a row per (variant, shape) with "first" (H@1: the share of questions whose first
result is relevant, the figure to hold against search at the top), R@5, R@10 and the shape's extra
(session R@10 for turns, Hit@5 for notes, both@5 for passages, top-1 for paraphrase), the variant's
change against the defaults on that shape, and after each variant a "min over shapes" row: the worst
of its changes, so a change that wins on one shape and loses on another shows. Averages are micro
averages over the questions (LoCoMo categories 1-4; both HotpotQA types; every paraphrase question).
``--json PATH`` (``-`` for stdout) writes the same figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench import paraphrase
from bench.common import CACHE_DIR, fmt, markdown_table, setup_logging
from bench.locomo import ABLATIONS, SCORED
from bench.tuning import DEFAULTS, Variants, add_tuning_options, load_variants, tuning_embedder

logger = logging.getLogger("smriti.bench.shapes")

SHAPES = ("turns", "notes", "passages", "passages-labelled", "paraphrase")
# Per shape: the groups averaged over and the extra metric (its column title, its Scores key).
GROUPS = {
    "turns": SCORED,
    "notes": SCORED,
    "passages": ("bridge", "comparison"),
    "paraphrase": paraphrase.GROUPS,
}
EXTRAS = {
    "turns": ("session R@10", "S@10"),
    "notes": ("Hit@5", "H@5"),
    "passages": ("both@5", "both@5"),
    "paraphrase": ("top-1", "R@1"),
}
EXTRA_COLUMNS = [title for title, _ in EXTRAS.values()]


def kind(shape: str) -> str:
    return "passages" if shape.startswith("passages") else shape


def shape_scores(shape: str, options: dict[str, Any], embedder: Any | None = None) -> tuple[Any, float]:
    """Run one shape with every variant; its scores and seconds. ``options`` are plain values (a
    worker process gets them pickled and builds its own embedder)."""
    from bench import hotpotqa_tune, locomo_tune, notes

    started = time.perf_counter()
    if embedder is None:
        embedder = tuning_embedder(argparse.Namespace(**options))
    split, variants, cache = options["split"], options["variants"], Path(options["cache_dir"])
    common = (embedder, options["embedder"], variants, cache, options["rebuild"])
    if shape == "turns":
        scores = locomo_tune.tune_scores(
            split, *common, options["conversations"], options["questions"], options["max_turns"]
        )
    elif shape == "notes":
        scores = notes.tune_scores(split, *common, options["conversations"], options["questions"])
    elif shape == "paraphrase":
        scores = paraphrase.tune_scores(split, *common)
    else:
        scores = hotpotqa_tune.tune_scores(
            split, *common, options["passage_questions"], labelled=shape == "passages-labelled"
        )
    save = getattr(embedder, "save", None)
    if save is not None:  # a worker process does not run atexit handlers
        save()
    return scores, time.perf_counter() - started


def summarise(scores_of: dict[str, Any], variants: Variants) -> dict[str, Any]:
    """Per variant, per shape: R@5, R@10, the extra, questions, and the change against the defaults;
    per variant the minimum change over shapes."""
    out: dict[str, Any] = {}
    for name in variants:
        rows: dict[str, Any] = {}
        for shape, scores in scores_of.items():
            groups = GROUPS[kind(shape)]
            title, key = EXTRAS[kind(shape)]
            row = {m: scores.mean(name, groups, m) for m in ("H@1", "R@5", "R@10")}
            row |= {title: scores.mean(name, groups, key), "questions": scores.count(name, groups)}
            if name != DEFAULTS:
                base = out[DEFAULTS]["shapes"][shape]
                row |= {f"delta {m}": row[m] - base[m] for m in ("H@1", "R@5", "R@10", title)}
            rows[shape] = row
        entry: dict[str, Any] = {"settings": variants[name], "shapes": rows}
        if name != DEFAULTS:
            entry["min delta"] = {
                m: min(r[f"delta {m}"] for r in rows.values()) for m in ("H@1", "R@5", "R@10")
            }
        out[name] = entry
    return out


def signed(value: float | None) -> str:
    return "" if value is None else f"{value:+.3f}"


def table(summary: dict[str, Any]) -> str:
    headers = ["variant", "shape", "questions", "first", "R@5", "R@10", *EXTRA_COLUMNS]
    headers += ["Δfirst", "ΔR@5", "ΔR@10", "Δextra"]
    rows = []
    for name, entry in summary.items():
        for shape, row in entry["shapes"].items():
            title = EXTRAS[kind(shape)][0]
            extras = [fmt(row[title]) if column == title else "" for column in EXTRA_COLUMNS]
            deltas = [signed(row.get(f"delta {m}")) for m in ("H@1", "R@5", "R@10", title)]
            figures = [row[m] for m in ("H@1", "R@5", "R@10")]
            rows.append([name, shape, row["questions"], *figures, *extras, *deltas])
        if "min delta" in entry:
            low = entry["min delta"]
            blanks = [""] * (4 + len(EXTRA_COLUMNS))
            minima = [signed(low[m]) for m in ("H@1", "R@5", "R@10")]
            rows.append([name, "**min over shapes**", *blanks, *minima, ""])
    return markdown_table(headers, rows, numeric_from=2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("tune", "heldout"), default="tune")
    parser.add_argument(
        "--labelled",
        action="store_true",
        help='add "passages-labelled": passages as "Title: <title>\\n<text>"',
    )
    parser.add_argument(
        "--shapes",
        default=None,
        help=f"comma-separated subset of {', '.join(SHAPES)} (default: all but labelled)",
    )
    parser.add_argument(
        "--json", default=None, help="also write the figures as JSON to this path (- = stdout)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="shapes asked at once, one process each")
    add_tuning_options(parser, "bench.locomo's ablation variants, on every shape")
    slice_ = parser.add_argument_group("a slice (smoke tests)")
    slice_.add_argument("--conversations", type=int, default=None, help="first N conversations of the split")
    slice_.add_argument(
        "--questions", type=int, default=None, help="N questions a conversation (turns, notes)"
    )
    slice_.add_argument("--max-turns", type=int, default=None, help="store only the first N turns")
    slice_.add_argument(
        "--passage-questions", type=int, default=0, help="load N HotpotQA questions (0 = 500)"
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    shapes = args.shapes.split(",") if args.shapes else [s for s in SHAPES if s != "passages-labelled"]
    if args.labelled and "passages-labelled" not in shapes:
        shapes.append("passages-labelled")
    if unknown := set(shapes) - set(SHAPES):
        parser.error(f"unknown shapes: {', '.join(sorted(unknown))}")
    variants = load_variants(args.variants, args.ablation, ABLATIONS)
    options = {**vars(args), "variants": variants, "cache_dir": str(args.cache_dir or CACHE_DIR)}
    del options["json"]

    started = time.perf_counter()
    scores_of: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    if args.jobs > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = {shape: pool.submit(shape_scores, shape, options) for shape in shapes}
            for shape, future in futures.items():
                scores_of[shape], seconds[shape] = future.result()
    else:
        embedder = tuning_embedder(args)
        for shape in shapes:
            scores_of[shape], seconds[shape] = shape_scores(shape, options, embedder)
            logger.info("%s: %.0f s", shape, seconds[shape])
    elapsed = time.perf_counter() - started

    summary = summarise(scores_of, variants)
    text = (
        table(summary) + f"\n\n{args.split} split, {args.embedder} embeddings, {len(variants)} variant(s); "
        "seconds per shape: "
        + ", ".join(f"{s} {v:.0f}" for s, v in seconds.items())
        + f"; wall {elapsed:.0f} s"
    )
    report = {
        "split": args.split,
        "embedder": args.embedder,
        "seconds": seconds,
        "wall_seconds": elapsed,
        "variants": summary,
    }
    if args.json == "-":
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(text)
        if args.json:
            Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return {"summary": summary, "table": text, "report": report, "scores": scores_of}


if __name__ == "__main__":
    main()
