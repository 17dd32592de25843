"""Inputs are checked once, where they enter (issue 24).

Each rule is one function of ``validators.py``; ``check_store`` and ``check_recall`` apply them.
These tests count how often each rule runs per request on every entry path (an MCP session, the
CLI, ``Memory``, a graph invoked directly) and guard the layout that keeps it so: no other
module applies a rule, and the MCP tool signatures declare types only (a pydantic bound or
Literal there would be a second check the count cannot see).
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from typer.testing import CliRunner

from smriti import validators
from smriti.memory import Memory
from smriti.server import app as server_app
from smriti.server.app import build_server

ROOT = Path(__file__).resolve().parents[1] / "src" / "smriti"
STORE_RULES = ("check_content", "check_importance", "check_occurred_at", "normalise_tags", "check_text")
RECALL_RULES = ("check_text", "check_mode", "check_limit", "check_memory_type")
RULES = tuple(dict.fromkeys(STORE_RULES + RECALL_RULES))


@pytest.fixture
def applied(monkeypatch) -> Counter[str]:
    """How many times each rule ran (the composites look the rules up in validators' globals)."""
    counts: Counter[str] = Counter()
    for name in RULES:
        rule = getattr(validators, name)

        def counting(*args: Any, _rule: Any = rule, _name: str = name, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _rule(*args, **kwargs)

        monkeypatch.setattr(validators, name, counting)
    return counts


STORE = {"content": "Noor moved the billing service to Postgres.", "importance": 0.7, "tags": "db"}
RECALL = {"query": "billing database", "limit": 3, "mode": "recall", "memory_type": "semantic"}


def test_an_mcp_request_is_checked_once_at_the_tool_boundary(settings, applied):
    async def main() -> None:
        async with Client(build_server(settings)) as client:
            applied.clear()
            assert not (await client.call_tool("smriti_store", STORE)).is_error
            assert applied == dict.fromkeys(STORE_RULES, 1)
            applied.clear()
            assert not (await client.call_tool("smriti_recall", RECALL)).is_error
            assert applied == dict.fromkeys(RECALL_RULES, 1)
            applied.clear()
            refused = await client.call_tool("smriti_recall", {**RECALL, "limit": 99})
            assert refused.is_error and "limit must be at most" in refused.content[0].text
            assert applied["check_limit"] == 1

    anyio.run(main)


def test_a_library_call_is_checked_once_by_memory(settings, applied):
    with Memory.open(settings) as memory:
        memory.store(STORE["content"], importance=0.7, tags="db")
        assert applied == dict.fromkeys(STORE_RULES, 1)
        applied.clear()
        memory.recall("billing database", limit=3, memory_type="semantic")
        assert applied == dict.fromkeys(RECALL_RULES, 1)


def test_a_graph_invoked_directly_checks_in_its_validate_step(settings, applied):
    from smriti.pipelines.recall import recall_graph
    from smriti.pipelines.store import store_graph

    with Memory.open(settings) as memory:
        store_graph.invoke(dict(STORE), context=memory.context)
        assert applied == dict.fromkeys(STORE_RULES, 1)
        applied.clear()
        output = recall_graph.invoke(dict(RECALL), context=memory.context)
        assert applied == dict.fromkeys(RECALL_RULES, 1)
        assert output["trace"][0]["node"] == "validate_recall"
        with pytest.raises(validators.InvalidInput, match="limit must be at least 1"):
            recall_graph.invoke({**RECALL, "limit": 0}, context=memory.context)


def test_a_cli_command_is_checked_once_where_it_enters(tmp_path, applied):
    from smriti.cli import app as cli_app
    from tests.envs import offline_env

    env = offline_env(tmp_path / "store")
    runner = CliRunner()
    stored = runner.invoke(
        cli_app, ["store", STORE["content"], "--importance", "0.7", "--tags", "db"], env=env
    )
    assert stored.exit_code == 0, stored.output
    assert applied == dict.fromkeys(STORE_RULES, 1)
    applied.clear()
    recalled = runner.invoke(cli_app, ["recall", "billing database", "--limit", "3"], env=env)
    assert recalled.exit_code == 0, recalled.output
    assert applied == dict.fromkeys(RECALL_RULES, 1)


def _calls_in(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
    }


def test_no_module_but_validators_applies_a_rule():
    folders = ["pipelines", "nodes", "stores", "providers", "server", "cli", "integrations"]
    files = [p for p in ROOT.glob("*.py") if p.name != "validators.py"]
    for folder in folders:
        files += (ROOT / folder).rglob("*.py")
    offenders = {str(p.relative_to(ROOT)): sorted(_calls_in(p) & set(RULES)) for p in files}
    assert {path: rules for path, rules in offenders.items() if rules} == {}


@pytest.mark.parametrize("tool", [server_app.smriti_store, server_app.smriti_recall])
def test_mcp_tool_signatures_declare_types_not_rules(tool):
    for name, hint in typing.get_type_hints(tool, include_extras=True).items():
        if name in ("ctx", "return"):
            continue
        base, *metadata = typing.get_args(hint) if typing.get_origin(hint) is typing.Annotated else (hint,)
        assert typing.Literal not in {typing.get_origin(a) for a in (base, *typing.get_args(base))}, name
        for field in metadata:
            bounds = [
                m for m in getattr(field, "metadata", []) if type(m).__name__ in {"Ge", "Le", "Gt", "Lt"}
            ]
            assert not bounds, f"{tool.__name__}.{name} applies a bound: {bounds}"
    assert "Literal" not in inspect.getsource(tool)
