"""Scoring profiles: built from settings, and every score within the profile's own bounds.

The shortlist drops a candidate whose upper bound is below the others' lower bounds, so a
score outside its bounds would silently lose results that could have reached the top.
"""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smriti.nodes.scoring import (
    SIMILARITY,
    CompositeProfile,
    CompositeWeights,
    FabricProfile,
    FabricWeights,
    Shaping,
    build_profile,
)
from smriti.nodes.state import Candidate

NOW = datetime(2026, 1, 15, tzinfo=UTC)
# Bounds and score multiply the same factors in another order: allow float rounding only.
ROUNDING = 1e-9

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
weight = st.floats(min_value=0.0, max_value=2.0, allow_nan=False)
shapings = st.builds(
    Shaping,
    hop_penalty=st.floats(min_value=0.01, max_value=1.0),
    cross_cluster_penalty=st.floats(min_value=0.01, max_value=1.0),
    recency_half_life_days=st.floats(min_value=0.1, max_value=365.0),
    boost_factor=st.floats(min_value=1.0, max_value=3.0),
)
profiles = st.one_of(
    st.builds(CompositeProfile, st.builds(CompositeWeights, weight, weight, weight, weight), shapings),
    st.builds(FabricProfile, st.builds(FabricWeights, weight, weight, weight), shapings),
)


@st.composite
def candidates(draw):
    return Candidate(
        id="c",
        relevance=draw(unit),
        importance=draw(unit),
        decay_factor=draw(unit),
        created_at=NOW - timedelta(days=draw(st.floats(min_value=-30, max_value=3000))),
        hops=draw(st.integers(min_value=0, max_value=3)),
        cluster_id=draw(st.integers(min_value=-1, max_value=3)),
    )


@settings(max_examples=300, deadline=None)
@given(
    profile=profiles,
    candidate=candidates(),
    seed=st.integers(min_value=-1, max_value=3),
    boosted=st.booleans(),
    cross_validated=st.booleans(),
)
def test_every_score_lies_within_its_profiles_bounds(profile, candidate, seed, boosted, cross_validated):
    low, high = profile.bounds(candidate, seed, NOW)  # taken at the shortlist, before dedupe and boost
    # What dedupe and cross_reference may do afterwards: merge (cross_validated) and boost.
    candidate.cross_validated = cross_validated
    if boosted:
        candidate.boosted = True
        candidate.relevance *= profile.shaping.boost_factor
    value, _ = profile.score(candidate, NOW, seed)
    assert low - ROUNDING <= value <= high + ROUNDING
    assert 0.0 <= low <= high


@given(candidate=candidates())
def test_similarity_profile_is_the_relevance(candidate):
    assert SIMILARITY.score(candidate, NOW, -1) == (candidate.relevance, {})
    assert SIMILARITY.bounds(candidate, -1, NOW) == (candidate.relevance, candidate.relevance)


def test_profiles_are_built_from_settings_with_the_design_defaults(settings):
    composite = build_profile(settings)
    assert isinstance(composite, CompositeProfile) and composite.name == "composite"
    assert composite.weights == CompositeWeights(0.4, 0.2, 0.2, 0.2)
    assert composite.shaping == Shaping(0.7, 0.5, 7.0, 1.2)
    fabric = build_profile(settings.model_copy(update={"scoring_profile": "fabric"}))
    assert isinstance(fabric, FabricProfile) and fabric.name == "fabric"
    assert fabric.weights == FabricWeights(0.3, 0.5, 0.2)


def test_composite_profile_divides_by_the_boost_ceiling_and_keeps_raw_components():
    profile = CompositeProfile(CompositeWeights(0.4, 0.2, 0.2, 0.2), Shaping(0.7, 0.5, 7.0, 1.2))
    top = Candidate("c", relevance=1.0, importance=1.0, decay_factor=1.0, created_at=NOW)
    value, parts = profile.score(top, NOW, -1)
    assert value == pytest.approx(1.0 / 1.2)
    assert parts["similarity"] == pytest.approx(0.4) and parts["hop_factor"] == 1.0


def test_context_builds_the_profile_once_per_settings(make_context):
    context = make_context()
    assert context.scoring is context.scoring
    context.settings = context.settings.model_copy(update={"scoring_profile": "fabric"})
    assert context.scoring.name == "fabric"
