"""Baseline retrievers the benchmarks compare Smriti against, all in memory and brute force.

* :class:`BM25Retriever`: Okapi BM25 (k1=1.2, b=0.75) over lower-cased word tokens without
  English stopwords (``rank_bm25`` is not installed here, so it is written out below; the
  formula is the textbook one, the same as ``rank_bm25.BM25Okapi`` with a smoothed idf).
* :class:`DenseRetriever`: exact cosine top-k over a float32 matrix of the embeddings of one
  embedder (the benchmarks pass Smriti's own offline :class:`HashingEmbeddings`).
* :class:`FusionRetriever`: reciprocal-rank fusion (k=60) of the two, as in the reference
  figures of ``shared/bench/README.md``.

Each one has ``add(doc_id, text)`` (one document at a time, so store throughput compares
with Smriti's one-memory-at-a-time store) and ``search(query, k) -> [(doc_id, score)]``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from bench.common import stopwatch
from smriti.blas import one_blas_thread
from smriti.text import search_terms


def bm25_tokens(text: str) -> list[str]:
    """The same terms as Smriti's keyword search (stemmed, broad stop list): the baseline gets the
    better tokenizer too, so any gain of the pipeline over it comes from retrieval, not tokenizing."""
    return search_terms(text)


_PLAIN_WORD = re.compile(r"[a-z0-9]+")


def plain_tokens(text: str) -> list[str]:
    """Lower-cased words, nothing removed or stemmed: the usual BM25 of reference figures."""
    return _PLAIN_WORD.findall(text.lower())


class BM25Retriever:
    """Okapi BM25: sum over query terms t in d of idf(t) * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl)),
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))."""

    name = "BM25 (keyword)"

    def __init__(self, k1: float = 1.2, b: float = 0.75, tokens=bm25_tokens, name: str | None = None) -> None:
        self.k1, self.b, self.tokens = k1, b, tokens
        self.name = name or type(self).name
        self.ids: list[str] = []
        self.tfs: list[Counter[str]] = []
        self.lengths: list[int] = []
        self.postings: dict[str, list[int]] = {}

    def add(self, doc_id: str, text: str) -> None:
        terms = Counter(self.tokens(text))
        row = len(self.ids)
        self.ids.append(doc_id)
        self.tfs.append(terms)
        self.lengths.append(sum(terms.values()))
        for term in terms:
            self.postings.setdefault(term, []).append(row)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        n = len(self.ids)
        if not n:
            return []
        average = max(sum(self.lengths) / n, 1e-9)
        scores: dict[int, float] = {}
        for term in set(self.tokens(query)):
            rows = self.postings.get(term, [])
            idf = math.log(1 + (n - len(rows) + 0.5) / (len(rows) + 0.5))
            for row in rows:
                tf = self.tfs[row][term]
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[row] / average)
                scores[row] = scores.get(row, 0.0) + idf * tf * (self.k1 + 1) / norm
        best = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        return [(self.ids[row], score) for row, score in best]


class DenseRetriever:
    """Exact cosine over unit rows; the matrix grows by doubling, like a real append-only index."""

    name = "Dense cosine (brute force)"

    def __init__(self, embedder) -> None:
        self.embedder = embedder
        self.ids: list[str] = []
        self.matrix = np.zeros((0, 0), dtype=np.float32)

    def add(self, doc_id: str, text: str) -> None:
        self.add_vector(doc_id, self.embedder.embed_documents([text])[0])

    def add_vector(self, doc_id: str, vector) -> None:
        row = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(row))
        row = row / norm if norm else row
        if self.matrix.shape[1] != row.size:
            self.matrix = np.zeros((16, row.size), dtype=np.float32)
        if len(self.ids) == self.matrix.shape[0]:
            grown = np.zeros((2 * self.matrix.shape[0], row.size), dtype=np.float32)
            grown[: len(self.ids)] = self.matrix
            self.matrix = grown
        self.matrix[len(self.ids)] = row
        self.ids.append(doc_id)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        return self.search_vector(self.embedder.embed_query(query), k)

    def search_vector(self, vector, k: int) -> list[tuple[str, float]]:
        n = len(self.ids)
        if not n or k <= 0:
            return []
        # BLAS gemv on one thread, as Smriti's own scan (smriti/blas.py): the fastest floor here.
        with one_blas_thread():
            scores = self.matrix[:n] @ np.asarray(vector, dtype=np.float32)
        top = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
        top = sorted(top, key=lambda row: (-scores[row], row))
        return [(self.ids[row], float(scores[row])) for row in top]


class FusionRetriever:
    """Reciprocal-rank fusion: score(d) = sum over retrievers of 1 / (60 + rank(d)), ranks from 1."""

    name = "BM25 + dense (RRF)"

    def __init__(self, bm25: BM25Retriever, dense: DenseRetriever, depth: int = 100, k: int = 60) -> None:
        self.parts, self.depth, self.k = (bm25, dense), depth, k

    def add(self, doc_id: str, text: str) -> None:
        for part in self.parts:
            part.add(doc_id, text)

    def search(self, query: str, k: int) -> list[tuple[str, float]]:
        fused: dict[str, float] = {}
        for part in self.parts:
            for rank, (doc_id, _) in enumerate(part.search(query, self.depth), start=1):
                fused[doc_id] = fused.get(doc_id, 0.0) + 1.0 / (self.k + rank)
        return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:k]


def rank_with_baselines(
    documents: Iterable[tuple[str, str]],
    questions: Sequence[Any],
    embedder: Any,
    plain_name: str,
    record: Callable[[str, Any, list[list[str]]], None],
    timing: dict[str, list],
    k: int,
) -> dict[int, list[list[str]]]:
    """Index ``(doc_id, text)`` in BM25 (stemmed and ``plain_name``), dense and their fusion,
    then ask every question of each; ``record(system, question, ranked)`` gets each ranking.

    Index and search times go to ``timing`` (``store:bm25|plain|dense``, ``recall:{system}``).
    Returns BM25's ranking per question index: the benchmarks report where Smriti and BM25 differ.
    """
    bm25, dense = BM25Retriever(), DenseRetriever(embedder)
    plain = BM25Retriever(tokens=plain_tokens, name=plain_name)
    for doc_id, text in documents:
        for retriever, key in ((bm25, "bm25"), (plain, "plain"), (dense, "dense")):
            with stopwatch(timing[f"store:{key}"]):
                retriever.add(doc_id, text)
    bm25_ranked: dict[int, list[list[str]]] = {}
    for retriever in (bm25, plain, dense, FusionRetriever(bm25, dense)):
        for index, question in enumerate(questions):
            with stopwatch(timing[f"recall:{retriever.name}"]):
                hits = retriever.search(question.text, k)
            ranked = [[doc_id] for doc_id, _ in hits]
            record(retriever.name, question, ranked)
            if retriever is bm25:
                bm25_ranked[index] = ranked
    return bm25_ranked
