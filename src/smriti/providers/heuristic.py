"""The offline analyser: cues, memory type, relations and query intent without an LLM.

Rules, not a model, so its limits are easy to state: entities are capitalised word runs,
hyphenated or alphanumeric terms; keywords are the most frequent content words, as the words
they are (lemmas, :mod:`smriti.providers.cue_words`), never stems; the text's language decides
which words are stop words; relations come from a fixed list of verbs between two names. It is
what runs with no API key, and what every LLM failure falls back to, so a memory is never lost
for want of a model.
"""

from __future__ import annotations

import functools
import re
from collections import Counter

import regex

from smriti.providers.cue_words import cue_terms, language_of, lemma, stopwords_of
from smriti.providers.lexicon import time_word, word_type
from smriti.providers.schemas import Analysis, CueItem, ParsedQuery, RelationItem
from smriti.stores.base import MemoryType, normalise_cue_name
from smriti.text import STOPWORDS, first_sentence, strip_label, words

MAX_CUES = 12
MAX_KEYWORDS = 8

_TIME_WORDS = frozenset(
    (
        "monday tuesday wednesday thursday friday saturday sunday january february march april may "
        "june july august september october november december yesterday today tomorrow tonight "
        "weekend morning evening week month year"
    ).split()
)
# Capitalised at the start of a sentence for grammar, not because they are names.
_NOT_NAMES = (
    STOPWORDS
    | _TIME_WORDS
    | frozenset("please remember note use using always never maybe perhaps first next last also".split())
    | frozenset("i'm i've i'd i'll i’m i’ve i’d i’ll".split())  # "I'm" starts many a chat turn
)
# Capitalised runs in any cased script ("Caroline", "New York", "München", "Ярослав"), within a
# line: a title on its own line is not one name with the sentence's first word below it.
_NAME_RUN = regex.compile(r"\b\p{Lu}[\p{L}\p{M}\p{N}'-]*(?:[ \t]+\p{Lu}[\p{L}\p{M}\p{N}'-]*)*")
_TECH_TERM = re.compile(r"\b(?:[a-z]+[-_.][a-z0-9]+[\w.-]*|[a-z]+\d[\w.-]*|[a-z]+[A-Z]\w*)\b")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_RELATION_VERBS = (
    "uses",
    "used",
    "prefers",
    "preferred",
    "likes",
    "loves",
    "hates",
    "owns",
    "recommends",
    "recommended",
    "works at",
    "works on",
    "worked at",
    "lives in",
    "moved to",
    "joined",
    "manages",
    "depends on",
    "relies on",
    "relied on",
    "requires",
    "runs on",
    "suggests",
    "suggested",
    "replaced",
    "chose",
    "switched to",
    "visited",
    "married",
)
# An adverb between subject and verb ("Alice now prefers Qdrant") is skipped, so a correction
# states the same subject as the fact it corrects (nodes/supersede.py compares them).
_ADVERB = r"(?:\s+(?:now|still|currently|actually|instead|also|then|finally))?"
_RELATION = re.compile(
    r"\b([A-Za-z][\w-]*(?:\s+[A-Z][\w-]*)?)" + _ADVERB + r"\s+(" + "|".join(_RELATION_VERBS) + r")\s+"
    r"(?:the\s+|a\s+|an\s+)?([A-Za-z0-9][\w.-]*(?:\s+[A-Z][\w-]*)*)"
)
_PROCEDURAL = re.compile(
    r"\b(how to|step \d|steps|first,|then run|to install|to deploy|to configure|run `|command)\b"
    r"|^\s*(run|install|use|set|add|create|open|click|restart|deploy|configure)\b",
    re.IGNORECASE,
)
_EPISODIC = re.compile(
    r"\b(yesterday|today|tonight|last (week|month|year|night)|ago|this morning|met|went|visited|"
    r"attended|happened|was|were|did|had)\b",
    re.IGNORECASE,
)
_SEMANTIC = re.compile(
    r"\b(is|are|prefers?|likes?|loves?|always|usually|never|uses|favou?rite)\b", re.IGNORECASE
)


@functools.cache
def _not_names(language: str) -> frozenset[str]:
    """Words capitalised for grammar in ``language``, never names (built once per language)."""
    return _NOT_NAMES | stopwords_of(language)


