"""Query focus: entity hints, intent and time windows steer recall; ``occurred_at`` through MCP."""

from __future__ import annotations

from datetime import UTC, datetime

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.errors import InvalidInput
from smriti.nodes.candidates import memory_subject
from smriti.nodes.refine import (
    entity_factor,
    intent_factor,
    named_subject,
    subject_factor,
    time_factor,
)
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph
from smriti.time_window import find_time_window
from smriti.validators import check_occurred_at
from tests.test_server_stdio import server_command, server_env

NOW = datetime(2023, 10, 22, 15, 0, tzinfo=UTC)  # a Sunday


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Melanie do in May 2023?", "2023-05-01", "2023-06-01"),
        ("where did we go last May", "2023-05-01", "2023-06-01"),
        ("what happened in March", "2023-03-01", "2023-04-01"),
        ("plans from December", "2022-12-01", "2023-01-01"),  # the latest December not after now
        ("what happened yesterday", "2023-10-21", "2023-10-22"),
        ("notes from today", "2023-10-22", "2023-10-23"),
        ("the bug from 3 days ago", "2023-10-18", "2023-10-21"),
        ("two weeks ago", "2023-10-05", "2023-10-12"),
        ("what did I decide last week", "2023-10-09", "2023-10-16"),
        ("last weekend", "2023-10-14", "2023-10-16"),  # asked on a Sunday: the weekend before
        ("last month", "2023-09-01", "2023-10-01"),
        ("what happened last year", "2022-01-01", "2023-01-01"),
        ("the release in 2021", "2021-01-01", "2022-01-01"),
        ("on 8 May, 2023", "2023-05-08", "2023-05-09"),
        ("the May 8, 2023 meeting", "2023-05-08", "2023-05-09"),
        ("the 2023-05-08 incident", "2023-05-08", "2023-05-09"),
    ],
)
def test_time_windows(query, start, end):
    window = find_time_window(query, NOW)
    assert window is not None, query
    assert (window.start.date().isoformat(), window.end.date().isoformat()) == (start, end)


@pytest.mark.parametrize(
    "query",
    [
        "May I ask about Rust?",
        "the week before the trip",
        "march on",
        "What does Caroline like?",
        "open port 2049",
    ],
)
def test_no_time_window(query):
    assert find_time_window(query, NOW) is None


def test_window_bounds_are_half_open():
    window = find_time_window("in May 2023", NOW)
    assert window.contains(datetime(2023, 5, 1, tzinfo=UTC))
    assert window.contains(datetime(2023, 5, 31, 23, 59, tzinfo=UTC))
    assert not window.contains(datetime(2023, 6, 1, tzinfo=UTC))
    assert window.contains(datetime(2023, 5, 2))  # naive times are UTC


def test_factors():
    weights = {"caroline": 2.0, "lgbtq": 6.0}
    assert entity_factor(["caroline", "lgbtq", "group"], weights, 0.2) == pytest.approx(1.0)
    assert entity_factor(["caroline"], weights, 0.2) == pytest.approx(0.8 + 0.2 * 2 / 8)
    assert entity_factor(["melanie"], weights, 0.2) == pytest.approx(0.8)
    assert entity_factor(["melanie"], {}, 0.2) == 1.0  # no known hint: no factor
    assert intent_factor("procedural", "procedure", 0.1) == 1.0
    assert intent_factor("episodic", "procedure", 0.1) == pytest.approx(0.9)
    assert intent_factor("episodic", "fact", 0.1) == 1.0  # "fact" prefers no type
    window = find_time_window("in 2022", NOW)
    assert time_factor(datetime(2022, 6, 1, tzinfo=UTC), window, 0.5) == 1.0
    assert time_factor(datetime(2023, 6, 1, tzinfo=UTC), window, 0.5) == 0.5
    assert time_factor(datetime(2023, 6, 1, tzinfo=UTC), None, 0.5) == 1.0


