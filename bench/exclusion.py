"""Questions that leave something out ("besides pottery", "other than fixing cars"), on turns and notes.

Every LoCoMo question (categories 1-4, all five public conversations: there are only a few, so
neither split alone says anything) whose text has an exclusion phrase
(:func:`smriti.exclusion.excluded_terms`), asked of the cached turn and note stores of
``bench.shapes`` with the focus step's exclusion factor off (``EXCLUSION_WEIGHT=0``) and at the
default; R@5 and R@10 per shape. Run from the repository root::

    .venv/bin/python -m bench.exclusion --embedder minilm --embedding-cache
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from bench import locomo_tune, notes
from bench.common import fmt, markdown_table, setup_logging
from bench.locomo import SCORED
from bench.tuning import add_tuning_options, ask_variants, tuning_embedder
from smriti.exclusion import excluded_terms

VARIANTS = {
    "exclusion off": {"exclusion_weight": 0.0},
    "strip": {"exclusion_weight": 0.0, "exclusion_strip": True},
    "strip+0.5": {"exclusion_strip": True},
    "default": {},
}


def ask_excluding(*args: Any, **kwargs: Any) -> None:
    """``ask_variants`` with only the questions that leave something out."""
    folder, user, embedder, end, keys_of, asked, *rest = args
    asked = [q for q in asked if excluded_terms(q.text)]
    ask_variants(folder, user, embedder, end, keys_of, asked, *rest, **kwargs)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_tuning_options(parser, "unused")
    args = parser.parse_args(argv)
    setup_logging()
    embedder = tuning_embedder(args)
    rows = []
    for shape, module in (("turns", locomo_tune), ("notes", notes)):
        for split in ("tune", "heldout"):
            scores = module.tune_scores(
                split, embedder, args.embedder, VARIANTS, args.cache_dir, asker=partial(ask_excluding)
            )
            for name in VARIANTS:
                asked = scores.count(name, SCORED)
                rows.append(
                    [
                        shape,
                        split,
                        name,
                        str(asked),
                        *(fmt(scores.mean(name, SCORED, m)) for m in ("R@5", "R@10")),
                    ]
                )
    text = markdown_table(["shape", "split", "variant", "questions", "R@5", "R@10"], rows)
    print(text)
    return text


if __name__ == "__main__":
    main()
