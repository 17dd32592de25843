"""Fast LoCoMo tuning and ablation: every variant asked against the same stores, none reinforcing.

Run from the repository root::

    .venv/bin/python -m bench.locomo_tune --split tune --variants v.json    # choose weights here
    .venv/bin/python -m bench.locomo_tune --split heldout --ablation        # then check them here

``bench.locomo`` is the full benchmark (baselines, latencies, the explain trace, one reinforcing
pass before the variants). This one answers "does this stage help?" in minutes: each
conversation is stored once through the store pipeline and consolidated (kept in
``bench/.cache/locomo-stores/`` per embedder and conversation, so a second run only asks; pass
``--rebuild`` after changing what a store writes), and every variant, the defaults first, asks
every question of categories 1-4 with the recall graph built without its reinforce step, so no
variant shapes the next.
A variant is ``{name: {setting: value}}``; ``--ablation`` runs ``bench.locomo.ABLATIONS``.
Prints a Markdown table (R@5, R@10, session R@10, R@10 per category).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from collections import defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import (
    CACHE_DIR,
    add_embedder_option,
    bench_settings,
    data_dir,
    embedder_dims,
    make_embedder,
)
from bench.locomo import ABLATIONS, CATEGORIES, SCORED, SPLITS, conversation_questions, conversation_turns

STORES = CACHE_DIR / "locomo-stores"


def _open(folder: Path, sample: dict[str, Any], embedder: Any, end: Any):
    from smriti.memory import Memory

    settings = bench_settings(folder, prune_threshold=0.0, embedding_dims=embedder_dims(embedder))
    memory = Memory.open(settings, user=sample["sample_id"], llm=None, embedder=embedder)
    memory.context.clock = lambda: end
    return memory


def stored_conversation(
    sample: dict[str, Any], embedder: Any, folder: Path, rebuild: bool
) -> dict[str, list[str]]:
    """Store and consolidate the conversation once (kept in ``folder``); engram id -> dia ids."""
    index = folder / "dia_of.json"
    if index.exists() and not rebuild:
        return json.loads(index.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    turns = conversation_turns(sample)
    end = max(t.when for t in turns) + timedelta(hours=1)
    dia_of: dict[str, list[str]] = defaultdict(list)
    with _open(folder, sample, embedder, end) as memory:
        for turn in turns:
            dia_of[memory.store(turn.content, source=turn.session, occurred_at=turn.when)["id"]].append(
                turn.dia_id
            )
        memory.consolidate(now=end)
    index.write_text(json.dumps(dia_of))
    return dict(dia_of)


def ask_variants(
    sample: dict[str, Any], embedder: Any, folder: Path, variants: dict[str, dict[str, Any]], dia_of: dict
) -> dict[str, list[tuple[int, float, float, float]]]:
    """Per variant, per question: (category, R@5, R@10, session R@10)."""
    from smriti.pipelines.recall import build_recall_graph

    turns = conversation_turns(sample)
    end = max(t.when for t in turns) + timedelta(hours=1)
    questions = [q for q in conversation_questions(sample, None)[0] if q.category in SCORED]
    rows: dict[str, list[tuple[int, float, float, float]]] = defaultdict(list)
    with _open(folder, sample, embedder, end) as memory:
        memory.__dict__["recall_graph"] = build_recall_graph(reinforce=False)
        defaults = memory.context.settings
        for name, update in variants.items():
            memory.context.settings = defaults.model_copy(update=update)
            for q in questions:
                result = memory.recall(q.text, limit=10)
                ranked = [dia_of.get(item["id"], []) for item in result["results"]]
                evidence = set(q.evidence)
                top5 = {d for ids in ranked[:5] for d in ids}
                top10 = {d for ids in ranked[:10] for d in ids}
                sessions = {d.split(":")[0] for d in evidence}
                found = sessions & {d.split(":")[0] for d in top10}
                rows[name].append(
                    (
                        q.category,
                        len(evidence & top5) / len(evidence),
                        len(evidence & top10) / len(evidence),
                        len(found) / len(sessions),
                    )
                )
    return rows


def table(rows: dict[str, list[tuple[int, float, float, float]]]) -> str:
    head = (
        "| variant | R@5 | R@10 | session R@10 | "
        + " | ".join(f"{CATEGORIES[c]} R@10" for c in SCORED)
        + " |"
    )
    lines = [head, "|---" + "|---:" * (3 + len(SCORED)) + "|"]
    for name, got in rows.items():
        per_category = [statistics.fmean(r[2] for r in got if r[0] == c) for c in SCORED]
        means = [statistics.fmean(r[i] for r in got) for i in (1, 2, 3)]
        lines.append(
            f"| {name} | "
            + " | ".join(f"{v:.3f}" for v in means)
            + " | "
            + " | ".join(f"{v:.3f}" for v in per_category)
            + " |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=sorted(SPLITS), default="tune")
    parser.add_argument("--variants", type=Path, default=None, help="a JSON file {name: {setting: value}}")
    parser.add_argument("--ablation", action="store_true", help="bench.locomo's ablation variants")
    parser.add_argument("--rebuild", action="store_true", help="store the conversations again")
    add_embedder_option(parser)
    args = parser.parse_args(argv)
    variants: dict[str, dict[str, Any]] = {"defaults": {}}
    variants |= json.loads(args.variants.read_text()) if args.variants else ABLATIONS if args.ablation else {}
    embedder = make_embedder(args.embedder, cache=args.embedder == "minilm")
    every = json.loads((data_dir() / "locomo_public.json").read_text())
    rows: dict[str, list[tuple[int, float, float, float]]] = defaultdict(list)
    started = time.perf_counter()
    for index in SPLITS[args.split]:
        sample = every[index]
        folder = STORES / f"{args.embedder}-{sample['sample_id']}"
        dia_of = stored_conversation(sample, embedder, folder, args.rebuild)
        for name, got in ask_variants(sample, embedder, folder, variants, dia_of).items():
            rows[name] += got
    text = table(rows)
    print(text)
    asked = len(next(iter(rows.values())))
    print(f"\n{args.split} split, {asked} questions, {time.perf_counter() - started:.0f} s")
    return text


if __name__ == "__main__":
    main()
