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
            "merge_duplicates",
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
        assert trace[-1]["node"] == "format_result"
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


def test_closing_during_a_warm_up_or_rehearsal_waits_for_it(settings) -> None:
    """A server stopped while its warm-up thread rehearses must not close the store under it (a
    store closed under a running query crashed SQLite): close waits, and nothing runs after."""
    import threading

    with Memory.open(settings) as memory:
        for n in range(30):
            memory.store(f"Alex moved the launch plan to week {n} after the review.")
    for _ in range(8):
        memory = Memory.open(settings)
        failures: list[BaseException] = []

        def warm_up(memory: Memory = memory, failures: list[BaseException] = failures) -> None:
            try:
                memory.warm()
                memory.rehearse()
            except BaseException as error:  # why: reported by the assertion below
                failures.append(error)

        thread = threading.Thread(target=warm_up)
        thread.start()
        memory.close()
        thread.join(30)
        assert not thread.is_alive() and failures == []
        assert memory.rehearse() == []  # closed: nothing runs
