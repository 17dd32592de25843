"""The Memory Fabric pieces on their own: relation traversal over a real store, paths, the
relations of cross-referenced entities, the parsed query and text similarity for dedupe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from smriti.nodes.graph_relations import MAX_PATHS, by_entity, entity_relations
from smriti.nodes.rank import cleaned_query, parsed_result
from smriti.nodes.refine import dedupe_results
from smriti.nodes.relations import (
    Step,
    path_entry,
    query_entities,
    render_path,
    traverse,
)
from smriti.nodes.scoring import hub_ceiling
from smriti.nodes.state import Candidate
from smriti.nodes.textsim import candidate_similarity, similarity_matrix, text_similarity
from smriti.stores import make_store
from smriti.stores.base import Relation

T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)


@pytest.fixture
def store(settings):
    opened = make_store(settings, "alice")
    yield opened
    opened.close()


def _facts(store, *triples):
    for i, (source, relation, target, engram) in enumerate(triples):
        store.add_relation(Relation(source, relation, target, engram, T0 + timedelta(minutes=i)))


# ----------------------------------------------------------------------------- traversal
def test_traverse_follows_relations_to_depth_two_and_no_further(store):
    _facts(
        store,
        ("database-engineer", "recommends", "cursor-pagination", "m1"),
        ("cursor-pagination", "relies_on", "opaque-tokens", "m2"),
        ("opaque-tokens", "encode", "row-ids", "m3"),  # depth 3: out of reach
    )
    reached = traverse(store, ["database-engineer"], depth=2, max_edges=30, max_frontier=8)
    assert set(reached.facts) == {"m1", "m2"}
    (path,) = reached.paths("m2")
    assert render_path(path) == "database-engineer -recommends-> cursor-pagination -relies_on-> opaque-tokens"
    assert set(reached.entities) == {"database-engineer", "cursor-pagination", "opaque-tokens"}
    deeper = traverse(store, ["database-engineer"], depth=3, max_edges=30, max_frontier=8)
    assert "m3" in deeper.facts and len(deeper.paths("m3")[0]) == 3


def test_traverse_walks_edges_backwards_and_says_so(store):
    _facts(store, ("database-engineer", "recommends", "cursor-pagination", "m1"))
    reached = traverse(store, ["cursor-pagination"], depth=2, max_edges=30, max_frontier=8)
    (path,) = reached.paths("m1")
    assert render_path(path) == "cursor-pagination <-recommends- database-engineer"
    entry = path_entry(path)
    assert (entry["from"], entry["to"], entry["kind"], entry["depth"]) == (
        "cursor-pagination",
        "database-engineer",
        "path",
        1,
    )


def test_traverse_is_bounded_by_edges_per_depth(store):
    # A hub with 12 facts: only the newest 5 are read.
    _facts(store, *[("hub", "knows", f"node-{i}", f"m{i}") for i in range(12)])
    reached = traverse(store, ["hub"], depth=2, max_edges=5, max_frontier=8)
    assert set(reached.facts) == {f"m{i}" for i in range(7, 12)}
    assert reached.edges <= 5 + 5


def test_a_shorter_path_replaces_longer_ones_and_paths_are_capped(store):
    _facts(
        store,
        ("a", "r", "b", "m1"),
        ("b", "r", "c", "shared"),  # depth 2 from a
        ("a", "s", "c", "shared"),  # depth 1 from a: the explanation kept
    )
    reached = traverse(store, ["a"], depth=2, max_edges=30, max_frontier=8)
    assert [render_path(p) for p in reached.paths("shared")] == ["a -s-> c"]
    _facts(store, *[("x", f"r{i}", "y", "twice") for i in range(5)])
    assert len(traverse(store, ["x"], 1, 30, 8).paths("twice")) == MAX_PATHS


def test_hub_entities_are_not_followed(store):
    from smriti.stores.base import Cue, Engram

    # "caroline" encodes 6 of 10 memories: a hub (more than max(2, 10 %)).
    for i in range(10):
        store.create_engram(Engram(content=f"turn {i}", id=f"t{i}"))
    hub = store.upsert_cue(Cue(name="caroline", cue_type="person"))
    for i in range(6):
        store.link_cue(f"t{i}", hub.id)
    _facts(store, ("caroline", "visited", "sweden", "t1"), ("sweden", "has", "fika", "t2"))
    assert traverse(store, ["caroline"], 2, 30, 8, ceiling=hub_ceiling(store.count_engrams())).facts == {}
    # Without the rule it is followed; and a hub reached (not a seed) is not expanded either.
    assert set(traverse(store, ["caroline"], 2, 30, 8).facts) == {"t1", "t2"}
    assert set(traverse(store, ["fika"], 2, 30, 8, ceiling=hub_ceiling(store.count_engrams())).facts) == {
        "t2",
        "t1",
    }
    _facts(store, ("caroline", "owns", "dog", "t3"))
    ceiling = hub_ceiling(store.count_engrams())
    assert "t3" not in traverse(store, ["sweden"], 2, 30, 8, ceiling=ceiling).facts


def test_query_entities_put_hints_first_normalised_and_bounded():
    parsed = {"entity_hints": ["Database Engineer"], "cues": ["recommend", "database-engineer", "x"]}
    assert query_entities(parsed, 2) == ["database-engineer", "recommend"]
    assert query_entities({}, 5) == []


def test_render_path_of_nothing_is_empty():
    assert render_path([]) == ""
    assert render_path([Step("a", "r", "b", True), Step("c", "s", "b", False)]) == "a -r-> b <-s- c"


# ----------------------------------------------------------------------------- entity relations
def test_entity_relations_are_those_of_shared_entities_recorded_elsewhere_bounded():
    relations = [  # newest first, as related_entities returns them
        Relation("priya", "joined", "acme", "other-1", T0),
        Relation("priya", "benchmarked", "postgres", "self", T0),  # the result's own: listed as own
        Relation("unrelated", "uses", "thing", "other-2", T0),
        *[Relation("postgres", "has", f"feature-{i}", f"f{i}", T0 - timedelta(days=i)) for i in range(10)],
    ]
    found = entity_relations(["priya", "postgres"], ["self"], by_entity(relations), limit=5)
    assert len(found) == 5
    assert found[0] == {
        "from": "priya",
        "relation": "joined",
        "to": "acme",
        "kind": "entity",
        "entity": "priya",
        "memory": "other-1",
    }
    assert all(r["memory"] != "self" and r["entity"] in {"priya", "postgres"} for r in found)
    assert [r["to"] for r in found[1:]] == [f"feature-{i}" for i in range(4)]  # newest first
    assert entity_relations([], ["self"], by_entity(relations), 5) == []


# ----------------------------------------------------------------------------- parsed query
def test_parsed_query_is_cleaned_with_hints_and_intent():
    assert (
        cleaned_query("What pagination approach did database-engineer recommend?")
        == "pagination approach database-engineer recommend"
    )
    parsed = parsed_result(
        "Where is Berlin?", {"cues": ["Berlin"], "entity_hints": ["Berlin"], "intent": "fact"}
    )
    assert parsed == {"query": "Berlin", "entity_hints": ["Berlin"], "intent": "fact"}
    # A parser that cleans the query itself is taken at its word.
    assert parsed_result("x y", {"query": "y", "intent": "general"})["query"] == "y"


# ----------------------------------------------------------------------------- text similarity
def test_text_similarity_is_over_words_case_and_punctuation_free():
    assert text_similarity("Alice moved to Berlin in May.", "alice moved to berlin in may") == 1.0
    assert text_similarity("", "") == 1.0
    assert text_similarity("alpha", "") == 0.0
    # One word of five differs: 0.8, below the specification's 85 %.
    assert text_similarity("Omar prefers tabs for indentation", "Omar prefers spaces for indentation") == 0.8
    # Same words, other order: a different fact.
    assert text_similarity("Omar prefers tabs over spaces", "Omar prefers spaces over tabs") < 0.85


def test_the_matrix_agrees_with_the_pairs_above_the_floor_and_zeroes_the_rest():
    texts = ["one two three four five six", "seven eight nine ten", "one two three four five six seven"]
    matrix = similarity_matrix(texts, 0.85)
    assert matrix[0, 2] == matrix[2, 0] == text_similarity(texts[0], texts[2]) > 0.85
    assert matrix[0, 1] == 0.0 and list(matrix.diagonal()) == [1.0, 1.0, 1.0]
    assert (similarity_matrix(texts, 1.5) == np.eye(3)).all()  # a threshold past 1: nothing similar


def test_texts_that_differ_in_a_number_are_not_duplicates():
    def candidate(id_, relevance, text):
        return Candidate(id=id_, relevance=relevance, text=text, embedding=[1.0, 0.0])

    template = "The {} Asian Junior Athletics Championships were the ninth edition of the event in Bangkok."
    results = [candidate("a", 0.9, template.format(2002)), candidate("b", 0.8, template.format(2001))]
    assert text_similarity(results[0].text, results[1].text) > 0.85
    assert [k.id for k in dedupe_results(results, 0.85, candidate_similarity(0.85))] == ["a", "b"]
    # The same numbers, a word changed: still duplicates.
    same = [results[0], candidate("c", 0.7, template.format(2002).replace("ninth", "tenth"))]
    (kept,) = dedupe_results(same, 0.85, candidate_similarity(0.85))
    assert kept.id == "a" and kept.merged_ids == ["c"]


def test_dedupe_by_text_merges_rewordings_not_embedding_twins():
    def candidate(id_, relevance, text):
        # Identical embeddings: the old cosine rule would merge all three.
        return Candidate(id=id_, relevance=relevance, text=text, embedding=[1.0, 0.0], origins=["vector"])

    results = [
        candidate("a", 0.9, "The backup runs at two in the morning."),
        candidate("b", 0.7, "the backup runs at two in the morning"),
        candidate("c", 0.8, "Omar prefers tabs over spaces"),
    ]
    kept = dedupe_results(results, 0.85, candidate_similarity(0.85))
    assert [k.id for k in kept] == ["a", "c"]
    assert kept[0].cross_validated and kept[0].merged_ids == ["b"]
    assert len(dedupe_results(results, 0.85)) == 1  # the embedding rule, for contrast
