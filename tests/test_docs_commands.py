"""The code blocks of README.md and docs/*.md name only commands and settings that exist.

Every fenced block is read: in a shell line, each ``smriti`` subcommand (and sub-subcommand) and
its ``--options`` are looked up in the typer app, each ``smriti-mcp`` option in its argument
parser, each ``make`` target in the Makefile; an environment variable given to a command
(``NAME=value smriti ...``, ``-e NAME=value``, ``export NAME=...``) and every key of a JSON
``"env"`` object must be a setting of the Settings model. A renamed command, option, target or
setting then fails here instead of misleading a reader who pastes the block.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import typer.main

from smriti.cli import app
from smriti.config.settings import Settings, env_names
from smriti.server.launch import _parse_args

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

_FENCE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^\n]*)\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$",
    re.M | re.S,
)
_ASSIGNMENT = re.compile(r"^([A-Z][A-Z0-9_]*)=")
# Variables of the shell, the tools or the Makefile that are not Smriti's settings.
NOT_SETTINGS = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "PYTHONPATH",
    "SIZES",  # the Makefile's bench-scale sizes
    "NO_MKDOCS_2_WARNING",
    "COLUMNS",
    "XDG_CACHE_HOME",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "SMRITI_BENCH_DATA",  # bench/common.py: where the benchmarks read their data
}


@dataclass(frozen=True)
class Block:
    page: str
    info: str  # the fence's language
    body: str


def blocks(pages: list[Path] = PAGES) -> Iterator[Block]:
    for page in pages:
        for match in _FENCE.finditer(page.read_text(encoding="utf-8")):
            yield Block(page.name, match["info"].strip().split(" ")[0].lower(), match["body"])


def setting_names() -> set[str]:
    return {name for field in Settings.model_fields for name in env_names(field)}


def make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {
        name
        for line in re.findall(r"^([A-Za-z][\w-]*(?: [A-Za-z][\w-]*)*)\s*:(?!=)", text, re.M)
        for name in line.split()
    }


def _mcp_option_names() -> set[str]:
    """``smriti-mcp``'s options, read from the parser ``_parse_args`` builds."""
    import argparse

    seen: set[str] = set()
    original = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):  # type: ignore[no-untyped-def]
        seen.update(opt for action in self._actions for opt in action.option_strings)
        return original(self, [], namespace)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        _parse_args([])
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    return seen


def shell_commands(body: str) -> Iterator[list[str]]:
    """Each simple command of a shell block, as words (comments, prompts and pipes split off)."""
    text = re.sub(r"\\\n", " ", body)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("$ "):
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            words = list(lexer)
        except ValueError:
            continue  # an unfinished quote: prose in a console block
        command: list[str] = []
        for word in [*words, ";"]:
            if word and set(word) <= set(";&|()"):
                if command:
                    yield command
                command = []
            else:
                command.append(word)


def problems(block: Block, cli: Any, targets: set[str], settings: set[str], mcp: set[str]) -> list[str]:
    found: list[str] = []
    where = f"{block.page} ({block.info or 'no language'} block)"
    if block.info == "json":
        found += [f"{where}: {name} is not a setting" for name in _json_env_keys(block.body) - settings]
        return found
    if block.info not in ("sh", "bash", "shell", "console", "", "text"):
        return found
    for words in shell_commands(block.body):
        words = [word for word in words if word not in ("sudo", "uvx", "exec")]
        while words and words[0] == "export":
            words = words[1:]
        while words and (match := _ASSIGNMENT.match(words[0])):
            name = match[1]
            if name not in settings and name not in NOT_SETTINGS:
                found.append(f"{where}: {name} is not a setting")
            words = words[1:]
        for i, word in enumerate(words[:-1]):
            match = _ASSIGNMENT.match(words[i + 1]) if word == "-e" else None
            if match and match[1] not in settings and match[1] not in NOT_SETTINGS:
                found.append(f"{where}: {match[1]} is not a setting")
        if not words:
            continue
        program = Path(words[0]).name
        if program == "smriti":
            found += [f"{where}: {issue}" for issue in _cli_problems(cli, words[1:])]
        elif program == "smriti-mcp":
            found += [
                f"{where}: smriti-mcp has no option {word}"
                for word in words[1:]
                if word.startswith("--") and word.split("=")[0] not in mcp
            ]
        elif program == "make":
            found += [
                f"{where}: the Makefile has no target {word}"
                for word in words[1:]
                if not word.startswith("-") and "=" not in word and word not in targets
            ]
    return found


