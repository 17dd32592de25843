"""Consolidation: the decay/prune/strengthen formulas, and the whole graph on a real Kuzu store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langgraph.checkpoint.memory import MemorySaver

from smriti.nodes.decay import WATERMARK_KEY, decayed, should_prune, strengthened
from smriti.pipelines.consolidate import STEPS, build_consolidate_graph, consolidate_graph
from smriti.stores.base import Association, Cue, Engram

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
EMBEDDER = DeterministicFakeEmbedding(size=64)


def days_ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


# ----------------------------------------------------------------------------- pure functions
def test_decay_halves_over_one_half_life() -> None:
    assert decayed(1.0, days_ago(30), NOW, half_life_days=30) == pytest.approx(0.5)
    assert decayed(0.8, days_ago(60), NOW, half_life_days=30) == pytest.approx(0.2)
    assert decayed(0.8, NOW, NOW, half_life_days=30) == pytest.approx(0.8)


def test_decay_in_steps_equals_decay_in_one_go_and_is_idempotent() -> None:
    accessed = days_ago(90)
    one_go = decayed(1.0, accessed, NOW, 30)
    first = decayed(1.0, accessed, days_ago(50), 30)  # consolidation 40 days after access
    second = decayed(first, accessed, days_ago(20), 30, since=days_ago(50))
    third = decayed(second, accessed, NOW, 30, since=days_ago(20))
    assert third == pytest.approx(one_go) == pytest.approx(0.125)
    assert decayed(third, accessed, NOW, 30, since=NOW) == third  # same `now` again: unchanged


def test_decay_counts_from_the_access_when_it_is_after_the_watermark() -> None:
    # Accessed 10 days ago, last consolidated 40 days ago: only 10 days of decay are due.
    assert decayed(1.0, days_ago(10), NOW, 10, since=days_ago(40)) == pytest.approx(0.5)


def test_decay_never_runs_backwards_and_treats_naive_times_as_utc() -> None:
    assert decayed(0.7, days_ago(10), days_ago(20), 30) == 0.7  # now before the access
    assert decayed(0.7, days_ago(40), days_ago(20), 30, since=days_ago(10)) == 0.7  # now before since
    naive = days_ago(30).replace(tzinfo=None)
    assert decayed(1.0, naive, NOW, 30) == pytest.approx(0.5)


def test_should_prune_spares_important_memories() -> None:
    assert should_prune(0.01, 0.5, prune_threshold=0.05, important_threshold=0.8)
    assert not should_prune(0.01, 0.8, prune_threshold=0.05, important_threshold=0.8)
    assert not should_prune(0.05, 0.1, prune_threshold=0.05, important_threshold=0.8)


def test_strengthen_boosts_frequently_used_memories_once_per_period() -> None:
    assert strengthened(0.5, 5, days_ago(1), min_access=5, boost=0.1) == pytest.approx(0.6)
    assert strengthened(0.95, 9, days_ago(1), min_access=5, boost=0.1) == 1.0  # capped
    assert strengthened(0.5, 4, days_ago(1), min_access=5, boost=0.1) == 0.5  # not frequent
    # Used before the previous consolidation: already boosted then.
    assert strengthened(0.5, 9, days_ago(3), min_access=5, boost=0.1, since=days_ago(2)) == 0.5
    assert strengthened(0.5, 9, days_ago(1), min_access=5, boost=0.1, since=days_ago(2)) == pytest.approx(0.6)


# ----------------------------------------------------------------------------- on Kuzu
@pytest.fixture
def context(settings):
    from smriti.pipelines.context import MemoryContext
    from smriti.stores import make_store

    store = make_store(settings)
    yield MemoryContext(store=store, embedder=EMBEDDER, settings=settings, clock=lambda: NOW)
    store.close()


def remember(store, engram_id: str, accessed_days_ago: float, **fields) -> None:
    text = f"memory {engram_id}"
    accessed = days_ago(accessed_days_ago)
    store.create_engram(
        Engram(content=text, id=engram_id, embedding=EMBEDDER.embed_query(text), created_at=accessed,
               last_accessed_at=accessed, **fields)
    )  # fmt: skip


def run(context, now: datetime | None = None) -> dict:
    payload = {} if now is None else {"now": now.isoformat()}
    return consolidate_graph.invoke(payload, context=context)


def factors(store) -> dict[str, float]:
    return {e.id: e.decay_factor for e in store.engram_states()}


def test_decay_and_prune_back_dated_memories_but_keep_important_ones(context) -> None:
    store = context.store  # half-life 30 days, prune below 0.05, important from 0.8
    remember(store, "fresh", 0)
    remember(store, "month", 30)
    remember(store, "ancient", 200)  # 0.5 ** (200/30) ~ 0.0098
    remember(store, "ancient-important", 200, importance=0.9)
    output = run(context)
    report = output["report"]
    assert report["pruned"] == 1 and report["decayed"] == 3
    left = factors(store)
    assert set(left) == {"fresh", "month", "ancient-important"}
    assert left["fresh"] == pytest.approx(1.0)
    assert left["month"] == pytest.approx(0.5)
    assert left["ancient-important"] == pytest.approx(0.5 ** (200 / 30))
    assert store.get_meta(WATERMARK_KEY) == NOW.isoformat()
    prune_entry = next(e for e in output["trace"] if e["node"] == "prune")
    assert [c["id"] for c in prune_entry["candidates"]] == ["ancient"]


def test_consolidating_twice_at_the_same_time_changes_nothing(context) -> None:
    store = context.store
    remember(store, "month", 30)
    remember(store, "busy", 10, access_count=9, decay_factor=0.6)
    first = run(context)["report"]
    after_first = factors(store)
    second = run(context)["report"]
    assert first["decayed"] == 2 and first["strengthened"] == 1
    assert second["decayed"] == 0 and second["strengthened"] == 0 and second["pruned"] == 0
    assert factors(store) == pytest.approx(after_first)


def test_decay_over_successive_runs_matches_the_closed_form(context) -> None:
    store = context.store
    remember(store, "m", 90)
    for later in (days_ago(60), days_ago(25), NOW):
        run(context, now=later)
    assert factors(store)["m"] == pytest.approx(0.5**3)
    run(context, now=days_ago(5))  # a simulation going back in time decays nothing
    assert factors(store)["m"] == pytest.approx(0.5**3)
    assert store.get_meta(WATERMARK_KEY) == NOW.isoformat()


def test_strengthen_frequently_accessed_memories(context) -> None:
    store = context.store
    remember(store, "busy", 0, access_count=5, decay_factor=0.5)
    remember(store, "quiet", 0, access_count=4, decay_factor=0.5)
    remember(store, "full", 0, access_count=50, decay_factor=0.95)
    output = run(context)
    assert output["report"]["strengthened"] == 2
    left = factors(store)
    assert left["busy"] == pytest.approx(0.6)
    assert left["quiet"] == pytest.approx(0.5)
    assert left["full"] == pytest.approx(1.0)
    # Used again after this consolidation: boosted again at the next one.
    later = NOW + timedelta(days=1)
    store.update_engram("busy", access_count=6, last_accessed_at=later)
    assert run(context, now=later + timedelta(hours=1))["report"]["strengthened"] == 1


def test_orphan_cues_are_removed(context) -> None:
    store = context.store
    remember(store, "kept", 0)
    remember(store, "gone", 300)  # pruned: its only cue goes with it (forget takes its cues)
    shared = store.upsert_cue(Cue(name="postgres", cue_type="technology"))
    lonely = store.upsert_cue(Cue(name="cobol", cue_type="technology"))
    store.upsert_cue(Cue(name="left-behind"))  # an orphan an older version left: the orphans step's
    store.link_cue("kept", shared.id)
    store.link_cue("gone", shared.id)
    store.link_cue("gone", lonely.id)
    report = run(context)["report"]
    assert report["pruned"] == 1 and report["orphan_cues_removed"] == 1
    assert [c.name for c in store.cues_of(["kept"])["kept"]] == ["postgres"]
    assert store.stats().cues == 1


def test_trace_lists_every_step_in_order_and_the_report_has_each_steps_keys(context) -> None:
    store = context.store
    for i in range(4):
        remember(store, f"m{i}", 1)
    for a, b in (("m0", "m1"), ("m1", "m2"), ("m2", "m0")):
        store.associate(Association(a, b, 0.8))
    output = run(context)
    assert [entry["node"] for entry in output["trace"]] == STEPS
    assert all(entry["ms"] >= 0 and isinstance(entry["notes"], str) for entry in output["trace"])
    report = output["report"]
    for key in (
        "repaired",
        "decayed",
        "pruned",
        "strengthened",
        "orphan_cues_removed",
        "clusters",
        "leiden",
        "indexes",
    ):
        assert key in report, key
    assert report["clusters"] == 1
    assert isinstance(report["indexes"], dict)


def test_index_step_reports_the_store_index_state(context, settings) -> None:
    store = context.store
    for i in range(3):
        remember(store, f"m{i}", 1)
    context.settings = settings.model_copy(update={"index_threshold": 100})
    below = run(context)["report"]["indexes"]
    assert below and not any(below.values())
    context.settings = settings.model_copy(update={"index_threshold": 0})
    above = run(context)["report"]["indexes"]
    assert set(above) == set(below) and any(above.values())


def test_step_by_step_run_stops_before_recluster_and_resumes(context) -> None:
    store = context.store
    for i in range(3):
        remember(store, f"m{i}", 30)
    for a, b in (("m0", "m1"), ("m1", "m2")):
        store.associate(Association(a, b, 0.9))
    graph = build_consolidate_graph(checkpointer=MemorySaver(), interrupt_before=["recluster"])
    config = {"configurable": {"thread_id": "consolidate-1"}}
    graph.invoke({"now": NOW.isoformat()}, config=config, context=context)
    paused = graph.get_state(config)
    assert paused.next == ("recluster",)
    assert [e["node"] for e in paused.values["trace"]] == STEPS[: STEPS.index("recluster")]
    assert "clusters" not in paused.values["report"] and paused.values["report"]["decayed"] == 3
    assert {e.cluster_id for e in store.engram_states()} == {-1}  # recluster has not run

    output = graph.invoke(None, config=config, context=context)
    assert graph.get_state(config).next == ()
    assert [e["node"] for e in output["trace"]] == STEPS
    assert output["report"]["clusters"] == 1 and output["report"]["decayed"] == 3
    assert {e.cluster_id for e in store.engram_states()} == {0}


def test_interrupting_before_an_unknown_step_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown consolidate step"):
        build_consolidate_graph(interrupt_before=["cluster"])


def test_progress_callback_sees_every_step_and_the_report_is_the_same(context) -> None:
    from smriti.memory import Memory
    from smriti.pipelines.consolidate import STEPS

    memory = Memory(context)
    for text in ("alpha beta", "alpha gamma", "beta gamma", "delta"):
        memory.store(text)
    seen: list[str] = []
    streamed = memory.consolidate(now=NOW, on_step=seen.append)
    assert seen == STEPS
    assert [entry["node"] for entry in streamed.pop("trace")] == STEPS
    again = memory.consolidate(now=NOW)  # the same time again: nothing left to do, same keys
    again.pop("trace")
    assert set(again) == set(streamed)
