"""Nothing unregistered goes through LangGraph's checkpoint serializer (issue 26).

Recall's state holds typed Candidate records. LangGraph deserializes a checkpointed type only
when it is registered (``allowed_msgpack_modules``): an unregistered one is a deprecation
warning today and is refused under ``LANGGRAPH_STRICT_MSGPACK=true``. The serializer's own
events (``register_serde_event_listener``) say what it let through or blocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener

from smriti.integrations.langgraph_store import SmritiStore
from smriti.memory import Memory
from smriti.nodes.state import Candidate
from smriti.pipelines.checkpoint import SERDE_TYPES, checkpointer
from smriti.pipelines.recall import build_recall_graph

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def serde_events():
    events: list[dict] = []
    unregister = register_serde_event_listener(lambda event: events.append(dict(event)))
    yield events
    unregister()


def test_serde_types_cover_every_class_the_pipeline_states_hold():
    from langgraph._internal._serde import collect_allowlist_from_schemas

    from smriti.nodes import state

    schemas = [state.StoreState, state.RecallState, state.ConsolidateState, state.RecallOutput]
    assert collect_allowlist_from_schemas(schemas=schemas) == set(SERDE_TYPES)


def test_stepping_through_recall_loads_candidates_as_registered_types(make_context, serde_events):
    memory = Memory(make_context())
    memory.store("Alice deploys the billing service on Fridays")
    graph = build_recall_graph(checkpointer=checkpointer(), interrupt_before=["score"])
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"query": "billing service"}, config, context=memory.context)
    candidates = graph.get_state(config).values["candidates"]
    assert candidates and all(isinstance(c, Candidate) for c in candidates)
    assert graph.invoke(None, config, context=memory.context)["result"]["total_results"] == 1
    assert [e for e in serde_events if e["kind"].startswith("msgpack")] == []


def test_store_searches_checkpoint_nothing(make_context, serde_events):
    # The store used to step its private recall graph through an InMemorySaver (Candidates in
    # every checkpoint); now it runs recall without a checkpointer and reinforces the page itself.
    memory = Memory(make_context())
    for ranking in ("similarity", "recall"):
        store = SmritiStore(memory, ranking=ranking)
        store.put((ranking,), "k", {"text": "Alice deploys the billing service on Fridays"})
        assert store.search((ranking,), query="billing service")[0].key == "k"
    assert serde_events == []
    # reinforced without the recall graph's own (checkpointed) reinforce step
    assert [e.access_count for e in memory.context.store.list_recent(5)] == [1, 1]


STRICT_SCRIPT = textwrap.dedent(
    """
    from langgraph.checkpoint.serde import _msgpack
    from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
    from smriti.config import Settings
    from smriti.integrations.langgraph_store import SmritiStore
    from smriti.memory import Memory
    from smriti.nodes.state import Candidate
    from smriti.pipelines.checkpoint import checkpointer, serializer
    from smriti.pipelines.recall import build_recall_graph

    assert _msgpack.STRICT_MSGPACK_ENABLED
    events = []
    register_serde_event_listener(events.append)
    settings = Settings(storage_location={storage!r}, accessing_user="alice", llm_provider="heuristic",
                        embedding_provider="hashing", embedding_dims=64)
    with Memory.open(settings) as memory:
        memory.store("Alice deploys the billing service on Fridays")
        graph = build_recall_graph(checkpointer=checkpointer(), interrupt_before=["score"])
        config = {{"configurable": {{"thread_id": "t"}}}}
        graph.invoke({{"query": "billing service"}}, config, context=memory.context)
        candidates = graph.get_state(config).values["candidates"]
        assert candidates and all(isinstance(c, Candidate) for c in candidates), candidates
        assert graph.invoke(None, config, context=memory.context)["result"]["total_results"] == 1
        store = SmritiStore(memory, ranking="recall")
        store.put(("docs",), "k", {{"text": "Fridays are for deploying billing"}})
        assert store.search(("docs",), query="billing Fridays")[0].key == "k"
    # the serializer itself: a Candidate round-trips, an unknown class is refused
    serde = serializer()
    assert isinstance(serde.loads_typed(serde.dumps_typed(Candidate(id="x"))), Candidate)
    assert [e for e in events if e["kind"].startswith("msgpack")] == [], events
    print("strict ok")
    """
)


def test_under_strict_msgpack_checkpoints_and_store_work(tmp_path):
    # The flag is read when LangGraph is imported: a fresh interpreter.
    script = STRICT_SCRIPT.format(storage=str(tmp_path / "smriti"))
    env = {k: v for k, v in os.environ.items() if k not in ("STORAGE_LOCATION", "DB_TYPE")}
    env["LANGGRAPH_STRICT_MSGPACK"] = "true"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "strict ok" in done.stdout
    assert "Blocked deserialization" not in done.stderr and "unregistered" not in done.stderr
