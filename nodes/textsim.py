"""Text similarity for recall's dedupe (Memory Fabric step 4: "text similarity > 85 %").

Why words and not characters: two unrelated English sentences of similar length share most
of their letters, so a character ratio calls them 80-90 % similar; over words, a memory and
its light rewording ("Alice moved to Berlin in May" / "alice moved to berlin in may.") are
near 1 and two different facts about the same people stay far apart.

Why difflib and not an embedding: the specification asks for text similarity, and an
embedding's cosine merges paraphrases that say different things ("prefers tabs" / "prefers
spaces" are close in any embedding). difflib is in the standard library (rapidfuzz is not a
dependency), and the two cheap upper bounds it offers skip the full comparison for almost
every pair, so a shortlist of 40 results costs well under a millisecond.
"""

from __future__ import annotations

from collections.abc import Callable
from difflib import SequenceMatcher
from functools import lru_cache

from smriti.nodes.state import Candidate
from smriti.text import words


@lru_cache(maxsize=4096)
def normalised_words(text: str) -> tuple[str, ...]:
    """The words of ``text``, lower-cased (case folded), punctuation and spacing dropped."""
    return tuple(word.casefold() for word in words(text))


def text_similarity(a: str, b: str, floor: float = 0.0) -> float:
    """Word-sequence similarity in [0, 1]: difflib's ratio 2 * M / T over the normalised words
    (M words matched in order, T words in both texts); 1 for two texts with no words.

    Computes the ratio only when its two upper bounds (length, then word multiset) exceed
    ``floor``; below it, returns the bound, which is then at most ``floor`` too.
    """
    left, right = normalised_words(a), normalised_words(b)
    if not left and not right:
        return 1.0
    matcher = SequenceMatcher(None, left, right, autojunk=False)
    for bound in (matcher.real_quick_ratio, matcher.quick_ratio):
        value = bound()
        if value <= floor:
            return value
    return matcher.ratio()


def candidate_similarity(threshold: float) -> Callable[[Candidate, Candidate], float]:
    """The dedupe similarity of two recall candidates: their texts' :func:`text_similarity`,
    bounded early at ``threshold`` (only "above the threshold or not" matters there)."""

    def similarity(a: Candidate, b: Candidate) -> float:
        return text_similarity(a.text, b.text, threshold)

    return similarity
