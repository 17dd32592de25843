"""The ``smriti`` command line through typer's CliRunner, on real Kuzu stores in tmp_path."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from smriti.cli import app
from tests.envs import offline_env

MEMORIES = [
    "Alice prefers PostgreSQL with pgvector for retrieval augmented generation projects.",
    "The deploy pipeline for project Atlas runs on GitHub Actions every night at 02:00 UTC.",
    "Bob recommends cursor-based pagination for the orders API because offsets get slow.",
]


def make_env(location) -> dict[str, str]:
    return offline_env(location, COLUMNS="220")  # rich tables: keep ids on one line


@pytest.fixture
def cli(tmp_path):
    """``cli(*args, env=None, input=None)`` runs the app against tmp_path/store by default."""
    runner = CliRunner()
    default_env = make_env(tmp_path / "store")

    def run(*args: str, env: dict[str, str] | None = None, input: str | None = None):
        return runner.invoke(app, list(args), env=env or default_env, input=input)

    return run


def ok(result) -> str:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)
    return result.stdout


def store_all(cli, env=None) -> list[str]:
    ids = []
    for content in MEMORIES:
        stored = ok(cli("store", content, "--importance", "0.7", "--tags", "t", "--json", env=env))
        ids.append(json.loads(stored)["id"])
    return ids


def test_store_recall_list_forget_stats(cli):
    ids = store_all(cli)
    assert len(set(ids)) == 3

    result = json.loads(ok(cli("recall", "pagination for the orders API", "--json")))
    assert {"query", "total_results", "sources", "results"} <= set(result)
    assert ids[2] in [item["id"] for item in result["results"]]
    assert {"id", "text", "score", "source", "timestamp", "entities", "memory_type"} <= set(
        result["results"][0]
    )

    table = ok(cli("recall", "pagination for the orders API"))
    assert ids[2] in table and "score" in table

    listed = json.loads(ok(cli("list", "--json")))
    assert {item["id"] for item in listed["results"]} == set(ids)

    assert ids[0] in ok(cli("forget", ids[0]))
    listed = json.loads(ok(cli("list", "--json")))
    assert {item["id"] for item in listed["results"]} == set(ids[1:])
    for mode in ("recall", "search"):
        found = json.loads(ok(cli("recall", "PostgreSQL pgvector", "--mode", mode, "--json")))
        assert ids[0] not in [item["id"] for item in found["results"]]

    stats = json.loads(ok(cli("stats", "--json")))
    assert stats["engrams"] == 2
    assert stats["backup"] == {"type": "none", "enabled": False}
    assert {"cues", "clusters", "vector_index", "llm", "embedder"} <= set(stats)
    assert "engrams" in ok(cli("stats"))


def test_recall_explain_prints_a_table_per_node(cli):
    store_all(cli)
    output = ok(cli("recall", "Atlas deploy pipeline", "--explain"))
    for node in ("validate_recall", "extract_query_cues", "vector_search", "score", "format_result"):
        assert node in output
    explained = json.loads(ok(cli("recall", "Atlas deploy pipeline", "--explain", "--json")))
    nodes = [step["node"] for step in explained["trace"]]
    assert nodes[0] == "validate_recall" and "format_result" in nodes


def test_consolidate_reports_and_traces(cli):
    store_all(cli)
    report = json.loads(ok(cli("consolidate", "--json")))
    assert report["trace"], report
    assert "consolidation report" in ok(cli("consolidate"))
    assert json.loads(ok(cli("stats", "--json")))["engrams"] == 3


def _records(cli, env) -> dict[str, list]:
    """An export split by kind, in a comparable (sorted, id-free for cues) form."""
    from smriti.stores.records import LOCAL_META_KEYS

    lines = [json.loads(line) for line in ok(cli("export", env=env)).splitlines() if line.strip()]
    by_kind: dict[str, list] = {}
    for record in lines:
        if record["kind"] == "meta" and record["key"] in LOCAL_META_KEYS:
            continue
        if record["kind"] == "cue":
            record = {k: v for k, v in record.items() if k != "id"}
        by_kind.setdefault(record["kind"], []).append(json.dumps(record, sort_keys=True))
    return {kind: sorted(items) for kind, items in by_kind.items()}


def test_export_import_round_trip_is_identical_and_idempotent(cli, tmp_path):
    store_all(cli)
    source_env = make_env(tmp_path / "store")
    target_env = make_env(tmp_path / "other")
    dump = tmp_path / "memories.jsonl"
    ok(cli("export", str(dump)))
    assert dump.read_text().count("\n") > 3

    before = _records(cli, source_env)
    assert {"engram", "cue", "encoded_by"} <= set(before)
    assert len(before["engram"]) == 3

    imported = cli("import", str(dump), env=target_env)
    assert "imported" in ok(imported)
    assert "imported 3/3 memories" in imported.stderr  # progress counts memories, even without a terminal
    after_first = _records(cli, target_env)
    assert after_first == before

    ok(cli("import", str(dump), env=target_env))
    assert _records(cli, target_env) == after_first
    assert json.loads(ok(cli("stats", "--json", env=target_env)))["engrams"] == 3


def test_import_of_a_bad_file_changes_nothing(cli, tmp_path):
    store_all(cli)
    bad = tmp_path / "bad.jsonl"
    good_line = json.dumps({"kind": "meta", "key": "note", "value": "x"})
    bad.write_text(good_line + "\nthis is not json\n")
    result = cli("import", str(bad))
    assert result.exit_code == 2
    assert "not JSON" in result.stderr and "Traceback" not in result.stderr
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(json.dumps({"kind": "spaceship"}) + "\n")
    assert cli("import", str(unknown)).exit_code == 2
    assert json.loads(ok(cli("stats", "--json")))["engrams"] == 3


def test_import_into_another_dimension_needs_reembed(cli, tmp_path):
    """Moving to another embedding model: refused with a way out, then --reembed does it."""
    ids = store_all(cli)
    dump = tmp_path / "memories.jsonl"
    ok(cli("export", str(dump)))
    wider = {**make_env(tmp_path / "wider"), "EMBEDDING_DIMS": "128"}
    refused = cli("import", str(dump), env=wider)
    assert refused.exit_code == 2 and "--reembed" in refused.stderr
    assert json.loads(ok(cli("stats", "--json", env=wider)))["engrams"] == 0

    ok(cli("import", str(dump), "--reembed", env=wider))
    moved = [json.loads(line) for line in ok(cli("export", env=wider)).splitlines() if line.strip()]
    engrams = {r["id"]: r for r in moved if r["kind"] == "engram"}
    assert set(engrams) == set(ids)
    assert all(len(r["embedding"]) == 128 for r in engrams.values())
    found = json.loads(ok(cli("recall", "pagination for the orders API", "--json", env=wider)))
    assert found["results"][0]["id"] == ids[2]


def test_context_prints_only_bullet_lines(cli):
    ids = store_all(cli)
    output = ok(cli("context", "which pagination does Bob recommend for the orders API?"))
    lines = output.splitlines()
    assert lines and all(line.startswith("- ") and "(id: " in line and "score: " in line for line in lines)
    assert ids[2] in output

    hook_input = json.dumps({"session_id": "s1", "prompt": "nightly deploy of project Atlas"})
    hooked = ok(cli("context", "-", input=hook_input))
    assert ids[1] in hooked and all(line.startswith("- ") for line in hooked.splitlines())


def test_context_on_an_empty_memory_prints_nothing(cli):
    assert ok(cli("context", "anything at all")) == ""


@pytest.mark.parametrize("name", ["recall", "store", "consolidate"])
def test_graph_prints_mermaid(cli, name):
    output = ok(cli("graph", name))
    assert "graph TD" in output and "__start__" in output


def test_sync_without_backups_says_so(cli):
    result = cli("sync")
    assert result.exit_code == 0
    assert "BACKUP_TYPE=none" in result.stderr and result.stdout == ""


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["store", "   "], 2, "content"),
        (["store", "fine", "--importance", "1.5"], 2, "importance"),
        (["store", "fine", "--importance", "nan"], 2, "importance"),
        (["recall", "x", "--limit", "0"], 2, "limit"),
        (["recall", "x", "--limit", "21"], 2, "limit"),
        (["recall", "x", "--mode", "dream"], 2, "dream"),
        (["recall", "x", "--type", "dream"], 2, "dream"),
        (["forget", "no-such-id"], 1, "no-such-id"),
    ],
)
def test_bad_input_exit_codes(cli, args, code, needle):
    store_all(cli)
    result = cli(*args)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert needle in result.stderr and "Traceback" not in result.stderr
    assert json.loads(ok(cli("stats", "--json")))["engrams"] == 3


def test_settings_error_is_one_line_and_exit_2(cli, tmp_path):
    env = {**make_env(tmp_path / "store"), "EMBEDDING_DIMS": "lots"}
    result = cli("stats", env=env)
    assert result.exit_code == 2
    assert "EMBEDDING_DIMS" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_missing_model_package_is_one_line_and_exit_1(cli, tmp_path):
    # sentence-transformers is not installed in the test environment: a ProviderError.
    env = {**make_env(tmp_path / "store"), "EMBEDDING_PROVIDER": "local"}
    result = cli("stats", env=env)
    assert result.exit_code == 1, (result.stdout, result.stderr, result.exception)
    assert "sentence-transformers" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_unsafe_user_is_refused(cli, tmp_path):
    env = {**make_env(tmp_path / "store"), "ACCESSING_USER": "../escape"}
    result = cli("list", env=env)
    assert result.exit_code == 2 and "user name" in result.stderr


def test_forget_takes_a_unique_start_of_an_id(cli, tmp_path):
    ids = store_all(cli)
    assert "at least 4 characters" in cli("forget", ids[0][:3]).stderr
    assert "no memory with an id starting" in cli("forget", "zzzz-not-an-id").stderr
    assert ids[0] in ok(cli("forget", ids[0][:8]))
    listed = json.loads(ok(cli("list", "--json")))
    assert {item["id"] for item in listed["results"]} == set(ids[1:])


def test_forget_refuses_an_ambiguous_start_and_changes_nothing(tmp_path):
    from smriti.config import Settings
    from smriti.errors import InvalidInput
    from smriti.memory import Memory
    from smriti.stores.base import Engram

    settings = Settings(**{k.lower(): v for k, v in offline_env(tmp_path / "store").items()})
    with Memory.open(settings) as memory:
        for suffix in ("1", "2"):
            memory.context.store.create_engram(Engram(id=f"abcd-{suffix}", content=f"memory {suffix}"))
        with pytest.raises(InvalidInput, match="2 memories have ids starting 'abcd'"):
            memory.resolve_id("abcd")
        assert memory.resolve_id("abcd-2") == "abcd-2"
        assert memory.context.store.count_engrams() == 2


def test_a_narrow_terminal_shows_ids_cut_to_a_prefix_that_forget_accepts(cli, tmp_path):
    ids = store_all(cli)
    narrow = offline_env(tmp_path / "store", COLUMNS="80")
    table = ok(cli("list", env=narrow))
    assert ids[0][:8] in table and ids[0] not in table
    assert "any unique start works" in table
    wide = ok(cli("list"))
    assert all(i in wide for i in ids)


def test_offline_runs_say_so_in_one_line(cli, tmp_path, caplog):
    keyless = offline_env(tmp_path / "store", LLM_PROVIDER="auto", EMBEDDING_PROVIDER="auto")
    with caplog.at_level("WARNING"):
        ok(cli("stats", env=keyless))
    notices = [r.getMessage() for r in caplog.records if "offline" in r.getMessage()]
    assert len(notices) == 1, notices
    assert "LLM_API_KEY" in notices[0] and "hashing embedder" in notices[0]


def test_make_refuses_a_venv_of_another_python(tmp_path):
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("make") is None:
        pytest.fail("make is required (the quick start uses it)")
    project = tmp_path / "project"
    project.mkdir()
    root = Path(__file__).resolve().parent.parent
    for name in ("Makefile", "requirements-minilm.txt"):  # the install stamps depend on both
        shutil.copy(root / name, project / name)
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    python = project / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    # A venv whose interpreter is 3.11: answers -V, fails the version check.
    python.write_text('#!/bin/sh\nif [ "$1" = "-V" ]; then echo "Python 3.11.9"; exit 0; fi\nexit 1\n')
    python.chmod(0o755)
    done = subprocess.run(["make", "install"], cwd=project, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "Python 3.11.9, not Python 3.12" in done.stderr and "rm -rf .venv" in done.stderr
    assert not (project / ".venv" / ".installed").exists()


def test_the_docs_command_line_example_works_offline(cli):
    """The command-line page's store-then-recall example, as written (optional [flags] dropped),
    no API key."""
    import re
    import shlex
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "cli.md").read_text()
    block = page.split("# Command line", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    store_line = next(line for line in block.splitlines() if line.startswith("smriti store "))
    recall_line = next(line for line in block.splitlines() if line.startswith("smriti recall "))
    recall_line = re.sub(r"\s*\[[^\]]*\]", "", recall_line)
    store_all(cli)  # other memories beside it: the example must find its own, first
    stored = ok(cli(*shlex.split(store_line)[1:], "--json"))
    memory_id = json.loads(stored)["id"]
    found = json.loads(ok(cli(*shlex.split(recall_line)[1:], "--json")))
    assert [item["id"] for item in found["results"]][:1] == [memory_id]


def test_the_docs_python_example_runs_offline(tmp_path, monkeypatch):
    """The library page's first Python block, executed as written, without an API key."""
    from pathlib import Path

    for name, value in offline_env(
        tmp_path / "store", LLM_PROVIDER="auto", EMBEDDING_PROVIDER="auto"
    ).items():
        monkeypatch.setenv(name, value)
    page = (Path(__file__).resolve().parent.parent / "docs" / "library.md").read_text()
    section = page.split("## Using Smriti from Python", 1)[1]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(compile(code, "docs/library.md", "exec"), namespace)
    memory = namespace["memory"]
    try:
        found = memory.recall("which vector store does Alice like?", limit=5)
        assert found["results"][0]["text"] == "Alice prefers the pgvector vector store for RAG"
    finally:
        memory.close()


def test_context_stays_within_its_budget_most_relevant_first(cli, tmp_path):
    store_all(cli)
    full = ok(cli("context", "PostgreSQL pgvector pagination deploy")).splitlines()
    assert len(full) == 3
    budget = len(full[0]) + 1 + len(full[1]) + 1  # room for the first two lines only
    cut = ok(cli("context", "PostgreSQL pgvector pagination deploy", "--budget", str(budget))).splitlines()
    assert cut == full[:2]
    env = offline_env(tmp_path / "store", COLUMNS="220", CONTEXT_BUDGET_CHARS=str(len(full[0]) + 1))
    assert ok(cli("context", "PostgreSQL pgvector pagination deploy", env=env)).splitlines() == full[:1]