def _json_env_keys(body: str) -> set[str]:
    try:
        data = json.loads(body)
    except ValueError:
        # a fragment (`"env": {...}`): read the env object alone
        match = re.search(r'"env"\s*:\s*(\{[^{}]*\})', body)
        if match is None:
            return set()
        try:
            data = {"env": json.loads(match[1])}
        except ValueError:
            return set()
    keys: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "env" and isinstance(value, dict):
                    keys.update(str(name) for name in value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(data)
    return keys


def _cli_problems(group: Any, words: list[str]) -> list[str]:
    """``smriti [--user U] SUB [SUBSUB] [ARGS] [--options]``, checked against the typer app's
    commands (typer's own click: a group is what has ``get_command``)."""
    command, path, args = group, ["smriti"], list(words)
    while hasattr(command, "get_command"):
        while args and args[0].startswith("-"):  # the group's own options (--user alice)
            option = args.pop(0)
            param = _option(command, option)
            if param is None:
                return [f"{' '.join(path)} has no option {option}"]
            if not getattr(param, "is_flag", False) and "=" not in option and args:
                args.pop(0)
        if not args or args[0] in ("...", "<command>"):
            return []
        name = args.pop(0)
        sub = command.get_command(None, name)
        if sub is None:
            return [f"{' '.join(path)} has no subcommand {name!r}"]
        command, path = sub, [*path, name]
    return [
        f"{' '.join(path)} has no option {word.split('=')[0]}"
        for word in args
        if word.startswith("--") and _option(command, word) is None
    ]


_HELP = SimpleNamespace(is_flag=True)


def _option(command: Any, word: str) -> Any:
    """The option ``word`` names among ``command``'s parameters, or None."""
    name = word.split("=")[0]
    if name == "--help":
        return _HELP
    for param in command.params:
        if param.param_type_name == "option" and name in (*param.opts, *param.secondary_opts):
            return param
    return None


@pytest.fixture(scope="module")
def checkers():
    return typer.main.get_command(app), make_targets(), setting_names(), _mcp_option_names()


def test_every_command_target_and_setting_in_the_docs_exists(checkers):
    cli, targets, settings, mcp = checkers
    assert hasattr(cli, "get_command")
    found = [issue for block in blocks() for issue in problems(block, cli, targets, settings, mcp)]
    assert not found, "\n".join(found)


def test_the_checker_reads_the_blocks_it_should(checkers):
    """It finds the blocks a reader copies from (or it would pass on nothing)."""
    all_blocks = list(blocks())
    commands = [words for b in all_blocks if b.info in ("sh", "bash") for words in shell_commands(b.body)]
    programs = {Path(words[0]).name for words in commands if words}
    assert {"smriti", "make"} <= programs
    assert any(_json_env_keys(b.body) for b in all_blocks if b.info == "json")


@pytest.mark.parametrize(
    ("info", "body", "expected"),
    [
        ("sh", "smriti recal 'pgvector'\n", "smriti has no subcommand 'recal'"),
        ("sh", "smriti token ad alice\n", "smriti token has no subcommand 'ad'"),
        ("sh", "smriti status --everything\n", "smriti status has no option --everything"),
        ("sh", "make instal && make run\n", "the Makefile has no target instal"),
        ("sh", "DB_KIND=sqlite smriti stats   # a comment\n", "DB_KIND is not a setting"),
        ("sh", "docker run -e EMBEDING_PROVIDER=minilm smriti\n", "EMBEDING_PROVIDER is not a setting"),
        ("sh", "smriti-mcp --transport streamable-http --worker 2\n", "smriti-mcp has no option --worker"),
        (
            "json",
            '{"mcpServers": {"smriti": {"command": "smriti-mcp", "env": {"LLM_KEY": "x"}}}}',
            "LLM_KEY is not a setting",
        ),
        ("json", '"env": { "STORAGE_LOCATON": "/srv" }', "STORAGE_LOCATON is not a setting"),
    ],
)
def test_a_wrong_name_in_a_block_is_reported(checkers, info, body, expected):
    cli, targets, settings, mcp = checkers
    found = problems(Block("page.md", info, body), cli, targets, settings, mcp)
    assert any(expected in issue for issue in found), found


def test_right_names_pass(checkers):
    cli, targets, settings, mcp = checkers
    body = (
        "make run && make install-server\n"
        "DB_TYPE=kuzu smriti --user alice recall 'pgvector' --limit 3\n"
        "smriti token add alice\nsmriti status --all\n"
        "smriti-mcp --transport streamable-http --host 0.0.0.0 --port 8000\n"
    )
    assert problems(Block("page.md", "sh", body), cli, targets, settings, mcp) == []
