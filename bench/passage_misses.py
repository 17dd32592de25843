"""Why a gold HotpotQA passage is not in the top 5: each miss of one half, sorted into classes.

Run from the repository root (the cached store of ``bench.hotpotqa_tune``)::

    .venv/bin/python -m bench.passage_misses --half heldout --embedder minilm --embedding-cache

For every question of the half, each gold passage outside the top 5 of a default recall (no
reinforcement) is put in one class: its title is named in the question (a comparison's entity);
it has no subject (``candidates.memory_subject``); the other gold passage names its subject as a
stored cue, or only in its text (both reachable by the bridge); or names it in neither form.
Prints the count per (rank band, class) and a few questions of each.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from typing import Any

from bench.common import setup_logging
from bench.hotpotqa_tune import tune_scores
from bench.tuning import add_tuning_options, open_memory, tuning_embedder, without_reinforce
from smriti.nodes.candidates import memory_subject
from smriti.providers.heuristic import text_names
from smriti.stores.base import normalise_cue_name


def band(rank: int | None) -> str:
    return "absent" if rank is None else "6-10" if rank < 10 else "11-20"


def miss_class(question: str, title: str, subject: str, other_cues: dict[str, str], other_text: str) -> str:
    if normalise_cue_name(title.split(" (")[0]) in normalise_cue_name(question):
        return "named in the question"
    if not subject:
        return "has no subject"
    if other_cues.get(subject, "keyword") != "keyword":
        return "the other gold names its subject as a cue"
    if subject in text_names(other_text):
        return "the other gold names its subject in its text"
    return "the other gold names its subject in no form matched"


def main(argv: list[str] | None = None) -> Counter:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("tune", "heldout"), default="heldout")
    add_tuning_options(parser, "unused")
    args = parser.parse_args(argv)
    setup_logging()
    counts: Counter = Counter()
    examples: dict[tuple[str, str], list[str]] = defaultdict(list)

    def asker(folder, user, embedder, now, keys_of, asked, variants, record, **_: Any) -> None:
        id_of = {keys[0]: engram_id for engram_id, keys in keys_of.items()}
        with open_memory(folder, user, embedder, now) as memory:
            without_reinforce(memory)
            store = memory.context.store

            def row(title: str):
                [found] = store.recall_rows([id_of[title]])
                return found.engram.content, {cue.name: cue.cue_type for cue in found.cues}

            for question in asked:
                results = memory.recall(question.text, limit=20)["results"]
                ranked = [keys_of.get(item["id"], ["?"])[0] for item in results]
                for title in question.gold:
                    rank = ranked.index(title) if title in ranked else None
                    if rank is not None and rank < 5:
                        continue
                    text, cues = row(title)
                    other = next(t for t in question.gold if t != title)
                    other_text, other_cues = row(other)
                    subject = memory_subject(text, list(cues), cues)
                    key = (band(rank), miss_class(question.text, title, subject, other_cues, other_text))
                    counts[key] += 1
                    examples[key].append(f"{question.text[:80]} -> {title}")

    tune_scores(
        args.half, tuning_embedder(args), args.embedder, {"defaults": {}}, args.cache_dir, asker=asker
    )
    for (where, kind), n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{n:3d}  {where:7s} {kind}")
        for example in examples[(where, kind)][:2]:
            print(f"       e.g. {example}")
    print(f"{sum(counts.values())} gold passages outside the top 5")
    return counts


if __name__ == "__main__":
    main()