def _names(text: str, language: str) -> list[tuple[str, str]]:
    """Capitalised runs ("Caroline", "New York") and technical terms ("pgvector-0.7", "gpt-4o")."""
    found: list[tuple[str, str]] = []
    not_names = _not_names(language)
    for match in _NAME_RUN.finditer(text):
        run = [w for w in re.sub(r"'s\b", "", match.group()).split() if w.casefold() not in not_names]
        if not run:
            continue
        name = " ".join(run)
        if len(run) == 1 and (known := word_type(name)):  # Fridays, American, PostgreSQL
            found.append((time_word(name) or name, known))
            continue
        before = text[: match.start()].rstrip()
        kind = "place" if re.search(r"\b(in|at|to|from|near)$", before) else "person"
        if name.isupper() and len(name) > 1:
            kind = "organization"  # acronyms: NASA, LGBTQ, AWS
        if len(run) > 3 or any(ch.isdigit() for ch in name):
            kind = "concept"
        found.append((name, kind))
    for match in _TECH_TERM.finditer(text):
        found.append((match.group().rstrip(".-"), "technology"))
    for match in _YEAR.finditer(text):
        found.append((match.group(), "time"))
    for word in re.findall(r"[A-Za-z]+", text):
        if day_or_month := time_word(word):
            found.append((day_or_month, "time"))
        elif word.lower() in _TIME_WORDS and word.lower() not in {"week", "month", "year"}:
            found.append((word.lower(), "time"))
    return found


@functools.lru_cache(maxsize=1 << 12)
def text_names(text: str) -> tuple[str, ...]:
    """Every name ``text`` holds, normalised as cue names are (no cap: ``extract_cues`` keeps
    MAX_CUES), times and nationalities left out (cached: recall's bridge asks it of the best
    candidates, often the same memories, ~1 ms a text)."""
    text = strip_label(text)
    language = language_of(words(text))
    return tuple(
        dict.fromkeys(
            normalise_cue_name(name)
            for name, kind in _names(text, language)
            if kind not in ("time", "nationality")
        )
    )


def extract_cues(text: str) -> list[CueItem]:
    """Entities first (they carry the topic), then the most frequent keywords; a leading label
    ("Title:", "Note:", "## ") is not a cue."""
    text = strip_label(text)
    tokens = words(text)
    language = language_of(tokens)
    cues: dict[str, CueItem] = {}
    for name, kind in _names(text, language):
        cues.setdefault(name.lower(), CueItem(name=name, type=kind))
    entity_words = {lemma(w, language) for key in cues for w in key.split()}
    counts = Counter(w for w in cue_terms(tokens, language) if w not in entity_words)
    for word, _ in counts.most_common(MAX_KEYWORDS):
        cues.setdefault(word, CueItem(name=word, type="keyword"))
    return list(cues.values())[:MAX_CUES]


def extract_relations(text: str) -> list[RelationItem]:
    relations = []
    for source, verb, target in _RELATION.findall(text):
        if source.lower() in STOPWORDS or target.lower() in STOPWORDS:
            continue
        target = target.rstrip(".,;:!?")  # the pattern allows dots inside names (node.js), not after them
        relations.append(RelationItem(source=source, relation=verb, target=target))
    return relations


def memory_type(text: str) -> MemoryType:
    if _PROCEDURAL.search(text):
        return "procedural"
    if _EPISODIC.search(text):
        return "episodic"
    if _SEMANTIC.search(text):
        return "semantic"
    return "episodic"


def analyze_offline(text: str) -> Analysis:
    return Analysis(
        summary=first_sentence(text),
        memory_type=memory_type(text),
        cues=extract_cues(text),
        relations=extract_relations(text),
    )


def query_intent(query: str) -> str:
    lowered = query.lower()
    if re.search(r"\b(decid|decision|chose|choose|recommend|approach|prefer|should we)", lowered):
        return "decision"
    if re.search(r"\bhow (do|to|can|should)\b|\bsteps?\b|\binstall|\bconfigure", lowered):
        return "procedure"
    if re.search(r"\bwhen\b|\bwhat (day|date|time|year|month)\b|\bhow long\b", lowered):
        return "event"
    if re.search(r"\bwho\b|\bwhose\b", lowered):
        return "person"
    if re.search(r"\b(what|which|where|why|is|are|does|do)\b", lowered):
        return "fact"
    return "general"


def parse_query_offline(query: str) -> ParsedQuery:
    """Cues to traverse from (entities and keywords), the entities named, and the intent."""
    cues = extract_cues(query)
    # Days, months and years say when, not who or what: "what did we decide on Friday?" is not
    # about an entity called Friday (focus would demote every memory not linked to it).
    hints = [c.name for c in cues if c.type not in ("keyword", "time")]
    hints += [w for w in re.findall(r"\b[a-z]+-[a-z][\w-]*\b", query.lower()) if w not in hints]
    return ParsedQuery(cues=[c.name for c in cues], entity_hints=hints, intent=query_intent(query))
