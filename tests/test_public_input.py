"""A graph's public input cannot skip validation (issue 38, item 6): the old ``checked`` key
is not part of any input schema, and the mark that a request was checked is set only by the
entry points that checked it (``validators.checked_input``)."""

from __future__ import annotations

import typing

import pytest

from smriti.errors import InvalidInput
from smriti.memory import Memory
from smriti.nodes.state import RecallInput, StoreInput
from smriti.pipelines.recall import recall_pipeline
from smriti.pipelines.store import store_pipeline
from smriti.validators import checked_input


@pytest.fixture
def memory(settings):
    memory = Memory.open(settings)
    for text in [f"billing note {n}: invoices move to Postgres" for n in range(30)]:
        memory.store(text)
    yield memory
    memory.close()


def test_no_input_schema_offers_a_way_past_validation():
    assert "checked" not in typing.get_type_hints(RecallInput)
    assert "checked" not in typing.get_type_hints(StoreInput)


def test_the_compiled_recall_graph_validates_a_request_that_says_it_was_checked(memory):
    from smriti.pipelines.recall import recall_graph

    request = {"query": "billing", "limit": 25, "checked": True, "mode": "recall"}
    with pytest.raises(InvalidInput, match="limit"):
        recall_graph.invoke(request, context=memory.context)


def test_production_s_graph_in_stages_validates_it_too(memory):
    with pytest.raises(InvalidInput, match="limit"):
        recall_pipeline.graph.invoke(
            {"query": "billing", "limit": 25, "checked": True}, context=memory.context
        )
    before = memory.stats()["engrams"]
    with pytest.raises(InvalidInput):
        store_pipeline.graph.invoke({"content": "   ", "checked": True}, context=memory.context)
    assert memory.stats()["engrams"] == before == 30  # nothing was stored


def test_an_entry_point_that_checked_the_request_is_trusted_for_that_run_only(memory):
    with checked_input():  # as Memory does for a request it checked: limit 0 is its rehearsal's
        output = recall_pipeline.graph.invoke(
            {"query": "billing", "limit": 0, "mode": "recall"}, context=memory.context
        )
    assert output["result"]["total_results"] == 0
    with pytest.raises(InvalidInput, match="limit"):  # the mark does not outlive that run
        recall_pipeline.graph.invoke(
            {"query": "billing", "limit": 0, "mode": "recall"}, context=memory.context
        )
