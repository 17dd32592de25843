"""The one in-memory search index of every backend: exact cosine and BM25, incremental.

:class:`VectorCache` answers exact cosine top-k from one float32 matrix; :class:`KeywordIndex`
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
from collections.abc import Iterable, Sequence

import numpy as np

from smriti.text import search_terms

# -- exact vector search ---------------------------------------------------------------------


class VectorCache:
    """Embeddings as stored (float32, like the database's FLOAT columns) with their norms,
    ids and memory types, grown in place. Rows are kept unnormalised so :meth:`vector` can
    hand back exactly what the database would return."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.loaded = False
        self._reset()

    def _reset(self) -> None:
        self._matrix = np.zeros((0, self.dims), dtype=np.float32)
        self._norms = np.zeros(0, dtype=np.float32)
        self._codes = np.zeros(0, dtype=np.int32)
        self._ids: list[str] = []
        self._rows: dict[str, int] = {}
        self._type_codes: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def invalidate(self) -> None:
        """Forget everything (frees the matrix); the next search reloads."""
        self.loaded = False
        self._reset()

    def load(self, rows: Iterable[tuple[str, str, Sequence[float]]]) -> None:
        """Replace the contents with (id, memory_type, embedding) rows."""
        self._reset()
        ids, types, vectors = [], [], []
        for id_, memory_type, embedding in rows:
            ids.append(id_)
            types.append(self._code(memory_type))
            vectors.append(embedding)
        self._matrix = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dims)
        self._norms = np.linalg.norm(self._matrix, axis=1).astype(np.float32)
        self._codes = np.asarray(types, dtype=np.int32)
        self._ids = ids
        self._rows = {id_: row for row, id_ in enumerate(ids)}
        self.loaded = True

    def _code(self, memory_type: str) -> int:
        return self._type_codes.setdefault(memory_type, len(self._type_codes))

    def add(self, id_: str, memory_type: str, embedding: Sequence[float]) -> None:
        """Append one row (amortised O(1)); ignored while not loaded."""
        if not self.loaded:
            return
        if id_ in self._rows:
            self.remove(id_)
        size = len(self._ids)
        if size == self._matrix.shape[0]:
            # Double the capacity so a stream of stores costs O(1) copies per row.
            grown = np.zeros((max(16, 2 * size), self.dims), dtype=np.float32)
            grown[:size] = self._matrix[:size]
            self._matrix = grown
            self._norms = np.resize(self._norms, grown.shape[0])
            self._codes = np.resize(self._codes, grown.shape[0])
        self._matrix[size] = np.asarray(embedding, dtype=np.float32)
        self._norms[size] = np.linalg.norm(self._matrix[size])
        self._codes[size] = self._code(memory_type)
        self._ids.append(id_)
        self._rows[id_] = size

    def remove(self, id_: str) -> None:
        """Drop a row by moving the last row into its place."""
        row = self._rows.pop(id_, None)
        if row is None:
            return
        last = len(self._ids) - 1
        if row != last:
            moved = self._ids[last]
            self._matrix[row] = self._matrix[last]
            self._norms[row] = self._norms[last]
            self._codes[row] = self._codes[last]
            self._ids[row] = moved
            self._rows[moved] = row
        self._ids.pop()

    def retype(self, id_: str, memory_type: str) -> None:
        row = self._rows.get(id_)
        if row is not None:
            self._codes[row] = self._code(memory_type)

    def vector(self, id_: str) -> list[float] | None:
        """The stored embedding of ``id_`` (None when it has none or is unknown)."""
        row = self._rows.get(id_)
        return None if row is None else self._matrix[row].tolist()

    def search(self, query: np.ndarray, k: int, memory_type: str | None = None) -> list[tuple[str, float]]:
        """Top-k (id, cosine) for a query vector, best first; ties by id for stable output."""
        size = len(self._ids)
        if size == 0 or k <= 0 or not np.any(query):
            return []
        scores = cosine(query, self._matrix[:size], self._norms[:size])
        candidates = np.arange(size)
        if memory_type is not None:
            code = self._type_codes.get(memory_type)
            if code is None:
                return []
            candidates = np.flatnonzero(self._codes[:size] == code)
            if candidates.size == 0:
                return []
        candidate_scores = scores[candidates]
        if k < candidates.size:
            # argpartition is O(n); only the k survivors are sorted.
            keep = np.argpartition(-candidate_scores, k - 1)[:k]
            candidates, candidate_scores = candidates[keep], candidate_scores[keep]
        order = sorted(range(candidates.size), key=lambda i: (-candidate_scores[i], self._ids[candidates[i]]))
        return [(self._ids[candidates[i]], float(candidate_scores[i])) for i in order]


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


def text_of(content: str | None, summary: str | None) -> str:
    """What keyword search sees of an engram; the full-text indexes cover the same two fields."""
    return f"{content or ''}\n{summary}" if summary else content or ""


def cosine(
    query: Sequence[float] | np.ndarray, matrix: np.ndarray, norms: np.ndarray | None = None
) -> np.ndarray:
    """Cosine similarity of ``query`` with each row of ``matrix``, in the matrix's dtype.

    A zero row (or a zero query) scores 0. ``norms`` are the rows' norms when the caller
    keeps them (the vector cache does); computed here otherwise. The one brute-force cosine:
    the embedded store's cache calls it on float32 rows, the Cypher fallback on float64 rows.
    """
    if not len(matrix):
        return np.zeros(0, dtype=matrix.dtype)
    q = np.asarray(query, dtype=matrix.dtype)
    norm = float(np.linalg.norm(q))
    if norm == 0.0:
        return np.zeros(len(matrix), dtype=matrix.dtype)
    if norms is None:
        norms = np.linalg.norm(matrix, axis=1)
    # einsum runs numpy's own single-threaded loop: a BLAS gemv (``@``) wakes OpenBLAS's
    # thread pool, whose spinning workers then compete with the database's threads (on
    # 2 cores this made the search ~8x and the next Kuzu queries ~1.5x slower).
    dots = np.einsum("ij,j->i", matrix, q / norm)
    # Cosine: divide by each row's norm; a zero row scores 0 against anything.
    return np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
