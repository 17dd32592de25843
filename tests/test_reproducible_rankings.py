"""Two stores of the same content, stored in the same order, rank every question alike (issue 36,
item 6). Recall breaks score ties by creation time, then content (``Candidate.tie``), not by the
random ids alone: that was a coin toss per store, which reinforcement then amplified."""

from __future__ import annotations

from smriti.pipelines.recall import recall_pipeline
from smriti.pipelines.stages import run as invoke
from smriti.pipelines.store import store_pipeline

# Near-duplicates and shared words make ties: the same words in another order score alike.
NOTES = [
    "Dana leads the payments team",
    "The payments team ships on Fridays",
    "Fridays the payments team ships",
    "Omar manages the search team",
    "The search team uses PostgreSQL",
    "PostgreSQL the search team uses",
    "Dana moved to Berlin in May",
    "In May Dana moved to Berlin",
    "The payments team reviews code on Mondays",
    "Code reviews on Mondays for the payments team",
]
QUESTIONS = ["who leads payments", "when does the team ship", "what does search use", "where did Dana move"]


def _rankings(make_context, user: str) -> list[list[str]]:
    context = make_context(user=user)
    for note in NOTES:
        invoke(store_pipeline.graph, {"content": note}, context)
    answers = []
    for _ in range(3):  # reinforcement between the rounds must not make the stores drift apart
        for question in QUESTIONS:
            result = invoke(recall_pipeline.graph, {"query": question, "limit": 10}, context)["result"]
            answers.append([r["text"] for r in result["results"]])
    return answers


def test_two_stores_of_the_same_content_rank_alike(make_context):
    first, second = _rankings(make_context, "first"), _rankings(make_context, "second")
    assert all(first), first  # every question found something
    assert first == second
