"""The bridge: a memory that names an entity leads to the memories about that entity (HotpotQA's
bridge questions: the film's passage names its director, the director's passage says where he
was born). Real SQLite stores through the recall graph; the embedding geometry is exact."""

from __future__ import annotations

from smriti.nodes.relations import bridge_links, bridged_relevance, rarest_within
from smriti.nodes.state import Candidate
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph

FILM = "Doctor Strange is a 2016 superhero film directed by Scott Derrickson"
DIRECTOR = "Scott Derrickson: he was raised in Denver, Colorado"
# Each shares more words with the question than the director's memory does.
OTHERS = [
    "Mary Jane Watson was born in Queens, where the film director shot his first superhero film",
    "Peter Parker was born in Forest Hills and the superhero film director was born there too",
    "Brad Anderson is a film director born in Madison, Connecticut",
]
QUESTION = "Where was the director of the superhero film Doctor Strange born?"
VOCABULARY = ["doctor", "strange", "superhero", "film", "director", "born", "directed", "raised", "denver"]


def _candidate(id_: str, text: str, entities: dict[str, str], relevance: float) -> Candidate:
    return Candidate(id=id_, text=text, entities=sorted(entities), entity_types=entities, relevance=relevance)


def test_links_follow_named_entities_not_the_seed_s_own_subject_keywords_or_hubs():
    film = _candidate(
        "a", FILM, {"doctor-strange": "concept", "scott-derrickson": "person", "film": "keyword"}, 1.0
    )
    subject_of = {"a": "doctor-strange"}.get
    counts = {"doctor-strange": 3, "scott-derrickson": 2, "film": 2}
    assert bridge_links([film], lambda c: subject_of(c.id, ""), counts, 20) == {"scott-derrickson": ["a"]}
    # An entity linked to more memories than the limit (a speaker's name) or unknown is not followed.
    assert bridge_links([film], lambda c: subject_of(c.id, ""), {**counts, "scott-derrickson": 21}, 20) == {}
    assert bridge_links([film], lambda c: subject_of(c.id, ""), {"doctor-strange": 3}, 20) == {}


def test_the_rarest_entities_are_followed_within_the_budget():
    counts = {"denver": 9, "scott-derrickson": 2, "marvel": 5, "colorado": 5}
    assert rarest_within(counts, counts, 12) == ["scott-derrickson", "colorado", "marvel"]
    assert rarest_within(counts, counts, 11) == ["scott-derrickson", "colorado"]  # marvel would pass it
    assert rarest_within(counts, counts, 1) == []


def test_a_memory_gains_from_the_best_seed_naming_its_subject():
    seeds = {"b": 0.8, "a": 0.8, "c": 0.5}
    named = {"scott-derrickson": ["c", "b", "a"]}
    assert bridged_relevance(seeds, named, "scott-derrickson", 0.5) == (0.4, "a")  # a tie: the smaller id
    assert bridged_relevance(seeds, named, "denver", 0.5) == (0.0, "")
    assert bridged_relevance(seeds, named, "", 0.5) == (0.0, "")


def _recall(context, query):
    return recall_graph.invoke({"query": query, "limit": 5, "explain": True}, context=context)


# The fusion this geometry was drawn for: text-led, so that the memories sharing the question's
# words lead without the bridge. With the dense-led defaults those memories lead even further
# (their keyword vectors are the question's); the bridge's own effect is measured on HotpotQA.
TEXT_LED = {"fusion_weight_similarity": 0.3, "fusion_weight_text": 0.5, "fusion_weight_cue": 0.2}


def _ranked(context, embedder, film=FILM, **settings):
    built = context(embedder=embedder, **(TEXT_LED | settings))
    ids = {}
    for text in [film, DIRECTOR, *OTHERS]:
        ids[text] = store_graph.invoke({"content": text}, context=built)["id"]
    out = _recall(built, QUESTION)
    return [r["id"] for r in out["result"]["results"]], ids, out


def test_the_director_s_memory_is_reached_through_the_film_s(make_context, keyword_embedder):
    embedder = keyword_embedder(VOCABULARY)
    off, ids, _ = _ranked(make_context, embedder, user="bob", bridge_weight=0.0)
    assert ids[DIRECTOR] not in off[:2]  # without the bridge, memories sharing the question's words win
    on, ids, out = _ranked(make_context, embedder)
    assert on[:2] == [ids[FILM], ids[DIRECTOR]]
    step = next(e for e in out["trace"] if e["node"] == "bridge")
    assert ids[DIRECTOR] in [c["id"] for c in step["candidates"]]
    result = next(r for r in out["result"]["results"] if r["id"] == ids[DIRECTOR])
    assert result["metadata"]["via"] == ids[FILM]  # explained by the memory that named him
    assert "bridge" in result["metadata"]["retrieved_by"]
    bridges = [r for r in result["graph_relations"] if r.get("kind") == "bridge"]
    assert bridges == [{"from": ids[FILM], "relation": "names", "to": "scott-derrickson", "kind": "bridge"}]


# The film's memory names its director after fourteen other people: a store keeps the first
# MAX_CUES cues of a memory, so the director is in its text but not among its cues.
CAST = [
    "Benedict Cumberbatch",
    "Chiwetel Ejiofor",
    "Rachel McAdams",
    "Benedict Wong",
    "Michael Stuhlbarg",
    "Benjamin Bratt",
    "Scott Adkins",
    "Mads Mikkelsen",
    "Tilda Swinton",
    "Stan Lee",
    "Kevin Feige",
    "Stephen Broussard",
    "Jon Spaihts",
    "Robert Cargill",
]
LONG_FILM = (
    f"Doctor Strange is a 2016 superhero film starring {', '.join(CAST)}, directed by Scott Derrickson"
)


def test_a_name_past_the_stored_cues_is_followed_from_the_text(make_context, keyword_embedder):
    context = make_context(embedder=keyword_embedder(VOCABULARY), **TEXT_LED)
    ids = {
        text: store_graph.invoke({"content": text}, context=context)["id"] for text in [LONG_FILM, DIRECTOR]
    }
    film_cues = {cue.name for cue in context.store.cues_of([ids[LONG_FILM]])[ids[LONG_FILM]]}
    assert "scott-derrickson" not in film_cues and "doctor-strange" in film_cues
    out = _recall(context, QUESTION)
    result = next(r for r in out["result"]["results"] if r["id"] == ids[DIRECTOR])
    assert result["metadata"]["via"] == ids[LONG_FILM]
    assert "bridge" in result["metadata"]["retrieved_by"]
    context.settings = context.settings.model_copy(update={"bridge_weight": 0.0})
    assert ids[DIRECTOR] not in [r["id"] for r in _recall(context, QUESTION)["result"]["results"]]
