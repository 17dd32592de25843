"""Small text utilities shared by the offline embedder and the heuristic analyser."""

from __future__ import annotations

import functools
import re
import unicodedata

import regex

# Function words and conversational filler: never useful as cues or hashing features.
STOPWORDS = frozenset(
    (
        "a about above after again against all also am an and any are as at be because been before "
        "being below between both but by can could did do does doing done down during each few for "
        "from further get got had has have having he her here hers herself him himself his how i if "
        "in into is it its itself just let like me more most my myself no nor not now of off on once "
        "only or other our ours ourselves out over own really same she should so some such than that "
        "the their theirs them themselves then there these they this those through to too under until "
        "up very was we were what when where which while who whom why will with would yeah yes you "
        "your yours yourself oh okay ok um uh hey hi thanks thank sure well much many lot lots one "
        "thing things something anything going go went gone say said tell told know knew think "
        "thought feel felt want wanted make made "
    ).split()
)

# A word: a letter or digit of any script, then letters, combining marks (Devanagari vowel
# signs, a decomposed umlaut), digits, and inner apostrophes, hyphens and underscores. The
# ASCII-only pattern before it cut "München" to "nchen" and lost Hindi and Chinese entirely.
_WORD = regex.compile(r"[\p{L}\p{N}][\p{L}\p{M}\p{N}'_-]*")
# Scripts written without spaces between words (Chinese, Japanese): a run of them is cut into
# overlapping character bigrams, the usual segmenter-free index for CJK search ("寿司が好き" ->
# 寿司, 司が, が好, 好き), so a query word of two or more characters finds the text around it.
_UNSPACED = regex.compile(r"[\p{Han}\p{Hiragana}\p{Katakana}]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def without_possessive(word: str) -> str:
    """``word`` without a possessive ``'s`` ("Caroline's" -> "Caroline"; "JOHN'S" stays)."""
    return word[:-2] if word.endswith("'s") else word


def unspaced(token: str) -> bool:
    """True for a token of a script written without spaces (a CJK bigram or single character)."""
    return bool(token) and bool(_UNSPACED.match(token[0]))


def _bigrams(run: str) -> list[str]:
    return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]


def words(text: str) -> list[str]:
    """Words as written (case kept, NFC), possessive ``'s`` removed; CJK runs as bigrams."""
    text = unicodedata.normalize("NFC", text)
    found: list[str] = _WORD.findall(text)
    if not _UNSPACED.search(text):
        # No CJK anywhere (most texts): no regex per word. Recall reads the words of every
        # candidate it weighs (nodes/candidates.memory_words), ~80 new texts a recall at 10k.
        return [without_possessive(word) for word in found]
    out: list[str] = []
    for word in found:
        if not _UNSPACED.search(word):
            out.append(without_possessive(word))
            continue
        last = 0
        for run in _UNSPACED.finditer(word):
            if run.start() > last:
                out.append(word[last : run.start()])
            out.extend(_bigrams(run.group()))
            last = run.end()
        if last < len(word):
            out.append(word[last:])
    return out


@functools.lru_cache(maxsize=1 << 16)
def light_stem(word: str) -> str:
    """A deliberately light English stemmer: plural and -ing/-ed endings only.

    Heavier stemmers (Porter) merge unrelated words ("university"/"universe"); for cue
    matching a few common inflections are enough.
    """
    if len(word) <= 3 or not word.isalpha():
        return word
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: len(word) - len(suffix)] + replacement
    return word


# word as words() gives it -> its term (None: a stop word or a short one), per minimum length
_TERMS: dict[int, dict[str, str | None]] = {}
_TERMS_MAX = 1 << 17  # words kept per minimum length; past it the cache starts afresh


def _term(word: str, min_length: int) -> str | None:
    lower = without_possessive(word).lower()
    if (len(lower) < min_length and not unspaced(lower)) or lower in STOPWORDS:
        return None
    return light_stem(lower)


def content_words(text: str, min_length: int = 3) -> list[str]:
    """Lower-cased, stemmed words of ``min_length`` or more characters that are not stop words."""
    # why a dict per word: the same few thousand words recur, and a bulk import tokenises every
    # memory (10k memories: 0.5 s word by word, 0.15 s through the dict)
    cache = _TERMS.setdefault(min_length, {})
    if len(cache) > _TERMS_MAX:
        cache.clear()
    out = []
    for word in words(text):
        try:
            term = cache[word]
        except KeyError:
            term = cache[word] = _term(word, min_length)
        if term is not None:
            out.append(term)
    return out


def first_sentence(text: str, limit: int = 200) -> str:
    """The first sentence, cut at ``limit`` characters on a word boundary."""
    sentence = _SENTENCE.split(text.strip(), maxsplit=1)[0]
    if len(sentence) <= limit:
        return sentence
    return sentence[:limit].rsplit(" ", 1)[0] + "…"


def search_terms(text: str) -> list[str]:
    """Terms for keyword search: lower-cased, stemmed words of two or more characters, no stop words.

    On LoCoMo this tokenisation lifts BM25 recall@10 from 0.56 (plain words, a short stop list)
    to 0.61 (bench/RESULTS.md).
    """
    return content_words(text, min_length=2)


# Labels people put in front of a memory ("Title: ...", "Note: ...", "Q: ...", "## Deploys",
# "2024-05-01: ...", "- ..."): what follows is what the memory is about, not the label. A label
# that became a cue made "title" the subject of every 2Wiki passage and turned the bridge off.
LABEL_WORDS = frozenset(
    "title note notes memo q a question answer summary tldr tl;dr todo fixme update reminder fact "
    "tip idea decision context topic subject re fyi important nb ps log entry date source".split()
)
_LABEL = regex.compile(
    r"\A\s*(?:"
    r"\#{1,6}[ \t]+"  # a Markdown heading's marks
    r"|[-*•>][ \t]+"  # a bullet or a quote
    r"|\[[^\]\n]{1,40}\][ \t]*"  # "[2024-05-01]", "[meeting]"
    r"|\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d)?)?[ \t]*(?:[:\-–—][ \t]*)?"  # an ISO date
    r"|(?P<word>[\p{L};]{1,9})[ \t]*(?:[:：][ \t]*|\n)"  # "Title:", "Note:", "Q:", a "Summary" line
    r")"
)


def strip_label(text: str) -> str:
    """``text`` without the labels it starts with ("## Note: Dana leads" -> "Dana leads")."""
    while match := _LABEL.match(text):
        word = match.group("word")
        if word is not None and word.casefold() not in LABEL_WORDS:
            break  # "Melanie: ..." names the speaker: that is what the memory is about
        if match.end() == 0 or match.end() >= len(text.rstrip()):
            break  # a label with nothing after it is the text itself
        text = text[match.end() :]
    return text
