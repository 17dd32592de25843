"""Smoke test of the every-shape benchmarks (``bench.notes``, ``bench.shapes``) on tiny slices.

The hashing embedder and a temporary cache folder; the stores built by the notes run are reused by
the shapes run, which must then give the same figures (no variant reinforces what it recalls).
Needs the shared benchmark data (../shared/bench or SMRITI_BENCH_DATA).
"""

from __future__ import annotations

import json
import math

import pytest

from bench.common import data_dir


def _has_data() -> bool:
    try:
        return (data_dir() / "locomo_public.json").is_file() and (data_dir() / "hotpotqa_500.jsonl").is_file()
    except SystemExit:
        return False


pytestmark = pytest.mark.skipif(not _has_data(), reason="benchmark data not found (set SMRITI_BENCH_DATA)")

VARIANT = "no conversation context"


def test_notes_data_are_facts_with_their_evidence():
    from bench.locomo import split_samples
    from bench.notes import conversation_notes, note_questions

    sample = split_samples("tune", 1)[0]
    notes = conversation_notes(sample)
    assert len(notes) == 184 and len({n.key for n in notes}) == len(notes)
    assert all(n.evidence and n.content and n.when.year == 2023 for n in notes)
    questions = note_questions(sample, notes)
    keys = {n.key for n in notes}
    assert questions and all(q.category in (1, 2, 3, 4) and set(q.relevant) <= keys for q in questions)
    # The README's held-out count: 446 questions of categories 1-4 have a relevant note.
    heldout = split_samples("heldout")
    assert sum(len(note_questions(s, conversation_notes(s))) for s in heldout) == 446


def test_notes_then_shapes_on_a_slice(tmp_path):
    from bench import notes, shapes

    cache = tmp_path / "cache"
    variants = tmp_path / "v.json"
    variants.write_text(json.dumps({VARIANT: {"context_weight": 0.0}}))
    common = ["--split", "tune", "--conversations", "1", "--questions", "6", "--cache-dir", str(cache)]
    out = notes.main([*common, "--variants", str(variants)])

    body, scores = out["body"], out["scores"]
    assert "### All, categories 1-4 (6 questions" in body
    assert (
        sum(f"### {name} (" in body for name in ("multi-hop", "temporal", "open-domain", "single-hop")) >= 2
    )
    assert out["systems"][:3] == ["defaults", VARIANT, notes.SMRITI_SEARCH]
    for system in out["systems"]:
        assert f"| {system} |" in body
        assert scores.count(system, notes.SCORED) == 6
        r1, r5, r10, h5 = (scores.mean(system, notes.SCORED, m) for m in ("R@1", "R@5", "R@10", "H@5"))
        assert 0.0 <= r1 <= r5 <= r10 <= 1.0 and r5 <= h5 <= 1.0, (system, r1, r5, r10, h5)
    assert scores.mean("defaults", notes.SCORED, "H@10") > 0, "Smriti should find some relevant notes"
    assert scores.mean(notes.DenseRetriever.name, notes.SCORED, "H@10") > 0
    index = cache / "notes-stores" / "hashing-conv-26" / "keys_of.json"
    built = index.stat().st_mtime_ns

    report = tmp_path / "shapes.json"
    got = shapes.main(
        [
            *common,
            *("--max-turns", "80", "--passage-questions", "6", "--labelled"),
            *("--variants", str(variants), "--json", str(report)),
        ]
    )
    assert index.stat().st_mtime_ns == built, "the notes store should be reused, not stored again"
    lines = got["table"].splitlines()
    for name in ("defaults", VARIANT):
        for shape in shapes.SHAPES:
            assert sum(line.startswith(f"| {name} | {shape} |") for line in lines) == 1, (name, shape)
    assert sum("min over shapes" in line for line in lines) == 1  # for the variant, not the defaults

    summary = json.loads(report.read_text())["variants"]
    assert list(summary) == ["defaults", VARIANT]
    assert set(summary["defaults"]["shapes"]) == set(shapes.SHAPES)
    for name, entry in summary.items():
        for shape, row in entry["shapes"].items():
            assert row["questions"] > 0, (name, shape)
            assert 0.0 <= row["R@5"] <= row["R@10"] <= 1.0, (name, shape, row)
            assert 0.0 <= row["H@1"] <= 1.0, (name, shape, row)
    # The same store, questions and settings as the notes run: the same figures.
    assert summary["defaults"]["shapes"]["notes"]["R@5"] == pytest.approx(
        scores.mean("defaults", notes.SCORED, "R@5")
    )
    assert summary["defaults"]["shapes"]["notes"]["Hit@5"] == pytest.approx(
        scores.mean("defaults", notes.SCORED, "H@5")
    )
    variant = summary[VARIANT]
    assert summary["defaults"]["shapes"]["notes"]["H@1"] == pytest.approx(
        scores.mean("defaults", notes.SCORED, "H@1")
    )
    for metric in ("H@1", "R@5", "R@10"):
        deltas = [row[f"delta {metric}"] for row in variant["shapes"].values()]
        assert all(math.isfinite(d) for d in deltas)
        assert variant["min delta"][metric] == min(deltas)
        for shape, row in variant["shapes"].items():
            base = summary["defaults"]["shapes"][shape][metric]
            assert row[f"delta {metric}"] == pytest.approx(row[metric] - base)


