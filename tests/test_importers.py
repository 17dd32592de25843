"""``smriti import --from server-memory|text``: other memory servers' files and plain text."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from smriti.cli import app
from smriti.cli.importers import paragraphs
from tests.envs import offline_env

SERVER_MEMORY = [
    {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["Speaks fluent Spanish"]},
    {
        "type": "entity",
        "name": "Acme",
        "entityType": "organization",
        "observations": ["Builds rockets in Nevada"],
    },
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
]


@pytest.fixture
def run(tmp_path):
    env = offline_env(tmp_path / "store", COLUMNS="200")
    runner = CliRunner()
    return lambda *args: runner.invoke(app, list(args), env=env)


def _export(run, tmp_path) -> list[dict]:
    out = tmp_path / "export.jsonl"
    assert run("export", str(out)).exit_code == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_server_memory_file(run, tmp_path):
    path = tmp_path / "memory.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in SERVER_MEMORY) + "\n")
    first = run("import", "--from", "server-memory", str(path))
    assert first.exit_code == 0, first.output
    assert "imported 3 memories" in first.stdout and "1 relations" in first.stdout
    second = run("import", "--from", "server-memory", str(path))
    assert "imported 0 memories" in second.stdout and "3 already known, 0 relations" in second.stdout

    records = _export(run, tmp_path)
    texts = {r["content"] for r in records if r["kind"] == "engram"}
    assert texts == {"Alice: Speaks fluent Spanish", "Acme: Builds rockets in Nevada", "Alice works at Acme"}
    facts = [r for r in records if r["kind"] == "relates_to"]
    assert [(f["source"], f["relation"], f["target"]) for f in facts] == [("alice", "works_at", "acme")]

    found = json.loads(run("recall", "where does Alice work", "--json").stdout)
    assert found["results"][0]["text"] == "Alice works at Acme"


def test_a_bad_server_memory_line_changes_nothing(run, tmp_path):
    path = tmp_path / "memory.jsonl"
    path.write_text(json.dumps(SERVER_MEMORY[0]) + "\n{not json\n")
    result = run("import", "--from", "server-memory", str(path))
    assert result.exit_code == 2 and "memory.jsonl:2" in result.stderr
    assert json.loads(run("stats", "--json").stdout)["engrams"] == 0


def test_text_and_markdown_folder(run, tmp_path):
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "trip.md").write_text(
        "# Lisbon trip\n\nWe take the night train on Friday.\n\nBook the hotel near Alfama.\n"
    )
    (notes / "sub" / "work.txt").write_text("The deploy runs nightly at two.\n")
    (notes / "ignored.bin").write_bytes(b"\x00\x01")
    result = run("import", "--from", "text", str(notes))
    assert result.exit_code == 0, result.output
    assert "imported 3 memories" in result.stdout
    records = [r for r in _export(run, tmp_path) if r["kind"] == "engram"]
    by_text = {r["content"]: r["source"] for r in records}
    assert by_text == {
        "# Lisbon trip\nWe take the night train on Friday.": "trip.md",
        "Book the hotel near Alfama.": "trip.md",
        "The deploy runs nightly at two.": "work.txt",
    }


def test_an_export_import_refuses_a_folder(run, tmp_path):
    result = run("import", str(tmp_path))
    assert result.exit_code == 2 and "--from text" in result.stderr


def test_paragraphs_keep_headings_with_their_text():
    text = "# Title\n\n## Part\n\nBody one.\nStill one.\n\n\nBody two.\n\n# Trailing"
    assert list(paragraphs(text)) == ["# Title ## Part\nBody one.\nStill one.", "Body two.", "# Trailing"]


def test_a_text_file_imported_as_an_export_is_told_to_use_from_text(run, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("We take the night train on Friday.\n")
    result = run("import", str(path))
    assert result.exit_code == 2, result.output
    assert "not JSON" in result.stderr and f"smriti import {path} --from text" in result.stderr
    assert run("import", str(path), "--from", "text").exit_code == 0  # the suggestion works


def test_imported_text_is_embedded_in_windows_and_stored_with_those_vectors(make_context):
    """The store pipeline embeds one memory at a time; an import embeds its contents a window
    per call instead (an endpoint's round trip each), ahead, and stores exactly those vectors."""
    from smriti.cli.importers import items as importer
    from smriti.memory import Memory

    memory = Memory(make_context())
    calls: list[list[str]] = []
    embedder = memory.context.embedder
    original = embedder.embed_documents

    def counted(texts):
        calls.append(list(texts))
        return original(texts)

    embedder.embed_documents = counted  # the context's embedder, counted where it is called
    texts = [f"Note {n}: the build server {n} restarts at {n % 12} o'clock." for n in range(100)]
    counts = importer.store_items(memory, [importer.Item(text, "notes.txt") for text in texts])
    assert counts["stored"] == 100
    contents = [call for call in calls if set(call) <= set(texts)]
    windows = importer.embed_windows(100)
    assert [len(call) for call in contents] == [len(w) for w in windows] == [32, 64, 4]
    assert [text for call in contents for text in call] == texts  # each content once, none alone
    assert memory.context.embedder is embedder  # put back after the import
    stored = {r["content"]: r["embedding"] for r in memory.export_records() if r["kind"] == "engram"}
    for text in texts[:3]:
        assert stored[text] == pytest.approx(original([text])[0], abs=1e-6)


def test_embed_windows_grow_to_the_cap():
    from smriti.cli.importers.items import EMBED_WINDOW, FIRST_EMBED_WINDOW, embed_windows

    assert embed_windows(0) == []
    sizes = [len(w) for w in embed_windows(1000)]
    assert sizes[0] == FIRST_EMBED_WINDOW and max(sizes) == EMBED_WINDOW and sum(sizes) == 1000
    assert [w.start for w in embed_windows(1000)] == [sum(sizes[:i]) for i in range(len(sizes))]


@pytest.mark.parametrize("in_children", [True, False])
def test_a_minilm_import_stores_the_vectors_each_text_gets_alone(make_context, monkeypatch, in_children):
    """MiniLM embeds an import's windows in child processes (a small import: in a thread), its
    texts sorted by token count and batched: every memory still gets the vector its text gets
    embedded on its own."""
    from smriti.cli.importers import embedding
    from smriti.cli.importers import items as importer
    from smriti.memory import Memory
    from smriti.providers.minilm import MiniLMEmbeddings

    monkeypatch.setattr(embedding, "MIN_FOR_PROCESSES", 0 if in_children else 1000)
    model = MiniLMEmbeddings(batch_size=4)
    memory = Memory(make_context(embedder=model, embedding_dims=384))
    topics = [
        "the orders API",
        "Priya's garden",
        "the Lisbon trip",
        "our cat Miso",
        "the tax return",
        "the violin lesson",
        "the kitchen leak",
        "Bob's wedding",
        "the GPU cluster",
        "the marathon",
    ]
    short = [f"Remember {topic}." for topic in topics]
    long = [
        f"Note about {topic}: " + "it came up again in the long weekly meeting, " * (n + 1) + "done."
        for n, topic in enumerate(reversed(topics))
    ]
    texts = [text for pair in zip(short, long, strict=True) for text in pair]  # lengths mixed
    counts = importer.store_items(memory, [importer.Item(text, "notes.txt") for text in texts])
    assert counts["stored"] == 20
    stored = {r["content"]: r["embedding"] for r in memory.export_records() if r["kind"] == "engram"}
    for text in texts:
        assert stored[text] == pytest.approx(model.embed_query(text), abs=1e-5), text


def test_a_file_of_one_fact_per_line_is_a_memory_per_line(run, tmp_path):
    """No blank lines: split by lines (said on stderr), not refused as one long paragraph."""
    facts = [f"Fact {n}: the build server {n} restarts at {n % 12} o'clock." for n in range(40)]
    path = tmp_path / "facts.txt"
    path.write_text("\n".join(facts) + "\n")
    result = run("import", "--from", "text", str(path))
    assert result.exit_code == 0, result.output
    assert "imported 40 memories" in result.stdout
    assert "facts.txt by lines" in result.stderr and "--split" in result.stderr
    assert len([r for r in _export(run, tmp_path) if r["kind"] == "engram"]) == 40


def test_split_chooses_paragraphs_or_lines(run, tmp_path):
    path = tmp_path / "notes.md"
    path.write_text("# Trip\n\nWe take the night train.\nThe hotel is near Alfama.\n\nBring the camera.\n")
    by_lines = run("import", "--from", "text", "--split", "lines", str(path))
    assert by_lines.exit_code == 0, by_lines.output
    assert "imported 3 memories" in by_lines.stdout and "notes.md by lines" in by_lines.stderr
    texts = {r["content"] for r in _export(run, tmp_path) if r["kind"] == "engram"}
    assert "# Trip\nWe take the night train." in texts and "Bring the camera." in texts


def test_auto_keeps_paragraphs_where_blank_lines_separate_them():
    from smriti.cli.importers.text import lines, split_of

    assert split_of("one\ntwo\n", "auto") == "lines"
    assert split_of("one\ntwo\n\nthree\n", "auto") == "paragraphs"
    assert split_of("\n\none line\n\n", "auto") == "lines"  # blank lines only around the text
    assert list(lines("# Head\nfirst\n\nsecond\n")) == ["# Head\nfirst", "second"]


def test_the_cli_choices_are_the_importers_splits():
    from smriti.cli.commands import TextSplit
    from smriti.cli.importers import SPLITS

    assert tuple(TextSplit) == SPLITS


def test_progress_on_a_pipe_is_a_line_per_tenth_and_the_last_figure_is_the_whole_run(tmp_path):
    """A real `smriti import` with stderr on a pipe: ~10 progress lines, percentages rising to
    100, and a final rate that is the count over the run's seconds."""
    import re
    import subprocess
    import sys
    import time

    path = tmp_path / "facts.txt"
    path.write_text("\n".join(f"Fact {n}: service {n} runs in region {n % 7}." for n in range(120)) + "\n")
    env = {**__import__("os").environ, **offline_env(tmp_path / "store")}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "import", "--from", "text", str(path)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    percents = [int(m.group(1)) for m in re.finditer(r"imported \d+/120 memories \((\d+)%", done.stderr)]
    assert 8 <= len(percents) <= 11, done.stderr
    assert percents == sorted(set(percents)) and percents[-1] == 100, percents
    assert all(", eta " in line for line in done.stderr.splitlines() if "% " in line and "/120" in line)
    final = re.search(r"imported 120 memories in ([\d.]+) s \(([\d,.]+) memories/s\)", done.stderr)
    assert final is not None, done.stderr
    seconds, rate = float(final.group(1)), float(final.group(2).replace(",", ""))
    assert seconds <= wall and rate == pytest.approx(120 / seconds, rel=0.05)


def test_the_rate_counts_embedding_and_holds_steady_as_batches_land():
    """Embedded contents count before anything is stored, and the rate is measured on the work
    (the embedder's seconds, the stores'), so batches landing in lumps do not swing it: at a
    steady pace it stays within 30 % from the first batch to the end."""
    from smriti.cli.progress import ImportProgress

    now = [0.0]
    progress = ImportProgress(1000, clock=lambda: now[0])
    progress.lines = False  # counting only: nothing drawn
    now[0] = 4.0  # the embedder's two processes start (not averaged in)
    progress.add_embedded(32, seconds=32 * 0.04, workers=2)
    assert progress.stored == 0 and progress.percent() == 1
    first = progress.rate()
    assert first == pytest.approx(50.0)  # two processes at 40 ms a content, before any store
    rates, stored = [first], 0
    for size in (64, 128, 256, 256, 256, 8):  # the windows as they land, stores between them
        progress.add_embedded(size, seconds=size * 0.04, workers=2)
        for _ in range(min(size, 1000 - stored)):
            now[0] += 0.015
            progress.store_one(0.015)
            stored += 1
        rates.append(progress.rate())
    for _ in range(1000 - stored):
        progress.store_one(0.015)
    assert all(rate is not None for rate in rates)
    assert max(rates) / min(rates) < 1.3, rates
    assert progress.eta() == 0
    seconds = now[0]
    assert progress.final().startswith(
        f"imported 1000 memories in {seconds:.1f} s ({1000 / seconds:,.1f} memories/s)"
    )
