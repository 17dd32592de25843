"""Text similarity for recall's dedupe (Memory Fabric step 4: "text similarity > 85 %").

Why words and not characters: two unrelated English sentences of similar length share most
of their letters, so a character ratio calls them 80-90 % similar; over words, a memory and
its light rewording ("Alice moved to Berlin in May" / "alice moved to berlin in may.") are
near 1 and two different facts about the same people stay far apart.

Why difflib and not an embedding: the specification asks for text similarity, and an
embedding's cosine merges paraphrases that say different things ("prefers tabs" / "prefers
spaces" are close in any embedding). difflib is in the standard library (rapidfuzz is not a
dependency); two cheap upper bounds skip it for almost every pair (200 candidates: ~10 ms).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from difflib import SequenceMatcher
from functools import lru_cache
from itertools import combinations

import numpy as np

from smriti.nodes.state import Candidate

# Word characters of any script; punctuation and spacing separate words. Simpler than
# smriti.text.words (no CJK bigrams, no possessive rule) and five times faster on long passages:
# dedupe tokenises every candidate of every recall, search terms are not at stake here.
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=4096)
def normalised_words(text: str) -> tuple[str, ...]:
    """The words of ``text``, case folded, punctuation and spacing dropped."""
    return tuple(_WORD.findall(text.casefold()))


@lru_cache(maxsize=4096)
def _profile(text: str) -> tuple[tuple[str, ...], frozenset[str], int]:
    """(words, distinct words, repeated words): what the cheap bound needs, once per text."""
    tokens = normalised_words(text)
    distinct = frozenset(tokens)
    return tokens, distinct, len(tokens) - len(distinct)


def text_similarity(a: str, b: str, floor: float = 0.0) -> float:
    """Word-sequence similarity in [0, 1]: difflib's ratio 2 * M / T over the normalised words
    (M words matched in order, T words in both texts); 1 for two texts with no words.

    Computes the ratio only when two upper bounds exceed ``floor``; below it, returns the
    bound, which is then at most ``floor`` too. The bounds: M is at most the shorter length,
    and at most the distinct words both share plus the fewer repeats (a word matched twice
    appears twice in both). Both are arithmetic on sets built once per text, so a recall's
    hundreds of pairs cost a set intersection each; difflib itself runs on the few close pairs.
    """
    left, left_set, left_repeats = _profile(a)
    right, right_set, right_repeats = _profile(b)
    total = len(left) + len(right)
    if total == 0:
        return 1.0
    for matched in (
        min(len(left), len(right)),
        len(left_set & right_set) + min(left_repeats, right_repeats),
    ):
        bound = 2.0 * matched / total
        if bound <= floor:
            return bound
    return SequenceMatcher(None, left, right, autojunk=False).ratio()


# Words in more of a batch's texts than this are counted as "could be shared" rather than
# matched pair by pair: the stop words every text has would otherwise make n^2 pairs.
COMMON_WORD_TEXTS = 8


def shared_word_bound(profiles: Sequence[tuple[tuple[str, ...], frozenset[str], int]]) -> np.ndarray:
    """An upper bound of the distinct words each pair of texts shares (n x n).

    Words in at most COMMON_WORD_TEXTS texts are counted exactly, from an inverted index (few
    pairs each); the common ones are bounded by the fewer common words of the two texts.
    """
    n = len(profiles)
    postings: dict[str, list[int]] = {}
    for row, (_, distinct, _) in enumerate(profiles):
        for word in distinct:
            postings.setdefault(word, []).append(row)
    common_count = np.zeros(n, dtype=np.float64)
    firsts: list[int] = []
    seconds: list[int] = []
    for rows in postings.values():
        if len(rows) > COMMON_WORD_TEXTS:
            common_count[rows] += 1.0
        elif len(rows) > 1:
            for i, j in combinations(rows, 2):
                firsts.append(i)
                seconds.append(j)
    shared = np.zeros((n, n), dtype=np.float64)
    np.add.at(shared, (firsts, seconds), 1.0)
    shared += shared.T
    return shared + np.minimum(common_count[:, None], common_count[None, :])


def similarity_matrix(texts: Sequence[str], floor: float) -> np.ndarray:
    """Every pair's :func:`text_similarity` at once (n x n, float64, symmetric, 1 on the diagonal).

    The two bounds are computed for all pairs with array arithmetic (shared words through
    :func:`shared_word_bound`); difflib runs only on the pairs whose bounds both exceed
    ``floor``, the rest hold their (lower) bound. A recall's shortlist can hold a couple of
    hundred candidates: pair by pair in Python that cost ~100 ms, this a few.
    """
    profiles = [_profile(text) for text in texts]
    lengths = np.array([len(p[0]) for p in profiles], dtype=np.float64)
    repeats = np.array([p[2] for p in profiles], dtype=np.float64)
    total = lengths[:, None] + lengths[None, :]
    safe = np.where(total > 0, total, 1.0)
    by_length = 2.0 * np.minimum(lengths[:, None], lengths[None, :]) / safe
    by_words = 2.0 * (shared_word_bound(profiles) + np.minimum(repeats[:, None], repeats[None, :])) / safe
    matrix = np.minimum(by_length, by_words)
    matrix[total == 0] = 1.0
    for i, j in zip(*np.nonzero(np.triu(matrix > floor, k=1)), strict=True):
        exact = SequenceMatcher(None, profiles[i][0], profiles[j][0], autojunk=False).ratio()
        matrix[i, j] = matrix[j, i] = exact
    np.fill_diagonal(matrix, 1.0)
    return matrix


def numbers(text: str) -> frozenset[str]:
    """The words of ``text`` that hold a digit: years, versions, amounts, counts."""
    return frozenset(word for word in normalised_words(text) if any(ch.isdigit() for ch in word))


def candidate_similarity(threshold: float) -> Callable[[Sequence[Candidate]], np.ndarray]:
    """The dedupe similarities of recall candidates: their texts' :func:`similarity_matrix`,
    bounded early at ``threshold`` (only "above the threshold or not" matters there).

    *Departure:* two texts above the threshold whose numbers differ are not duplicates (their
    similarity is capped at the threshold). Numbers carry identity: "The 2002 Asian Junior
    Athletics Championships were ..." and "The 2001 ..." are 86 % similar word for word, and
    merging them hid HotpotQA's answer passages.
    """

    def similarity(candidates: Sequence[Candidate]) -> np.ndarray:
        matrix = similarity_matrix([c.text for c in candidates], threshold)
        for i, j in zip(*np.nonzero(np.triu(matrix > threshold, k=1)), strict=True):
            if numbers(candidates[i].text) != numbers(candidates[j].text):
                matrix[i, j] = matrix[j, i] = threshold
        return matrix

    return similarity
