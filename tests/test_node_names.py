"""A node's name is its function's name, in the pipeline, in its trace and in the code, and no
two nodes share one (issue 38, item 6): a trace entry or an ``interrupt_before`` names exactly
one step, and grepping a trace's name finds its code."""

from __future__ import annotations

import inspect
from collections import Counter

from smriti.pipelines.consolidate import consolidate_steps
from smriti.pipelines.recall import build_recall_pipeline
from smriti.pipelines.store import store_steps

# The pipelines step by step (production runs them in stages: each stage's steps in order).
PIPELINES = [store_steps, build_recall_pipeline(), consolidate_steps]


def test_every_node_is_named_after_its_function():
    differ = {
        (pipeline.name, name, inspect.unwrap(node).__name__)
        for pipeline in PIPELINES
        for name, node in pipeline.nodes.items()
        if inspect.unwrap(node).__name__ != name
    }
    assert differ == set()


def test_no_two_nodes_share_a_name():
    counts = Counter(name for pipeline in PIPELINES for name in pipeline.nodes)
    assert {name for name, count in counts.items() if count > 1} == set()


def test_a_trace_entry_names_the_node_that_wrote_it(settings):
    from smriti.memory import Memory
    from smriti.pipelines.store import STEPS

    with Memory.open(settings) as memory:
        stored = memory.store("Priya moved billing to Postgres", importance=0.6)
        recalled = memory.recall("billing database", explain=True)
        searched = memory.recall("billing", mode="search", explain=True)
    assert [entry["node"] for entry in stored["trace"]] == STEPS
    assert {entry["node"] for entry in recalled["trace"]} <= set(PIPELINES[1].nodes)
    assert [entry["node"] for entry in searched["trace"]][:3] == ["validate_recall", "vector_only", "gather"]