def test_every_shape_counts_whether_the_first_result_is_right():
    """H@1 is recorded whatever k's a benchmark reports (turns ask for 5 and 10 only), so every
    shape can be compared with search at the top."""
    from bench.common import RecallScores

    scores = RecallScores((5, 10))
    scores.record("recall", "g", ["a", "b"], [["x"], ["a"], ["b"]])
    scores.record("recall", "g", ["a"], [["y", "a"], ["x"]])  # a merged result standing for a
    scores.record("search", "g", ["a"], [["x"], ["a"]])
    assert [values["H@1"] for _, values in scores.rows["recall"]] == [0.0, 1.0]
    assert scores.mean("recall", ("g",), "H@1") == 0.5
    assert scores.mean("recall", ("g",), "R@5") == 1.0
    assert scores.mean("search", ("g",), "H@1") == 0.0


def test_tuning_recall_does_not_reinforce(tmp_path):
    """The variants must not shape each other: asking leaves every access count at zero."""
    from datetime import UTC, datetime

    from bench.tuning import Document, ask_variants, cached_store, open_memory
    from smriti.providers.hashing import HashingEmbeddings

    embedder, now = HashingEmbeddings(256), datetime(2026, 1, 1, tzinfo=UTC)
    documents = [
        Document("a", "Priya moved billing to Postgres."),
        Document("b", "Tom likes hiking in the Alps."),
        Document("c", "The billing service runs on Postgres 16."),
    ]
    keys_of = cached_store(tmp_path, "u", embedder, now, documents)
    assert sorted(k for keys in keys_of.values() for k in keys) == ["a", "b", "c"]

    class Q:
        text = "Where does billing run?"

    got: list[list[list[str]]] = []
    ask_variants(
        tmp_path, "u", embedder, now, keys_of, [Q()] * 3, {"defaults": {}}, lambda s, q, r: got.append(r)
    )
    assert len(got) == 3 and got[0] == got[1] == got[2] and got[0]
    with open_memory(tmp_path, "u", embedder, now) as memory:
        engrams = [r for r in memory.export_records() if r["kind"] == "engram"]
    assert len(engrams) == 3 and all(r["access_count"] == 0 for r in engrams)


def test_notes_through_mcp_slice(tmp_path):
    """The notes stored and asked through a real ``smriti-mcp``: a store per note (no source), one
    consolidate, recall then search per question."""
    from bench import notes_mcp
    from bench.notes import SCORED

    results = tmp_path / "RESULTS.md"
    out = notes_mcp.main(
        ["--split", "tune", "--conversations", "1", "--questions", "4", "--results", str(results)]
    )
    assert "## LoCoMo notes through MCP, tune conversations" in results.read_text()
    scores = out["scores"]
    for system in out["systems"]:
        assert scores.count(system, SCORED) == 4, system
        assert 0.0 <= scores.mean(system, SCORED, "R@1") <= scores.mean(system, SCORED, "R@10") <= 1.0
    assert scores.mean(notes_mcp.SMRITI_MCP, SCORED, "H@10") > 0, "recall should find some relevant notes"
    assert len(out["timing"]["mcp:store"]) == 184 and len(out["timing"]["mcp:search"]) == 4