def test_a_memory_s_subject_is_the_entity_its_text_starts_with():
    people = {"john": "person", "john-smith": "person", "tea": "keyword", "melanie": "person"}
    assert memory_subject("John Smith: hi there", ["john", "john-smith"], people) == "john-smith"
    assert memory_subject("John prefers tea", ["john", "tea"], people) == "john"
    assert memory_subject("Melanie's kids love the beach", ["melanie"], people) == "melanie"
    assert memory_subject("Johnny: hi", ["john"], people) == ""  # a whole word, not a prefix
    assert memory_subject("Tea is better green", ["tea"], people) == ""  # keywords are no subject
    assert memory_subject("I told Melanie", ["melanie"], people) == ""
    assert memory_subject("Melanie", ["melanie"], people) == "melanie"
    # Runs of spaces fold into one hyphen, however far the short head cut reaches.
    assert memory_subject("John      Smith: hi", ["john", "john-smith"], people) == "john-smith"
    assert memory_subject("Melanie" + " " * 30 + "Smith", ["melanie-smith"], people) == "melanie-smith"
    assert memory_subject("Melanie" + " " * 30 + "x", ["melanie"], people) == "melanie"
    assert named_subject(["melanie", "lake"], ["melanie", "", "caroline"]) == "melanie"
    assert named_subject(["melanie", "caroline"], ["melanie", "caroline"]) == ""  # two: no subject
    assert named_subject(["lake"], ["melanie"]) == ""
    assert subject_factor("melanie", "melanie", 0.33) == 1.0
    assert subject_factor("caroline", "melanie", 0.33) == pytest.approx(0.67)
    assert subject_factor("caroline", "", 0.33) == 1.0


def test_occurred_at_is_checked():
    assert check_occurred_at("") is None
    assert check_occurred_at("2023-05-08") == datetime(2023, 5, 8, tzinfo=UTC)
    assert check_occurred_at("2023-05-08T13:56:00+02:00").utcoffset().total_seconds() == 7200
    assert check_occurred_at("2023-05-08T13:56:00").tzinfo == UTC
    for bad in ("last tuesday", "2023-13-01", 20230508):
        with pytest.raises(InvalidInput, match="occurred_at"):
            check_occurred_at(bad)


def _store(context, content, **extra):
    return store_graph.invoke({"content": content, **extra}, context=context)["id"]


def _recall(context, query, **extra):
    out = recall_graph.invoke({"query": query, "explain": True, **extra}, context=context)
    return out["result"], {t["node"]: t for t in out["trace"]}


def test_a_named_person_ranks_their_memories_first(make_context):
    """Two memories match the words equally; the one linked to the person asked about wins,
    and with the weight at 0 the order falls back to the tie-break."""
    context = make_context(entity_hint_weight=0.5)
    # As alike in words as two different memories get (the same text would be deduplicated).
    mine = _store(context, "Caroline: went to the pottery class on Friday after work")
    other = _store(context, "Melanie: the pottery class on Friday was fun, I went too")
    for i in range(10):
        _store(context, f"Jon: chatter {i} about football and the weather")
    result, trace = _recall(context, "When did Caroline go to the pottery class?")
    ids = [r["id"] for r in result["results"]]
    assert ids.index(mine) < ids.index(other)
    first = next(r for r in result["results"] if r["id"] == mine)
    second = next(r for r in result["results"] if r["id"] == other)
    assert first["components"]["focus_entity"] == 1.0
    assert second["components"]["focus_entity"] == pytest.approx(0.5)
    assert "caroline" in trace["focus"]["notes"]

    context.settings = context.settings.model_copy(update={"entity_hint_weight": 0.0})
    result, _ = _recall(context, "When did Caroline go to the pottery class?")
    flat = {r["id"]: r["components"]["focus_entity"] for r in result["results"]}
    assert flat[mine] == flat[other] == 1.0


