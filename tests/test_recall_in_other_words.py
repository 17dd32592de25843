"""Recall of notes asked in other words (issue 41): evidence weighed by how much of the query it
covers, query focus that reads days as times and ``kestrel`` as ``team-kestrel``, dedupe that keeps
siblings apart, and rankings that do not depend on the build's random ids.

Real SQLite stores through the library's ``Memory``; the embedder is the 64-dim hashing one
(``tests/conftest.py``), or :class:`KeywordEmbeddings` where a test needs to say which memory is
nearest in meaning.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from smriti.memory import Memory
from smriti.nodes.candidates import memory_subject, memory_words
from smriti.nodes.rank import nearest_first
from smriti.nodes.refine import entity_factor, is_time_name
from smriti.nodes.relations import bridged_total
from smriti.nodes.scoring import Fusion, coverage, fused_relevance, support_factor
from smriti.nodes.state import Candidate
from smriti.nodes.textsim import siblings
from smriti.providers.heuristic import parse_query_offline
from tests.conftest import KeywordEmbeddings


def _texts(result: dict) -> list[str]:
    return [r["text"] for r in result["results"]]


# ----------------------------------------------------------------------------- coverage
def test_coverage_is_the_idf_weighted_share_of_the_query_matched():
    weights = {"new": 0.5, "linter": 3.0, "frontend": 2.5}
    assert coverage(["new"], weights) == pytest.approx(0.5 / 6.0)
    assert coverage(["linter", "frontend", "other"], weights) == pytest.approx(5.5 / 6.0)
    assert coverage([], weights) == 0.0
    assert coverage(["anything"], {}) == 1.0  # a query with no cues says nothing against a hit


def test_a_memory_s_words_meet_a_query_cue_as_written_by_lemma_and_by_stem():
    have = memory_words("Aiko met Ravi's team; the Dashboards were studied twice")
    assert {"aiko", "met", "meet", "ravi", "dashboards", "dashboard", "studied", "study"} <= have
    assert "'s" not in "".join(have) and "the" in have  # every word, possessives dropped
    assert memory_words("会議は月曜日") >= {"会議", "月曜"}  # CJK as bigrams, as full-text search has them


def test_support_factor_shrinks_a_vote_below_the_support_and_is_off_at_zero():
    assert support_factor(0.1, 0.5) == pytest.approx(0.2)
    assert support_factor(0.7, 0.5) == 1.0
    assert support_factor(0.0, 0.0) == 1.0


def test_one_common_word_no_longer_outranks_the_nearest_in_meaning():
    """The issue's arithmetic: the note first by meaning that matches no word scores 0.556 by rank;
    the second by meaning that holds one common word of the question outranked it. Weighed by
    coverage, its one word is worth what it covers."""
    fusion = Fusion({"similarity": 0.5, "text": 0.3, "cue": 0.1}, k=5, score_share=0.0, support=0.5)
    ranked = {"similarity": [0.8, 0.7], "text": [1.0], "cue": []}
    nearest, _ = fused_relevance({"similarity": 0.8}, ranked, fusion)
    common_word, _ = fused_relevance({"similarity": 0.7, "text": 1.0}, ranked, fusion, covered=0.08)
    specific, _ = fused_relevance({"similarity": 0.7, "text": 1.0}, ranked, fusion, covered=0.6)
    assert nearest == pytest.approx(0.5 / 6 / (0.9 / 6))
    assert common_word < nearest < specific
    unweighed, _ = fused_relevance({"similarity": 0.7, "text": 1.0}, ranked, Fusion(fusion.weights, 5, 0.0))
    assert unweighed > nearest  # what it was: the single common word won


def test_the_bridge_raises_a_memory_to_the_seed_that_named_it_at_most():
    assert bridged_total(0.5, 0.45, 0.9, below_seed=True) == pytest.approx(0.9)
    assert bridged_total(0.3, 0.2, 0.9, below_seed=True) == pytest.approx(0.5)
    assert bridged_total(0.95, 0.45, 0.9, below_seed=True) == pytest.approx(0.95)  # own relevance kept
    assert bridged_total(0.5, 0.45, 0.9, below_seed=False) == pytest.approx(0.95)


def test_a_note_about_what_the_answer_names_does_not_outrank_the_answer(settings):
    """ "Priya owns payments-api" answers the question; the bridge follows payments-api to the
    notes about it, which may join the answer but not pass it."""
    embedder = KeywordEmbeddings(["review", "reviewer", "refund", "change", "retries", "charges"])

    def first(below_seed: bool) -> str:
        tuned = settings.model_copy(update={"bridge_below_seed": below_seed})
        with Memory.open(tuned, embedder=embedder, user=f"u{below_seed}") as memory:
            memory.store("Priya owns payments-api and is the first reviewer for any refund change")
            memory.store("payments-api retries card charges at most twice")
            memory.store("payments-api keeps a pool of 20 connections")
            return _texts(memory.recall("Who should review my refund change?", limit=3))[0]

    assert first(below_seed=True).startswith("Priya owns payments-api")


# ----------------------------------------------------------------------------- query focus
def test_day_and_month_names_are_times_not_entity_hints():
    parsed = parse_query_offline("What did Priya decide on Friday about the March release?")
    assert "Priya" in parsed.entity_hints
    assert not any(is_time_name(h) for h in parsed.entity_hints), parsed.entity_hints
    assert is_time_name("Friday") and is_time_name("2024") and not is_time_name("kestrel")


def test_an_entity_matches_a_cue_that_holds_it_as_a_word():
    assert entity_factor(["team-kestrel"], {"kestrel": 1.0}, 0.2) == 1.0
    assert entity_factor(["payments-api"], {"payments": 1.0}, 0.2) == 1.0
    assert entity_factor(["kestrels-nest"], {"kestrel": 1.0}, 0.2) == pytest.approx(0.8)


def test_a_leading_article_is_not_the_subject():
    types = {"database-engineer": "agent", "cursor-pagination": "technology"}
    text = "The database-engineer recommends cursor-pagination for the orders API"
    assert memory_subject(text, list(types), types) == "database-engineer"
    assert memory_subject("Theo recommends tabs", ["theo"], {"theo": "person"}) == "theo"


def test_the_memory_fabric_example_ranks_the_recommendation_first(settings):
    with Memory.open(settings) as memory:
        memory.store("database-engineer uses pgvector for RAG applications")
        memory.store("The database-engineer recommends cursor-pagination for the orders API")
        memory.store("cursor-pagination relies on opaque tokens instead of offsets")
        memory.store("The frontend team prefers React with TypeScript")
        result = memory.recall("What did database-engineer recommend about pagination?", limit=3)
    assert _texts(result)[0].startswith("The database-engineer recommends cursor-pagination")


def test_focus_does_not_demote_the_nearest_memory_for_not_naming_the_entity(settings):
    """The question names Kestrel; the note nearest in meaning calls the team otherwise. Focus
    spares it (FOCUS_SPARES_NEAREST); with the setting off it falls below the note that names it."""
    embedder = KeywordEmbeddings(["rollback", "deploy", "friday", "kestrel", "lunch"])
    notes = [
        "to roll back a bad deploy the on-call engineer runs the rollback job, never a manual deploy",
        "Kestrel has lunch together on Friday",
    ]

    def first(**overrides) -> str:
        with Memory.open(
            settings.model_copy(update=overrides), embedder=embedder, user=f"u{len(overrides)}"
        ) as m:
            for note in notes:
                m.store(note)
            return _texts(m.recall("How does Kestrel undo a deploy rollback?", limit=2))[0]

    assert first().startswith("to roll back")
    assert first(focus_spares_nearest=False, entity_hint_weight=0.9).startswith("Kestrel")


# ----------------------------------------------------------------------------- nearest first
class SynonymEmbeddings(KeywordEmbeddings):
    """KeywordEmbeddings whose words of one group share an axis: "undo" is near "reverts"."""

    def __init__(self, groups: list[tuple[str, ...]]) -> None:
        super().__init__([group[0] for group in groups])
        self.axes = {word: axis for axis, group in enumerate(groups) for word in group}


def _candidate(name: str, similarity: float, score: float, **fields) -> Candidate:
    return Candidate(id=name, text=name, similarity=similarity, score=score, **fields)


def test_the_nearest_in_meaning_goes_first_over_a_first_with_little_word_support():
    raised = _candidate("raised by the bridge", 0.55, 0.9)
    common_word = _candidate("shares one common word", 0.5, 0.8, text_score=1.0, coverage=0.1)
    nearest = _candidate("nearest", 0.8, 0.7)
    for first in (raised, common_word):
        ranked, note = nearest_first([first, nearest], support=0.3)
        assert [c.id for c in ranked] == ["nearest", first.id] and note
        assert ranked[0].score >= ranked[1].score  # scores still descend
        assert ranked[0].components["nearest_first"] == 1.0
        assert nearest.score == 0.7  # the input is not changed


def test_a_word_match_covering_the_question_or_evidence_against_the_nearest_keeps_the_first():
    covered = _candidate("holds the question's rare words", 0.5, 0.9, cue_score=0.8, coverage=0.6)
    nearest = _candidate("nearest", 0.8, 0.7)
    assert nearest_first([covered, nearest], support=0.3)[0][0] is covered
    raised = _candidate("raised", 0.5, 0.9)
    about_another = _candidate("about another person", 0.8, 0.7, focus={"subject": 0.67})
    outside_window = _candidate("last year", 0.8, 0.7, focus={"time": 0.5})
    assert nearest_first([raised, about_another, outside_window], support=0.3)[0][0] is raised
    assert nearest_first([raised, nearest], support=0.0) == ([raised, nearest], "")  # off
    reranked = _candidate("the reranker's first", 0.5, 0.9, rerank_score=0.9)
    assert nearest_first([reranked, nearest], support=0.3)[0][0] is reranked


def test_a_newer_note_sharing_one_word_does_not_outrank_the_answer_asked_in_other_words(settings):
    """The runbook answers "undo a version" in other words; a newer note shares the common word
    "team" and is near enough that recency lifts it above the runbook, unless the nearest in
    meaning goes first (NEAREST_FIRST_SUPPORT)."""
    embedder = SynonymEmbeddings([("undo", "reverts", "rollback"), ("version", "deploy", "release")])

    def ranking(support: float) -> list[str]:
        tuned = settings.model_copy(update={"nearest_first_support": support})
        with Memory.open(tuned, embedder=embedder, user=f"u{int(support * 10)}") as memory:
            old = datetime.now(UTC) - timedelta(days=60)
            memory.store("The on-call engineer reverts a bad deploy with the rollback job", occurred_at=old)
            memory.store("Priya names the team release every quarter")
            memory.store("Priya and the team have lunch on Fridays")
            result = memory.recall("How do we undo a version as a team?", limit=3, explain=True)
        return _texts(result)

    assert ranking(0.0)[0].startswith("Priya names the team release")  # what it was
    assert ranking(0.3)[0].startswith("The on-call engineer reverts")


# ----------------------------------------------------------------------------- dedupe
CLIENTS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli"]


def test_siblings_written_alike_all_come_back(settings):
    with Memory.open(settings) as memory:
        for client in CLIENTS:
            memory.store(f"The {client} client was configured on Monday by Noor for the Orion project")
        result = memory.recall("Which clients did Noor configure for Orion?", limit=10)
        search = memory.recall("Which clients did Noor configure for Orion?", limit=10, mode="search")
    recalled = {client for client in CLIENTS for text in _texts(result) if client in text}
    assert recalled == set(CLIENTS), _texts(result)
    assert len(result["results"]) == len(search["results"]) == 5


def test_siblings_are_stored_even_where_the_embedder_cannot_tell_them_apart(settings):
    """An embedder blind to client names gives the five facts one vector (cosine 1 > the store's
    0.95 dedupe threshold): each is still stored, and an exact restatement is still merged."""
    embedder = KeywordEmbeddings(["client", "configured", "monday", "project"])
    with Memory.open(settings, embedder=embedder) as memory:
        ids = {
            memory.store(f"The {c} client was configured on Monday for the project")["id"] for c in CLIENTS
        }
        again = memory.store("the acme client was configured on monday for the project")
        assert len(ids) == len(CLIENTS)
        assert again["deduplicated"] is True and again["id"] in ids
        assert memory.stats()["engrams"] == len(CLIENTS)


def test_a_restatement_still_merges_and_says_which_ids_it_stands_for(settings):
    with Memory.open(settings) as memory:
        first = memory.store("Dana moved to Berlin in May with the whole data team")["id"]
        second = memory.store("dana moved to berlin in may with the whole data team!")["id"]
        result = memory.recall("where did Dana move", limit=5)
    merged = [r for r in result["results"] if r["id"] in (first, second)]
    assert len(merged) == 1, _texts(result)
    assert {merged[0]["id"], *merged[0]["metadata"]["merged_ids"]} == {first, second}


def test_siblings_differ_in_a_name_number_or_technical_name_and_restatements_do_not():
    assert siblings("The Acme client was set up by Noor", "The Globex client was set up by Noor")
    assert siblings("payments-api retries twice", "billing-api retries twice")
    assert siblings("Release 2.3 shipped on Monday", "Release 2.4 shipped on Monday")
    assert not siblings("Alice moved to Berlin in May.", "alice moved to berlin in may")
    assert not siblings("In May Dana moved to Berlin", "Dana moved to Berlin in May")


# ----------------------------------------------------------------------------- reproducible
def _conversation() -> list[tuple[str, datetime]]:
    """A long chat between two speakers (hub cues) about recurring topics: more memories per cue
    than a branch's pool (50), so every branch cuts among ties."""
    topics = ["pottery", "hiking", "the new job", "painting", "the dog", "camping", "a concert"]
    openers = [
        "I keep thinking about",
        "yesterday was all",
        "you would love",
        "still busy with",
        "tell me about",
    ]
    closers = ["these days", "with the kids", "after work", "at the lake", "on weekends", "again"]
    start = datetime(2026, 1, 1, 9, tzinfo=UTC)
    turns = []
    for i in range(140):
        speaker = ("Caroline", "Melanie")[i % 2]
        topic = topics[(i // 2) % len(topics)]
        text = f"{speaker}: {openers[i % 5]} {topic} {closers[i % 6]}, number {i}"
        turns.append((text, start + timedelta(minutes=i)))
    return turns


@pytest.mark.parametrize("user_pair", [("one", "two")])
def test_the_same_conversation_stored_twice_ranks_alike(settings, user_pair):
    questions = ["What does Caroline think about?", "Who went camping?", "pottery", "What about the dog?"]
    rankings = []
    for user in user_pair:
        with Memory.open(settings, user=user) as memory:
            for text, moment in _conversation():
                memory.store(text, occurred_at=moment)
            rankings.append([_texts(memory.recall(q, limit=10)) for q in questions])
    assert all(rankings[0]), rankings[0]
    assert rankings[0] == rankings[1]
