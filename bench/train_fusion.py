"""Fit the learned fusion (``smriti/nodes/learned.py``) on the tuning parts of every shape at once.

Run from the repository root::

    .venv/bin/python -m bench.train_fusion --embedder minilm --embedding-cache            # fit, print
    .venv/bin/python -m bench.train_fusion --embedder minilm --embedding-cache --write    # and ship it

Only the tuning parts are read: LoCoMo conv-26/30 as turns and as notes, the first half of the
HotpotQA questions as passages (the stores ``bench.shapes`` keeps in ``bench/.cache``). Each
question runs the recall pipeline up to ``gather`` (the direct branches fused into candidates);
each candidate gives the model's features (``learned.fusion_features``) and a label: is it one of
the question's relevant memories. A logistic model with an L2 penalty is fitted by Newton's method
(IRLS) on all of them, each question weighing the same within its shape and each shape the same
overall, so no shape wins by having more candidates. Then check it with ``bench.shapes``: the
variant ``{"learned": {"fusion": "learned"}}`` on ``--split tune``, and only then on ``heldout``.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections import defaultdict
from typing import Any

import numpy as np

from bench.common import setup_logging
from bench.tuning import DEFAULTS, add_tuning_options, open_memory, tuning_embedder

logger = logging.getLogger("smriti.bench.train_fusion")

SHAPES = ("turns", "notes", "passages")
L2 = 1.0  # the penalty on the weights (not the bias), in units of one shape's total weight


def gather_pipeline() -> Any:
    """The recall pipeline's first half: validate, parse, the three direct branches, gather."""
    from smriti.nodes.search import (
        cue_traverse,
        extract_query_cues,
        fulltext_search,
        gather,
        recognise,
        validate_recall,
        vector_search,
    )
    from smriti.nodes.state import MemoryContext, RecallInput, RecallState
    from smriti.pipelines.pipeline import END, START, Pipeline
    from smriti.pipelines.recall import DIRECT_BRANCHES

    pipeline = Pipeline(
        "fusion_features", RecallState, context_schema=MemoryContext, input_schema=RecallInput
    )
    for node in [
        validate_recall,
        extract_query_cues,
        recognise,
        cue_traverse,
        vector_search,
        fulltext_search,
        gather,
    ]:
        pipeline.add_node(node.__name__, node)
    pipeline.add_edge(START, "validate_recall")
    pipeline.add_edge("validate_recall", "extract_query_cues")
    pipeline.add_edge("extract_query_cues", "recognise")
    for branch in DIRECT_BRANCHES:
        pipeline.add_edge("recognise", branch)
    pipeline.add_edge(DIRECT_BRANCHES, "gather")
    pipeline.add_edge("gather", END)
    return pipeline


def relevant_keys(question: Any) -> set[str]:
    """The document keys that answer ``question``: a note question's notes, a HotpotQA
    question's gold titles, a LoCoMo question's evidence turns."""
    for attribute in ("relevant", "gold", "evidence"):
        if hasattr(question, attribute):
            return set(getattr(question, attribute))
    raise TypeError(f"no relevant keys on {question!r}")


class Capture:
    """An ``asker`` for the tuning benchmarks' ``tune_scores``: instead of asking for rankings it
    keeps, per question, every gathered candidate's features and label."""

    def __init__(self, shape: str) -> None:
        self.shape = shape
        self.questions: list[tuple[np.ndarray, np.ndarray]] = []
        self.names: list[str] = []

    def __call__(self, folder, user, embedder, now, keys_of, questions, variants, record, **_: Any) -> None:
        from smriti.nodes.candidates import SIGNALS
        from smriti.nodes.learned import fusion_features, shipped_model

        pipeline = gather_pipeline()
        k = shipped_model().k
        with open_memory(folder, user, embedder, now) as memory:
            for question in questions:
                state = pipeline.graph.invoke({"query": question.text, "limit": 10}, context=memory.context)
                relevant = relevant_keys(question)
                rows, labels = [], []
                for candidate in state.get("candidates", []):
                    signals = {b: getattr(candidate, attr) for b, attr in SIGNALS.items()}
                    features, _ = fusion_features(signals, state.get("branch_scores", {}), k)
                    if not self.names:
                        self.names = sorted(features)
                    rows.append([features[n] for n in self.names])
                    labels.append(any(key in relevant for key in keys_of.get(candidate.id, ())))
                if rows and any(labels):  # a question none of whose answers was gathered teaches nothing
                    self.questions.append((np.array(rows), np.array(labels, dtype=float)))


def capture(shape: str, args: argparse.Namespace, embedder: Any) -> Capture:
    from bench import hotpotqa_tune, locomo_tune, notes

    kept = Capture(shape)
    common = (embedder, args.embedder, {DEFAULTS: {}}, args.cache_dir, args.rebuild)
    if shape == "turns":
        locomo_tune.tune_scores("tune", *common, asker=kept)
    elif shape == "notes":
        notes.tune_scores("tune", *common, asker=kept)
    else:
        hotpotqa_tune.tune_scores("tune", *common, asker=kept)
    return kept


def fit(captures: list[Capture], l2: float = L2, steps: int = 50) -> tuple[np.ndarray, float]:
    """L2-penalised logistic regression by IRLS: every question of a shape weighs 1 / (its
    questions), spread over its candidates, so each shape weighs 1 in all."""
    xs, ys, ws = [], [], []
    for kept in captures:
        for rows, labels in kept.questions:
            xs.append(rows)
            ys.append(labels)
            ws.append(np.full(len(labels), 1.0 / (len(kept.questions) * len(labels))))
    x = np.hstack([np.vstack(xs), np.ones((sum(len(y) for y in ys), 1))])
    y, w = np.concatenate(ys), np.concatenate(ws)
    penalty = np.full(x.shape[1], l2 / 1000)
    penalty[-1] = 0.0  # the bias is not penalised
    beta = np.zeros(x.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(x @ beta)))
        gradient = x.T @ (w * (p - y)) + penalty * beta
        hessian = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta[:-1], float(beta[-1])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_tuning_options(parser, "unused")
    parser.add_argument(
        "--write", action="store_true", help="write the model to smriti/nodes/fusion_model.json"
    )
    parser.add_argument("--l2", type=float, default=L2)
    args = parser.parse_args(argv)
    setup_logging()
    from smriti.nodes.learned import MODEL_FILE, FusionModel, shipped_model

    embedder = tuning_embedder(args)
    started = time.perf_counter()
    captures = [capture(shape, args, embedder) for shape in SHAPES]
    weights, bias = fit(captures, args.l2)
    names = captures[0].names
    model = FusionModel(
        dict(zip(names, (round(float(v), 4) for v in weights), strict=True)),
        round(bias, 4),
        shipped_model().k,
    )
    counts = defaultdict(int)
    for kept in captures:
        counts[kept.shape] = len(kept.questions)
    print(model.to_json())
    print(f"questions {dict(counts)}, {time.perf_counter() - started:.0f} s")
    if args.write:
        MODEL_FILE.write_text(model.to_json(), encoding="utf-8")
        print(f"written to {MODEL_FILE}")
    return {"weights": dict(model.weights), "bias": model.bias}


if __name__ == "__main__":
    main()
