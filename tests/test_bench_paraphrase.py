"""The paraphrase benchmark (``bench/paraphrase/``, ``bench.paraphrase``): its data hold together and
its in-process runner gives figures in range on a slice (the hashing embedder, a temporary cache)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bench import paraphrase
from bench.paraphrase import DATA, KINDS, TWO_NOTE


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def test_notes_parse_with_unique_ids_and_known_kinds():
    notes = _rows("notes.jsonl")
    assert len(notes) >= 160
    assert len({n["id"] for n in notes}) == len(notes)
    assert len({n["content"] for n in notes}) == len(notes), "every note is a distinct fact"
    assert {n["kind"] for n in notes} == set(KINDS)
    assert min(Counter(n["kind"] for n in notes).values()) >= 10
    loaded = paraphrase.load_notes()
    assert [n.key for n in loaded] == [n["id"] for n in notes]
    assert all(n.when.year == 2026 and n.when.tzinfo is not None for n in loaded)


def test_questions_cover_every_note_and_point_at_real_notes():
    notes = {n["id"]: n for n in _rows("notes.jsonl")}
    questions = _rows("questions.jsonl")
    assert len({q["id"] for q in questions}) == len(questions)
    assert all(q["relevant"] and set(q["relevant"]) <= set(notes) for q in questions)
    paraphrased = [q for q in questions if q["kind"] != TWO_NOTE and not q["names_thing"]]
    named = [q for q in questions if q["names_thing"]]
    pairs = [q for q in questions if q["kind"] == TWO_NOTE]
    # One question per note (a few keep a person's name and count as naming the thing).
    asked = {q["relevant"][0] for q in questions if q["kind"] != TWO_NOTE and q["id"] <= f"q{len(notes):03d}"}
    assert asked == set(notes)
    assert len(paraphrased) >= 150 and len(named) >= 30 and len(pairs) >= 20
    assert all(len(set(q["relevant"])) == 2 for q in pairs)
    for q in questions:
        if q["kind"] != TWO_NOTE:
            assert len(q["relevant"]) == 1 and q["kind"] == notes[q["relevant"][0]]["kind"], q["id"]


def test_splits_are_halves_of_every_kind():
    questions = _rows("questions.jsonl")
    assert {q["split"] for q in questions} == {"tune", "heldout"}

    def gap(items) -> int:
        counts = Counter(q["split"] for q in items)
        return abs(counts["tune"] - counts["heldout"])

    assert gap(questions) <= 1
    assert gap([q for q in questions if q["names_thing"]]) <= 1
    for kind in (*KINDS, TWO_NOTE):
        assert gap([q for q in questions if q["kind"] == kind]) <= 2, kind
    # The rule that made them: (names_thing, kind, id) order, alternating.
    ordered = sorted(questions, key=lambda q: (q["names_thing"], q["kind"], q["id"]))
    assert [q["split"] for q in ordered] == ["tune" if i % 2 == 0 else "heldout" for i in range(len(ordered))]
    assert len(paraphrase.load_questions("tune")) + len(paraphrase.load_questions("heldout")) == len(
        questions
    )


def test_a_merged_note_is_not_found_through_its_sibling():
    scores = paraphrase.ParaphraseScores()
    question = paraphrase.Question("q", "who?", ("n002",), "config", False, "tune")
    scores.add("recall", question, [["n001", "n002"], ["n003"]])  # n002 was merged into n001's memory
    scores.add("search", question, [["n001"], ["n002"]])
    groups = paraphrase.select("tune")
    assert scores.mean("recall", groups, "R@10") == 0.0 and scores.mean("recall", groups, "MRR") == 0.0
    assert scores.mean("search", groups, "R@1") == 0.0 and scores.mean("search", groups, "R@5") == 1.0
    assert scores.mean("search", groups, "MRR") == 0.5
    assert scores.merged == {"n002"}


def test_runner_on_a_slice(tmp_path):
    out = paraphrase.main(["--split", "all", "--notes", "20", "--cache-dir", str(tmp_path)])
    scores, systems, body = out["scores"], out["systems"], out["body"]
    assert systems[:2] == ["defaults", paraphrase.SMRITI_SEARCH] and len(systems) == 6
    asked = paraphrase.load_questions("all", notes=paraphrase.load_notes(limit=20))
    assert len(asked) >= 20 and {q.split for q in asked} == {"tune", "heldout"}
    for split in ("tune", "heldout", "all"):
        assert f"### {split} questions" in body and f"#### top-1 (R@1), {split}" in body
    assert "| recall | search | BM25 | BM25 plain | dense | RRF |" in body
    every = paraphrase.select("all")
    for system in systems:
        assert scores.count(system, every) == len(asked), system
        r1, r5, r10, mrr = (scores.mean(system, every, m) for m in ("R@1", "R@5", "R@10", "MRR"))
        h1, h10 = scores.mean(system, every, "H@1"), scores.mean(system, every, "H@10")
        assert 0.0 <= r1 <= r5 <= r10 <= 1.0, (system, r1, r5, r10)
        assert h1 <= mrr <= h10, (system, h1, mrr, h10)
    assert scores.mean("defaults", every, "H@10") > 0.5, "recall should find most notes among 20"
    assert scores.mean(paraphrase.DenseRetriever.name, every, "H@10") > 0.5
    # A second run reuses the store kept in the cache and gives the same figures.
    index = tmp_path / paraphrase.STORES / "hashing-team-first20" / "keys_of.json"
    built = index.stat().st_mtime_ns
    again = paraphrase.main(["--split", "all", "--notes", "20", "--cache-dir", str(tmp_path)])
    assert index.stat().st_mtime_ns == built
    assert again["scores"].mean("defaults", every, "MRR") == pytest.approx(
        scores.mean("defaults", every, "MRR")
    )


def test_through_mcp_on_the_shared_path_slice(tmp_path):
    """The notes stored and asked through a real ``smriti-mcp`` relayed to the user's shared server,
    which the run stops at the end."""
    from bench import paraphrase_mcp

    results = tmp_path / "RESULTS.md"
    out = paraphrase_mcp.main(["--split", "heldout", "--notes", "12", "--results", str(results)])
    assert "## Paraphrase set (team notes asked in other words) through MCP, heldout" in results.read_text()
    assert "stdio served by the relay to the shared server" in out["body"] and "stopped pid" in out["body"]
    asked = paraphrase.load_questions("heldout", notes=paraphrase.load_notes(limit=12))
    scores, heldout = out["scores"], paraphrase.select("heldout")
    for system in out["systems"]:
        assert scores.count(system, heldout) == len(asked) > 0, system
        assert 0.0 <= scores.mean(system, heldout, "R@1") <= scores.mean(system, heldout, "R@10") <= 1.0
    assert scores.mean(paraphrase_mcp.SMRITI_MCP, heldout, "H@10") > 0, "recall should find some notes"
    assert len(out["timing"]["mcp:store"]) == 12 and len(out["timing"]["mcp:search"]) == len(asked)
