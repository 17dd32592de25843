"""Every string a client sends has a bound it can read (issue 42, item 5).

Through a real ``smriti-mcp`` on stdio: ``tools/list`` advertises each bound as ``maxLength``; a
store or recall at each bound succeeds, one past it is a one-line tool error naming the bound, and
nothing is written. The library's ``Memory`` and the LangGraph store share the same checks.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.errors import InvalidInput
from smriti.memory import Memory
from smriti.validators import (
    MAX_DATE_CHARS,
    MAX_ID_CHARS,
    MAX_QUERY_CHARS,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TAGS_CHARS,
)
from tests.envs import offline_env

CONTENT_CHARS = 500  # MAX_CONTENT_CHARS of the server under test


def tags(count: int, length: int = MAX_TAG_CHARS) -> str:
    """``count`` distinct tags of ``length`` characters each, comma-separated."""
    return ",".join(f"{n:03d}".ljust(length, "t") for n in range(count))


def content(n: int) -> str:
    return f"Memory {n} about the Atlas deployment. ".ljust(CONTENT_CHARS, "x")


AT_THE_BOUNDS = [
    ("smriti_store", {"content": content(1)}),
    ("smriti_store", {"content": content(2), "tags": tags(MAX_TAGS)}),
    (
        "smriti_store",
        {
            "content": content(3),
            "tags": ", ".join(f"{n:03d}".ljust(MAX_TAG_CHARS, "t") for n in range(MAX_TAGS)),
        },
    ),
    ("smriti_store", {"content": content(4), "source": "s" * MAX_SOURCE_CHARS}),
    (
        "smriti_store",
        {"content": content(5), "occurred_at": "2023-05-08T13:56:00+00:00".ljust(MAX_DATE_CHARS)},
    ),
    ("smriti_recall", {"query": "Atlas deployment ".ljust(MAX_QUERY_CHARS, "q")}),
]

PAST_THE_BOUNDS = [
    ("smriti_store", {"content": "y" * (CONTENT_CHARS + 1)}, f"the limit is {CONTENT_CHARS}"),
    (
        "smriti_store",
        {"content": "fine", "tags": tags(MAX_TAGS + 1, 10)},
        f"{MAX_TAGS + 1} tags; the limit is {MAX_TAGS}",
    ),
    (
        "smriti_store",
        {"content": "fine", "tags": tags(1, MAX_TAG_CHARS + 1)},
        f"the limit is {MAX_TAG_CHARS}",
    ),
    (
        "smriti_store",
        {"content": "fine", "tags": "a," * 50_000},
        f"tags is 100000 characters; the limit is {MAX_TAGS_CHARS}",
    ),
    ("smriti_store", {"content": "fine", "source": "s" * (MAX_SOURCE_CHARS + 1)}, "source is"),
    (
        "smriti_store",
        {"content": "fine", "occurred_at": "2023-05-08".ljust(MAX_DATE_CHARS + 1)},
        "occurred_at is",
    ),
    ("smriti_store", {"content": "fine", "supersedes": "i" * (MAX_ID_CHARS + 1)}, "supersedes is"),
    ("smriti_recall", {"query": "q" * (MAX_QUERY_CHARS + 1)}, f"query is {MAX_QUERY_CHARS + 1} characters"),
    ("smriti_manage", {"action": "forget", "memory_id": "i" * (MAX_ID_CHARS + 1)}, "memory_id is"),
]


def _params(location: Path) -> StdioServerParameters:
    script = Path(sys.executable).with_name("smriti-mcp")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "smriti.server"]
    env = {**os.environ, **offline_env(location, MAX_CONTENT_CHARS=str(CONTENT_CHARS))}
    return StdioServerParameters(command=command[0], args=command[1:], env=env)


async def _count(client: Client) -> int:
    stats = await client.call_tool("smriti_manage", {"action": "stats"})
    assert not stats.is_error, stats.content
    return stats.structured_content["details"]["engrams"]


def test_the_bounds_are_advertised_and_enforced_through_a_client_session(tmp_path) -> None:
    async def main() -> None:
        with (tmp_path / "server.log").open("w") as errlog:
            async with Client(stdio_client(_params(tmp_path / "store"), errlog=errlog)) as client:
                schemas = {
                    tool.name: tool.input_schema["properties"] for tool in (await client.list_tools()).tools
                }
                assert schemas["smriti_store"]["content"]["maxLength"] == CONTENT_CHARS
                assert schemas["smriti_store"]["tags"]["maxLength"] == MAX_TAGS_CHARS
                assert schemas["smriti_store"]["source"]["maxLength"] == MAX_SOURCE_CHARS
                assert schemas["smriti_store"]["occurred_at"]["maxLength"] == MAX_DATE_CHARS
                assert schemas["smriti_store"]["supersedes"]["maxLength"] == MAX_ID_CHARS
                assert schemas["smriti_recall"]["query"]["maxLength"] == MAX_QUERY_CHARS
                assert schemas["smriti_manage"]["memory_id"]["maxLength"] == MAX_ID_CHARS
                for properties in schemas.values():  # every string argument has its bound
                    for name, schema in properties.items():
                        if schema.get("type") == "string" and "enum" not in schema:
                            assert "maxLength" in schema, name

                for tool, arguments in AT_THE_BOUNDS:
                    result = await client.call_tool(tool, arguments)
                    assert not result.is_error, (tool, list(arguments), result.content)
                stored = await _count(client)
                assert stored == 5
                recalled = await client.call_tool("smriti_recall", {"mode": "list", "limit": 5})
                kept = {
                    item["id"]: item["metadata"]["tags"] for item in recalled.structured_content["results"]
                }
                assert sorted(len(value.split(",")) for value in kept.values() if value) == [
                    MAX_TAGS,
                    MAX_TAGS,
                ]

                for tool, arguments, message in PAST_THE_BOUNDS:
                    result = await client.call_tool(tool, arguments)
                    assert result.is_error, (tool, list(arguments))
                    text = result.content[0].text
                    assert message in text and "\n" not in text, text
                assert await _count(client) == stored  # nothing was written

    anyio.run(main)


def test_the_library_and_the_langgraph_store_share_the_bounds(settings) -> None:
    from smriti.integrations.langgraph_store import SmritiStore

    with Memory.open(settings) as memory:
        memory.store("Atlas runs on Terraform", tags=tags(MAX_TAGS))
        with pytest.raises(InvalidInput, match=f"the limit is {MAX_TAGS}"):
            memory.store("Atlas runs on Pulumi", tags=tags(MAX_TAGS + 1, 10))
        with pytest.raises(InvalidInput, match="query is"):
            memory.recall("q" * (MAX_QUERY_CHARS + 1))
        assert memory.stats()["engrams"] == 1

        store = SmritiStore(memory)
        store.put(("n" * 97,), "key", {"text": "fits: ns: and 97 characters is a tag of 100"})
        with pytest.raises(InvalidInput, match=f"the limit is {MAX_TAG_CHARS}"):
            store.put(("n" * 98,), "key", {"text": "one character too many"})
        assert memory.stats()["engrams"] == 2


def test_near_duplicates_never_grow_the_tags_past_the_bound(settings) -> None:
    with Memory.open(settings) as memory:
        first = memory.store("Priya deploys the Atlas project with Terraform", tags=tags(MAX_TAGS))
        again = memory.store(
            "Priya deploys the Atlas project with Terraform",
            tags=",".join(f"other{n}" for n in range(MAX_TAGS)),
        )
        assert again["deduplicated"] and again["id"] == first["id"]
        assert len(memory.context.store.get_engram(first["id"]).tag_list()) == MAX_TAGS
