"""The one in-memory search index of every backend: exact cosine and BM25, incremental.

:class:`VectorCache` (``stores/vectors.py``) answers cosine top-k: exact from one float32
matrix, and past ``ann_threshold`` vectors from an HNSW graph built in the background
(``stores/ann.py``); :class:`KeywordIndex`
answers BM25 keyword queries from an inverted index. The embedded store loads both lazily
once and keeps them in step with its writes (add, remove, retype), so a store followed by
a search does not reload ten thousand embeddings. A Cypher store, whose database other
processes may write, re-reads the texts on each fallback query but re-tokenises only those
that changed (:meth:`KeywordIndex.sync`). :func:`text_of` and :func:`cosine`
are the one definition of what keyword search sees and of brute-force cosine.

Measured on the development machine (10k engrams, 1536 dims): brute force over the cached
matrix takes ~1.6 ms per query, Kuzu's HNSW index ~10 ms (efs 200); loading the matrix
from Kuzu once takes ~2 s.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable

from smriti.stores.vectors import VectorCache, cosine
from smriti.text import search_terms

__all__ = ["KeywordIndex", "VectorCache", "cosine", "normalise_scores", "text_of", "tokenize"]

# -- keyword search (BM25) ---------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Stemmed content words (see :func:`smriti.text.search_terms`)."""
    return search_terms(text)


class KeywordIndex:
    """An inverted index with Okapi BM25 scoring (k1=1.2, b=0.75).

    ``score(d, q) = sum over terms t of q present in d:
    idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg_len))`` with
    ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``; scores are then divided by the best
    one so results lie in (0, 1], like the full-text index path.
    """

    K1 = 1.2
    B = 0.75

    def __init__(self) -> None:
        self.loaded = False
        self._reset()

    def _reset(self) -> None:
        self._postings: dict[str, dict[str, int]] = {}
        self._texts: dict[str, int] = {}  # id -> hash of the indexed text (see sync)
        self._terms: dict[str, Counter[str]] = {}
        self._types: dict[str, str] = {}
        self._lengths: dict[str, int] = {}
        self._total_length = 0

    def invalidate(self) -> None:
        self.loaded = False
        self._reset()

    def load(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Replace the contents with (id, memory_type, text) rows."""
        self._reset()
        self.loaded = True
        for id_, memory_type, text in rows:
            self.add(id_, memory_type, text)

    def add(self, id_: str, memory_type: str, text: str) -> None:
        if not self.loaded:
            return
        self.remove(id_)
        self._texts[id_] = hash(text)
        terms = Counter(tokenize(text))
        self._terms[id_] = terms
        self._types[id_] = memory_type
        self._lengths[id_] = sum(terms.values())
        self._total_length += self._lengths[id_]
        for term, count in terms.items():
            self._postings.setdefault(term, {})[id_] = count

    def remove(self, id_: str) -> None:
        terms = self._terms.pop(id_, None)
        if terms is None:
            return
        self._types.pop(id_, None)
        self._texts.pop(id_, None)
        self._total_length -= self._lengths.pop(id_, 0)
        for term in terms:
            posting = self._postings.get(term)
            if posting is not None:
                posting.pop(id_, None)
                if not posting:
                    del self._postings[term]

    def retype(self, id_: str, memory_type: str) -> None:
        if id_ in self._types:
            self._types[id_] = memory_type

    def sync(self, rows: Iterable[tuple[str, str, str]]) -> None:
        """Make the contents exactly these (id, memory_type, text) rows, re-tokenising only
        texts that changed since the last call (stemming is what a rebuild costs)."""
        self.loaded = True
        seen: set[str] = set()
        for id_, memory_type, text in rows:
            seen.add(id_)
            if self._texts.get(id_) != hash(text):
                self.add(id_, memory_type, text)
            elif self._types.get(id_) != memory_type:
                self.retype(id_, memory_type)
        for gone in set(self._terms) - seen:
            self.remove(gone)

    def search(self, query: str, k: int, memory_type: str | None = None) -> list[tuple[str, float]]:
        """Top-k (id, normalised BM25), best first; ties by id."""
        docs = len(self._terms)
        if docs == 0 or k <= 0:
            return []
        average = max(self._total_length / docs, 1e-9)
        scores: dict[str, float] = {}
        for term in set(tokenize(query)):
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1.0 + (docs - len(posting) + 0.5) / (len(posting) + 0.5))
            for id_, tf in posting.items():
                if memory_type is not None and self._types.get(id_) != memory_type:
                    continue
                norm = tf + self.K1 * (1.0 - self.B + self.B * self._lengths[id_] / average)
                scores[id_] = scores.get(id_, 0.0) + idf * tf * (self.K1 + 1.0) / norm
        best = heapq.nsmallest(k, scores.items(), key=lambda item: (-item[1], item[0]))
        return normalise_scores(best)


def normalise_scores(hits: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """Divide by the best score so the top hit is 1.0 and every hit lies in (0, 1]."""
    hits = [(id_, score) for id_, score in hits if score > 0]
    if not hits:
        return []
    top = max(score for _, score in hits)
    return [(id_, score / top) for id_, score in hits]


# The engram fields keyword search reads, in text_of's order.
SEARCHED_FIELDS: tuple[str, ...] = ("content", "summary", "facts")
# The fields whose change re-indexes an engram for keyword search: its text, and the type a
# search may filter by.
REINDEXED_FIELDS = frozenset({*SEARCHED_FIELDS, "memory_type"})


def text_of(content: str | None, summary: str | None, facts: str | None = "") -> str:
    """What keyword search sees of an engram: its content, summary and stated facts (the
    full-text indexes cover the same fields), so a memory is found by a fact it states."""
    return "\n".join(part for part in (content or "", summary or "", facts or "") if part)
