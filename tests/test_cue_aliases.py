"""The graph's recognition of a query (issue 25): cue aliases found through cue-name embeddings,
hub names left out of the query's embedding, the turn after a relevant one favoured over the turn
before, and keyword hits that score nothing left out of fusion. Real SQLite stores; the embedder
is a fake with chosen geometry (synonyms share an axis)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from smriti.nodes.associate import context_relevance
from smriti.nodes.search import without_names
from smriti.pipelines.consolidate import consolidate_graph
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph
from smriti.stores.aliases import AliasIndex
from smriti.stores.base import Association

# Words of one group share an axis: "destress" and "relax" mean the same to this embedder.
GROUPS = [["relax", "destress", "unwind"], ["pottery", "ceramics"], ["alice"], ["hike", "trail"], ["budget"]]


class SynonymEmbeddings:
    """Each group of words owns an axis; a text is the normalised count of its words' axes."""

    def __init__(self, dims: int = 64) -> None:
        self.axis = {word: i for i, group in enumerate(GROUPS) for word in group}
        self.dims = dims
        self.calls: list[list[str]] = []

    def _embed(self, text: str) -> list[float]:
        vector = np.zeros(self.dims)
        for word in re.findall(r"[a-z]+", text.lower()):
            if word in self.axis:
                vector[self.axis[word]] += 1.0
        norm = np.linalg.norm(vector)
        return list(vector / norm) if norm else list(vector)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def _store(context, content, **extra):
    return store_graph.invoke({"content": content, **extra}, context=context)["id"]


def _recall(context, query, **extra):
    out = recall_graph.invoke({"query": query, "explain": True, **extra}, context=context)
    return out["result"], {t["node"]: t for t in out["trace"]}


def _consolidate(context):
    return consolidate_graph.invoke({}, context=context)["report"]


@pytest.fixture
def synonyms():
    return SynonymEmbeddings()


ALIASES_ON = {"cue_alias_similarity": 0.6}  # off by default (below the 2-point rule held out)


def test_consolidation_embeds_cue_names_and_recall_follows_an_alias(make_context, synonyms):
    context = make_context(embedder=synonyms, **ALIASES_ON)
    yoga = _store(context, "Sunday yoga helps me relax")
    _store(context, "The budget review is on Monday")
    # Before consolidation no cue has an embedding: the query's cue matches nothing.
    result, steps = _recall(context, "how do I destress")
    assert steps["recognise"]["notes"].endswith("aliases={}")
    assert "cue" not in (_hit(result, yoga) or {}).get("metadata", {}).get("retrieved_by", [])

    report = _consolidate(context)
    assert report["cue_embeddings"]["embedded"] > 0
    assert context.store.cues_without_embedding(10) == []
    result, steps = _recall(context, "how do I destress")
    assert "'relax': 'destress'" in steps["recognise"]["notes"]
    assert yoga in [c["id"] for c in steps["cue_traverse"]["candidates"]]
    assert "cue" in _hit(result, yoga)["metadata"]["retrieved_by"]
    # Off by setting: no alias is looked up.
    context.settings = context.settings.model_copy(update={"cue_alias_similarity": 0.0})
    _, steps = _recall(context, "how do I destress")
    assert yoga not in [c["id"] for c in steps["cue_traverse"]["candidates"]]


def _hit(result, engram_id):
    return next((r for r in result["results"] if r["id"] == engram_id), None)


def test_with_aliases_off_by_default_consolidation_embeds_no_cue_name(make_context, synonyms):
    context = make_context(embedder=synonyms)
    _store(context, "Sunday yoga helps me relax")
    assert _consolidate(context)["cue_embeddings"] == {"embedded": 0, "more": False}
    assert context.store.cues_without_embedding(10)
    _, steps = _recall(context, "how do I destress")
    assert steps["recognise"]["notes"].endswith("aliases={}")


def test_embed_cues_keeps_to_its_budget_and_reports_a_failing_embedder(make_context, synonyms):
    context = make_context(embedder=synonyms, cue_embed_batch=2, **ALIASES_ON)
    _store(context, "pottery class on Tuesday, a hike on the trail on Sunday")
    before = len(context.store.cues_without_embedding(100))
    assert before > 2
    report = _consolidate(context)["cue_embeddings"]
    assert report == {"embedded": 2, "more": True}
    assert len(context.store.cues_without_embedding(100)) == before - 2

    class Broken(SynonymEmbeddings):
        def embed_documents(self, texts):
            if len(texts) > 1 or (texts and " " not in texts[0] and texts[0] in self.axis):
                raise ConnectionError("endpoint down")
            return super().embed_documents(texts)

    context.embedder = Broken()
    report = _consolidate(context)["cue_embeddings"]
    assert report["embedded"] == 0 and "ConnectionError: endpoint down" in report["error"]
    assert len(context.store.cues_without_embedding(100)) == before - 2  # nothing half-written


