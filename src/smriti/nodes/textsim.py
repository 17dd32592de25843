"""Text similarity for recall's dedupe (Memory Fabric step 4: "text similarity > 85 %").

Why words and not characters: two unrelated English sentences of similar length share most
of their letters, so a character ratio calls them 80-90 % similar; over words, a memory and
its light rewording ("Alice moved to Berlin in May" / "alice moved to berlin in may.") are
near 1 and two different facts about the same people stay far apart.

Why not an embedding: the specification asks for text similarity, and an embedding's cosine
merges paraphrases that say different things ("prefers tabs" / "prefers spaces" are close in
any embedding).

The ratio is rapidfuzz's Indel similarity over the word sequences, 2 * LCS / T (the words both
texts share in order, over the words of both): difflib's ratio without its block heuristics,
computed in C for a whole shortlist at once. It replaced difflib behind two hand-written upper
bounds (the same decisions on every pair tested, ~100x faster on a shortlist of 200).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache

import numpy as np
import regex
from rapidfuzz.distance import Indel
from rapidfuzz.process import cdist

from smriti.nodes.state import Candidate
from smriti.text import STOPWORDS

# Word characters of any script; punctuation and spacing separate words. Simpler than
# smriti.text.words (no CJK bigrams, no possessive rule) and five times faster on long passages:
# dedupe tokenises every candidate of every recall, search terms are not at stake here.
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=4096)
def normalised_words(text: str) -> tuple[str, ...]:
    """The words of ``text``, case folded, punctuation and spacing dropped."""
    return tuple(_WORD.findall(text.casefold()))


def text_similarity(a: str, b: str) -> float:
    """Word-sequence similarity in [0, 1]: 2 * LCS / T over the normalised words; 1 for two
    texts with no words."""
    return Indel.normalized_similarity(normalised_words(a), normalised_words(b))


def similarity_matrix(texts: Sequence[str], floor: float) -> np.ndarray:
    """Every pair's :func:`text_similarity` (n x n, float64, symmetric, 1 on the diagonal);
    pairs at or below ``floor`` hold 0 (only "above the floor or not" matters to dedupe)."""
    if floor >= 1.0:  # nothing can be above it (a threshold past 1 turns dedupe off)
        return np.eye(len(texts), dtype=np.float64)
    words = [normalised_words(text) for text in texts]
    cutoff = max(0.0, floor)
    matrix = cdist(words, words, scorer=Indel.normalized_similarity, score_cutoff=cutoff, dtype=np.float64)
    np.fill_diagonal(matrix, 1.0)
    return matrix


@lru_cache(maxsize=4096)
def numbers(text: str) -> frozenset[str]:
    """The words of ``text`` that hold a digit: years, versions, amounts, counts. Cached: dedupe
    asks it of both texts of every pair above the threshold, and a memory with many near-copies
    (a corpus of a million memories) made that ~1,700 calls a recall, 200 ms of it."""
    return frozenset(word for word in normalised_words(text) if any(ch.isdigit() for ch in word))


# Capitalised words of any script ("Noor", "Orion", "Monday", "München"), and lower-case technical
# names ("payments-api", "gpt-4o"): the words that say which thing a fact is about.
_CAPITALISED = regex.compile(r"\b\p{Lu}[\p{L}\p{M}\p{N}'-]*")
_TECHNICAL = re.compile(r"\b[a-z][a-z0-9]*(?:[-_.][a-z0-9]+)+\b")
# Capitalised at a sentence's start for grammar: the same fact may start with one or not.
_SENTENCE_STARTERS = frozenset("please remember note yesterday today tomorrow also then so".split())


@lru_cache(maxsize=4096)
def identity(text: str) -> frozenset[str]:
    """The words that tell one fact from its siblings, as :func:`normalised_words` gives them:
    :func:`numbers`, names (capitalised words that are not stop words, day and month names among
    them) and the words of technical names (``payments-api``)."""
    names = {word.casefold().removesuffix("'s") for word in _CAPITALISED.findall(text)}
    names -= STOPWORDS | _SENTENCE_STARTERS
    technical = {part for term in _TECHNICAL.findall(text.casefold()) for part in _WORD.findall(term)}
    return numbers(text) | frozenset(names) | frozenset(technical)


def siblings(a: str, b: str) -> bool:
    """True when one text names a number, a name or a technical name the other does not hold at
    all: "The Acme client was configured on Monday by Noor" and "The Globex client ..." are 92 %
    the same words, yet two facts. A restatement ("alice moved to berlin in may." for "Alice moved
    to Berlin in May") holds the same words, whatever their case."""
    words_a, words_b = set(normalised_words(a)), set(normalised_words(b))
    return not identity(a) <= words_b or not identity(b) <= words_a


def candidate_similarity(threshold: float) -> Callable[[Sequence[Candidate]], np.ndarray]:
    """The dedupe similarities of recall candidates: their texts' :func:`similarity_matrix`,
    bounded early at ``threshold`` (only "above the threshold or not" matters there).

    *Departure:* two texts above the threshold that differ in a number, a name, a day or a
    technical name (:func:`siblings`) are siblings, not duplicates (their similarity is capped
    at the threshold): "The 2002 Asian Junior Athletics Championships were ..." and "The 2001
    ..." are 86 % similar word for word, and merging them hid HotpotQA's answer passages; five
    clients "configured on Monday by Noor" came back as one. Only restatements merge.
    """

    def similarity(candidates: Sequence[Candidate]) -> np.ndarray:
        matrix = similarity_matrix([c.text for c in candidates], threshold)
        for i, j in zip(*np.nonzero(np.triu(matrix > threshold, k=1)), strict=True):
            if siblings(candidates[i].text, candidates[j].text):
                matrix[i, j] = matrix[j, i] = threshold
        return matrix

    return similarity
