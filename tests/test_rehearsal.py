"""Memory.rehearse: the recall a server runs once at start so that its first real recall does
not pay the process's one-time costs. It must run every branch and change nothing."""

from __future__ import annotations

from smriti.memory import Memory


def test_rehearsal_runs_every_branch_and_changes_nothing(settings) -> None:
    with Memory.open(settings) as memory:
        for text in (
            "Alex said the plan for the launch moves to Friday.",
            "Sam prefers tea over coffee.",
            "Last week Alex and Sam met in Berlin to discuss the plan.",
        ):
            memory.store(text)
        before = list(memory.export_records())
        stats = memory.stats()

        trace = memory.rehearse()

        steps = {entry["node"]: entry for entry in trace}
        for branch in (
            "cue_traverse",
            "fulltext_search",
            "vector_search",
            "gather",
            "focus",
            "dedupe",
            "score",
        ):
            assert branch in steps, branch
        assert steps["gather"]["notes"].startswith("3 direct hits")  # the branches found the memories
        assert steps["reinforce"]["notes"] == "nothing reinforced"
        assert list(memory.export_records()) == before  # access counts, decay, timestamps: all kept
        assert memory.stats() == stats


def test_rehearsal_on_an_empty_memory_answers_nothing(settings) -> None:
    with Memory.open(settings) as memory:
        before = list(memory.export_records())
        trace = memory.rehearse()
        assert trace[-1]["node"] == "format"
        assert list(memory.export_records()) == before
        assert not any(record["kind"] == "engram" for record in before)


def test_a_rehearsal_after_a_real_recall_does_nothing(settings) -> None:
    with Memory.open(settings) as memory:
        memory.store("Sam prefers tea over coffee.")
        memory.recall("tea")
        assert memory.rehearse() == []


def test_no_rehearsal_when_a_recall_would_call_a_model_over_the_network(settings) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    with Memory.open(settings) as memory:
        memory.store("Sam prefers tea over coffee.")
        memory.context.llm = FakeListChatModel(responses=["{}"])  # stands for a paid endpoint
        assert memory.rehearse() == []
        memory.context.llm = None
        assert memory.rehearse()  # offline analysis and a local embedder: it runs