def test_alias_index_reloads_when_old_or_invalidated_and_embeds_only_unknown_cues(make_context, synonyms):
    context = make_context(embedder=synonyms, **ALIASES_ON)
    _store(context, "Sunday yoga helps me relax")
    _consolidate(context)
    now = [0.0]
    index = AliasIndex(context.store, refresh_seconds=60, clock=lambda: now[0])
    synonyms.calls.clear()
    found = index.aliases(["relax", "destress"], synonyms.embed_documents, 0.6, 3)
    assert found["destress"] == [("relax", pytest.approx(1.0))]
    assert found["relax"] == []  # never its own alias
    assert synonyms.calls == [["destress"]]  # the stored cue's own vector is reused

    _store(context, "Evenings I unwind with ceramics")
    _consolidate(context)
    assert [n for n, _ in index.aliases(["destress"], synonyms.embed_documents, 0.6, 3)["destress"]] == [
        "relax"
    ]
    now[0] = 61.0  # older than refresh_seconds: this lookup answers from the copy, and reloads
    assert [n for n, _ in index.aliases(["destress"], synonyms.embed_documents, 0.6, 3)["destress"]] == [
        "relax"
    ]
    index.wait()
    names = [n for n, _ in index.aliases(["destress"], synonyms.embed_documents, 0.6, 3)["destress"]]
    assert names == ["relax", "unwind"]
    _store(context, "A walk on the trail helps me relax")
    _consolidate(context)
    index.invalidate()  # what this process's consolidation does: the next lookup reloads first
    assert "walk" in index._current().position
    assert index.aliases(["destress"], synonyms.embed_documents, 0.6, 1)["destress"][0][0] == "relax"
    assert index.aliases(["pottery"], synonyms.embed_documents, 0.6, 3)["pottery"] == [
        ("ceramics", pytest.approx(1.0))
    ]


def test_past_exact_cues_an_hnsw_graph_answers_as_the_exact_product_does(make_context):
    context = make_context(**ALIASES_ON)  # hashing: cue names sharing a word are close
    for word in WORDS:
        _store(context, f"the {word} review meeting and the {word} plan for the {word} team")
    _consolidate(context)
    cues = ["review", "budget", "meeting", "launch plan", "unknown words"]
    exact = AliasIndex(context.store, refresh_seconds=60)
    graph = AliasIndex(context.store, refresh_seconds=60, exact_cues=5)
    embed = context.embedder.embed_documents
    want = exact.aliases(cues, embed, 0.3, 3)
    assert any(want.values())
    graph.aliases(cues, embed, 0.3, 3)  # answered exactly while the graph is built
    graph.wait()
    space = graph._current()
    assert space.graph is not None and space.matrix is None
    got = graph.aliases(cues, embed, 0.3, 3)
    assert {c: [n for n, _ in v] for c, v in got.items()} == {c: [n for n, _ in v] for c, v in want.items()}
    for cue in cues:
        assert [s for _, s in got[cue]] == pytest.approx([s for _, s in want[cue]], abs=1e-3)


def test_hub_names_are_left_out_of_the_query_embedding(make_context):
    context = make_context()  # the hashing embedder: every memory is its own vector
    notes = [_store(context, f"Alice: note number {i} about the {word}") for i, word in enumerate(WORDS)]
    _store(context, "Alice: I relax with pottery")
    _, steps = _recall(context, "What does Alice do to relax?")
    assert "hubs=['alice']" in steps["recognise"]["notes"]
    context.settings = context.settings.model_copy(update={"query_hub_names": False})
    _, off = _recall(context, "What does Alice do to relax?")
    assert "hubs=['alice']" in off["recognise"]["notes"]
    # The vector branch saw another query: notes sharing only the name lose their similarity.
    with_name = {c["id"]: c["score"] for c in off["vector_search"]["candidates"]}
    without = {c["id"]: c["score"] for c in steps["vector_search"]["candidates"]}
    assert max(without.get(n, 0.0) for n in notes) < max(with_name.get(n, 0.0) for n in notes)


WORDS = [
    "budget",
    "roadmap",
    "hiring",
    "offsite",
    "launch",
    "pricing",
    "churn",
    "security",
    "audit",
    "design",
]


def test_without_names_keeps_a_query_that_would_be_left_too_short():
    assert without_names("What does Alice's dog like?", ["Alice"]) == "What does dog like?"
    assert without_names("what did ALICE say", ["Alice"]) == "what did say"
    assert without_names("Alice?", ["Alice"]) == "Alice?"
    assert without_names("Alicette likes tea", ["Alice"]) == "Alicette likes tea"


def test_context_favours_the_turn_after_a_seed():
    edges = [
        Association("t2", "t1", 0.5, "same_source"),  # the later turn points at the earlier one
        Association("t3", "t2", 0.5, "same_source"),
        Association("t3", "t1", 0.5, "similar"),  # not conversation context
    ]
    passed = context_relevance({"t2": 1.0}, edges, weight=1.0, backward=0.5)
    assert passed == {"t3": (0.5, "t2"), "t1": (0.25, "t2")}
    assert context_relevance({"t2": 1.0}, edges, weight=1.0)["t1"] == (0.5, "t2")


def test_keyword_hits_on_words_every_memory_holds_are_not_hits(make_context):
    context = make_context()
    for word in WORDS:
        _store(context, f"Alice: a note about the {word}")
    pottery = _store(context, "Alice: pottery on Tuesday")
    _, steps = _recall(context, "alice pottery")
    assert [c["id"] for c in steps["fulltext_search"]["candidates"]] == [pottery]