def test_memories_about_the_named_person_outrank_those_that_mention_them(make_context):
    """Both memories are linked to Melanie and match the words; the one she is the subject of
    wins, unless the query names two subjects or the weight is 0."""
    context = make_context(entity_hint_weight=0.0, subject_weight=0.33)
    hers = _store(context, "Melanie: we went camping at the lake with the kids last summer")
    about_her = _store(context, "Caroline: Melanie, camping at the lake with the kids sounds lovely")
    for i in range(10):
        _store(context, f"Jon: chatter {i} about football and the weather")
    result, trace = _recall(context, "Where did Melanie go camping with the kids?")
    factor = {r["id"]: r["components"]["focus_subject"] for r in result["results"]}
    ids = [r["id"] for r in result["results"]]
    assert ids.index(hers) < ids.index(about_her)
    assert factor[hers] == 1.0 and factor[about_her] == pytest.approx(0.67)
    assert "subject=melanie" in trace["focus"]["notes"]

    result, trace = _recall(context, "Did Melanie and Caroline go camping with the kids?")
    assert {r["components"]["focus_subject"] for r in result["results"]} == {1.0}
    assert "subject=-" in trace["focus"]["notes"]

    context.settings = context.settings.model_copy(update={"subject_weight": 0.0})
    result, _ = _recall(context, "Where did Melanie go camping with the kids?")
    assert {r["components"]["focus_subject"] for r in result["results"]} == {1.0}


def test_a_time_window_raises_what_happened_then(make_context):
    context = make_context(time_window_weight=0.5)
    context.clock = lambda: NOW
    may = _store(context, "Trip to Lisbon with the team", occurred_at="2023-05-12")
    june = _store(context, "Trip to Porto with the team", occurred_at="2023-06-20")
    result, trace = _recall(context, "Which trip with the team happened in May 2023?")
    ids = [r["id"] for r in result["results"]]
    assert ids[0] == may and june in ids
    assert next(r for r in result["results"] if r["id"] == june)["components"]["focus_time"] == 0.5
    assert "2023-05-01" in trace["focus"]["notes"]
    result, _ = _recall(context, "Which trip with the team happened in June 2023?")
    assert result["results"][0]["id"] == june


def test_occurred_at_sets_the_memory_time_not_its_last_access(make_context):
    context = make_context()
    context.clock = lambda: NOW
    stored = _store(context, "Moved to Berlin", occurred_at="2019-03-01T00:00:00+00:00")
    engram = context.store.get_engram(stored)
    assert engram.created_at == datetime(2019, 3, 1, tzinfo=UTC)
    assert engram.last_accessed_at == NOW  # new to memory: not decayed as unused since 2019


def test_the_store_pipeline_checks_occurred_at_before_anything_is_written(make_context):
    context = make_context()
    with pytest.raises(InvalidInput, match="occurred_at"):
        _store(context, "Moved to Berlin", occurred_at="last spring")
    assert context.store.count_engrams() == 0
    # a date alone is midnight UTC, as through MCP and the CLI
    stored = _store(context, "Moved to Berlin", occurred_at="2019-03-01")
    assert context.store.get_engram(stored).created_at == datetime(2019, 3, 1, tzinfo=UTC)


def test_occurred_at_through_mcp(tmp_path):
    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=server_env(tmp_path))

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            bad = await client.call_tool("smriti_store", {"content": "x happened", "occurred_at": "tuesday"})
            assert bad.is_error and "occurred_at" in bad.content[0].text
            stats = await client.call_tool("smriti_manage", {"action": "stats"})
            assert "0" in str(stats.structured_content["details"].get("engrams", 0))
            old = await client.call_tool(
                "smriti_store", {"content": "Priya visited the Lisbon office", "occurred_at": "2022-03-14"}
            )
            # (not "joined": a later "joined" would supersede the first, which is another story)
            new = await client.call_tool("smriti_store", {"content": "Priya visited the Berlin office"})
            assert not old.is_error and not new.is_error
            result = await client.call_tool(
                "smriti_recall", {"query": "Which office did Priya visit in 2022?", "explain": True}
            )
            items = result.structured_content["results"]
            assert items[0]["id"] == old.structured_content["id"]
            assert items[0]["timestamp"].startswith("2022-03-14")
            assert items[0]["components"]["focus_time"] == 1.0

    anyio.run(main)
