"""Offline cues a person can read (issue 25): words, not stems; stop words of the text's language."""

from __future__ import annotations

from smriti.nodes.search import cue_forms
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph
from smriti.providers.cue_words import cue_words, language_of, lemma
from smriti.providers.heuristic import extract_cues
from smriti.stores.base import Cue


def _names(text: str) -> list[str]:
    return [c.name for c in extract_cues(text)]


def test_keyword_cues_are_words_not_stems():
    names = _names(
        "Caroline: Woah, I moved and the paintings were a success! Gotta go, yay, we are managing stages."
    )
    assert {"move", "painting", "success", "manage", "stage"} <= set(names)
    assert not {"mov", "succe", "manag", "stag", "woah", "gotta", "yay"} & set(names)
    assert "Caroline" in names


def test_inflections_meet_on_one_cue():
    assert lemma("moved") == lemma("moving") == "move"
    assert lemma("children") == "child"
    assert cue_words("The kids ran races") == ["kid", "run", "race"]


def test_stop_words_of_the_texts_language_are_never_cues():
    german = _names("Und dann sind wir nach Berlin gefahren, und die Kinder haben dort gespielt.")
    assert language_of("Und dann sind wir nach Berlin gefahren".split()) == "de"
    assert "Berlin" in german and not {"Und", "und", "dann", "sind", "wir", "die", "dort"} & set(german)
    hindi = _names("मैं कल दिल्ली में था और हमने खाना खाया")
    assert "दिल्ली" in hindi and "में" not in hindi and "और" not in hindi
    assert language_of([]) == "en" and language_of(["pgvector"]) == "en"


def test_a_query_cue_also_looks_up_the_stem_older_memories_were_linked_to():
    assert cue_forms(["Painting", "Caroline"]) == {
        "painting": "painting",
        "paint": "painting",
        "caroline": "caroline",
    }


def test_a_memory_linked_by_an_older_version_is_still_reached_through_its_cue(make_context):
    context = make_context()
    stored = store_graph.invoke(
        {"content": "Caroline showed the sunset paintings at the fair"}, context=context
    )
    engram_id = stored["id"]
    context.store.take_back_links(engram_id)  # as an older version linked it: to stems
    context.store.link_cues(engram_id, [Cue(name="paint", cue_type="keyword"), Cue(name="sunset")])
    out = recall_graph.invoke({"query": "paintings", "explain": True}, context=context)
    step = next(t for t in out["trace"] if t["node"] == "cue_traverse")
    assert [c["id"] for c in step["candidates"]] == [engram_id]


def test_warm_leaves_nothing_for_the_first_query_to_build():
    # The language table took 60 ms of a first recall's parse: built by warm() instead.
    from smriti.providers import cue_words
    from smriti.providers.analysis import parse_query

    cue_words._languages_of_stopwords.cache_clear()
    cue_words.warm()
    built = cue_words._languages_of_stopwords.cache_info().misses
    parse_query(None, "What did Caroline say about the adoption agency last week?")
    assert cue_words._languages_of_stopwords.cache_info().misses == built == 1
