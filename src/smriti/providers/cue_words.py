"""Cue words a person can read: the dictionary forms of a text's content words, in its language.

Keyword cues used to be the stems search uses (``mov``, ``succe``, ``manag``): fine for matching,
unreadable as a node of the memory graph, and a poor thing to embed or show. Here a cue word is
the word's lemma (``moved`` -> ``move``, ``paintings`` -> ``painting``, ``children`` -> ``child``,
simplemma's dictionaries, offline, ~1 us a word), so inflections still meet on one cue while the
cue stays a word. Stemming stays where it belongs, in keyword search (:mod:`smriti.text`).

Stop words are per language: the text's language is the one whose stop words it uses most
(stopwordsiso's lists; English on a tie or when nothing matches), and that language's stop words
are never cues, nor capitalised at a sentence start taken for names (``Und``, ``में``). English
keeps Smriti's own short list (stopwordsiso's English list is a search engine's, with ``date``,
``test`` and ``young`` in it) plus the conversational chatter that carries no topic (``yay``,
``woah``, ``gotta``).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable

import stopwordsiso
from simplemma import Lemmatizer
from simplemma.strategies import DefaultStrategy
from simplemma.strategies.dictionaries.dictionary_factory import SUPPORTED_LANGUAGES

from smriti.providers.dictionaries import CachedDictionaries
from smriti.text import STOPWORDS, unspaced, words

ENGLISH = "en"
# Interjections and filler of chat: frequent, topic-free, and never what a question asks about.
CHATTER = frozenset(
    (
        "yay woah whoa wow lol haha hahaha hehe omg gotta gonna wanna yep yup nope hmm hmmm ooh aww "
        "awesome cool nice great amazing glad totally definitely absolutely super pretty kinda sorta "
        "stuff guess hope hear means mean bet wish feelin lookin doin tryin lemme gimme dunno ya yeah "
        "cheers bye hello congrats congratulations wonderful fantastic incredible lovely sounds "
        "looks seems keep kept try tried take took come came see saw look looked"
    ).split()
)
# Contractions: "i'm" named viewer clusters and stood among keyword cues.
_CONTRACTIONS = (
    "i'm i've i'd i'll you're you've you'd you'll we're we've we'd we'll they're they've it's "
    "that's there's what's let's don't doesn't didn't can't couldn't won't wouldn't isn't aren't "
    "wasn't weren't haven't hasn't hadn't shouldn't"
).split()
CHATTER |= frozenset(_CONTRACTIONS) | frozenset(w.replace("'", "’") for w in _CONTRACTIONS)
MIN_LENGTH = 3


@functools.cache
def _lemmatizer() -> Lemmatizer:
    """simplemma's default lemmatizer (``simplemma.lemmatize``'s) over dictionaries decoded once
    per machine (:mod:`smriti.providers.dictionaries`): the same lemmas, a faster first one."""
    return Lemmatizer(lemmatization_strategy=DefaultStrategy(dictionary_factory=CachedDictionaries()))


@functools.cache
def _stopwords(language: str) -> frozenset[str]:
    """The words of ``language`` that are never cues (English: Smriti's list and the chatter)."""
    if language == ENGLISH:
        return STOPWORDS | CHATTER
    return frozenset(w.casefold() for w in stopwordsiso.stopwords(language)) | STOPWORDS | CHATTER


@functools.cache
def _languages_of_stopwords() -> dict[str, tuple[str, ...]]:
    """Stop word -> the languages whose lists hold it (English by its full list, for a fair count)."""
    index: dict[str, list[str]] = {}
    for language in sorted(stopwordsiso.langs()):
        for word in stopwordsiso.stopwords(language):
            index.setdefault(word.casefold(), []).append(language)
    return {word: tuple(languages) for word, languages in index.items()}


def language_of(tokens: Iterable[str]) -> str:
    """The language whose stop words ``tokens`` use most; English on a tie or with no stop word."""
    index = _languages_of_stopwords()
    counts: Counter[str] = Counter()
    for token in tokens:
        counts.update(index.get(token.casefold(), ()))
    if not counts:
        return ENGLISH
    return max(counts, key=lambda language: (counts[language], language == ENGLISH, language))


def stopwords_of(language: str) -> frozenset[str]:
    """The stop words of ``language`` (casefolded), Smriti's English ones included."""
    return _stopwords(language)


@functools.lru_cache(maxsize=1 << 16)
def lemma(word: str, language: str = ENGLISH) -> str:
    """The dictionary form of a casefolded ``word`` (the word itself where no dictionary knows it)."""
    if language not in SUPPORTED_LANGUAGES or unspaced(word) or not word.isalpha():
        return word
    return _lemmatizer().lemmatize(word, lang=language).casefold()


def warm() -> None:
    """Load the English dictionary (~40 ms from its decoded copy, 0.2-1 s the first time; ~30 MB)
    and index every language's stop words (the language guess: 20-35 ms) now rather than in the
    first store or recall."""
    cue_words("warming up the words")


def cue_words(text: str, language: str | None = None) -> list[str]:
    """The lemmas of ``text``'s content words, in order: no stop words, digits or short words."""
    tokens = words(text)
    return cue_terms(tokens, language or language_of(tokens))


def cue_terms(tokens: Iterable[str], language: str) -> list[str]:
    """:func:`cue_words` of tokens already split (:func:`smriti.text.words`), in ``language``."""
    stop = _stopwords(language)
    out = []
    for token in tokens:
        folded = token.casefold()
        if folded in stop or folded.isdigit() or (len(folded) < MIN_LENGTH and not unspaced(folded)):
            continue
        word = lemma(folded, language)
        if word not in stop:
            out.append(word)
    return out
