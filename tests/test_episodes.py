"""Episodes: the memories of one source on one day raise each other, and the final cut spreads
over episodes (nodes/scoring.py's formulas; nodes/associate.py's episode_context step)."""

from __future__ import annotations

from datetime import UTC, datetime

from smriti.nodes.scoring import episode_evidence, episode_of, episode_relevance, spread_over_episodes
from smriti.nodes.state import Candidate

DAY1 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
DAY2 = datetime(2023, 5, 25, 9, 0, tzinfo=UTC)


def _c(cid: str, relevance: float, source: str = "session_1", when: datetime = DAY1) -> Candidate:
    return Candidate(id=cid, relevance=relevance, source=source, created_at=when)


def test_an_episode_is_a_source_on_a_day():
    assert episode_of(_c("a", 1)) == episode_of(_c("b", 1, when=DAY1.replace(hour=20)))
    assert episode_of(_c("a", 1)) != episode_of(_c("b", 1, when=DAY2))
    assert episode_of(_c("a", 1)) != episode_of(_c("b", 1, source="session_2"))


def test_evidence_sums_the_best_few_so_length_does_not_win():
    long = [_c(f"l{i}", 0.2) for i in range(20)]
    short = [_c("s1", 0.5, "session_2"), _c("s2", 0.4, "session_2")]
    evidence = episode_evidence(long + short, top=3)
    assert evidence[episode_of(short[0])] == 0.9
    assert abs(evidence[episode_of(long[0])] - 0.6) < 1e-9  # 3 of 20 count, not 20 x 0.2 = 4.0


def test_relevance_rises_most_in_the_best_episode():
    assert episode_relevance(0.5, 1.0, 1.0, 0.5) == 0.75
    assert episode_relevance(0.5, 0.5, 1.0, 0.5) == 0.625
    assert episode_relevance(0.5, 0.0, 0.0, 0.5) == 0.5  # nothing to compare with: unchanged


def test_the_cut_spreads_over_episodes_and_fills_with_the_deferred():
    ranked = [_c("a1", 0.9), _c("a2", 0.8), _c("a3", 0.7), _c("b1", 0.6, "session_2"), _c("a4", 0.5)]
    assert [c.id for c in spread_over_episodes(ranked, 3, cap=2)] == ["a1", "a2", "b1"]
    assert [c.id for c in spread_over_episodes(ranked, 5, cap=2)] == ["a1", "a2", "b1", "a3", "a4"]
    assert [c.id for c in spread_over_episodes(ranked, 3, cap=0)] == ["a1", "a2", "a3"]  # 0: no cap
