"""What a query asks to leave out: "hobbies other than fixing cars", "besides pottery", "except Redis".

Without this, the words of the excluded thing are the query's best matches: "what hobbies does Jon
have other than fixing cars" returned only memories of car repair (two of 30 sampled misses on
unseen LoCoMo conversations). :func:`excluded_terms` reads the phrase after "other than",
"besides", "except (for)", "apart from", "aside from", "excluding", "not counting" or "in addition
to" up to the end of its clause, as the content words keyword search uses (stemmed, no stop
words); recall's focus step (``nodes/refine.py``) lowers the memories that hold most of them.
Rules, not a model: English only, the first such phrase only.
"""

from __future__ import annotations

import re
from collections.abc import Collection

from smriti.text import content_words

_EXCLUSION = re.compile(
    r"\b(?:other\s+than|besides|except(?:\s+for)?|apart\s+from|aside\s+from|excluding|not\s+counting"
    r"|in\s+addition\s+to)\s+(?P<phrase>[^?.!,;:]+)",
    re.IGNORECASE,
)


def excluded_terms(query: str) -> frozenset[str]:
    """The content words of the thing ``query`` asks to leave out (empty when it leaves out nothing)."""
    found = _EXCLUSION.search(query)
    return frozenset(content_words(found.group("phrase"))) if found else frozenset()


def holds_excluded(text: str, excluded: Collection[str]) -> bool:
    """Whether ``text`` holds at least half of the ``excluded`` terms (one of one or two)."""
    if not excluded:
        return False
    have = set(content_words(text))
    return 2 * sum(term in have for term in excluded) >= len(excluded)


def without_exclusion(query: str) -> str:
    """``query`` without its exclusion phrase ("what hobbies besides pottery?" -> "what hobbies?")."""
    return " ".join(_EXCLUSION.sub(" ", query).split())
