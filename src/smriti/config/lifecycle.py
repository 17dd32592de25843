"""Settings sections: how a memory is written (the store pipeline) and how it ages
(consolidation: decay, pruning, strengthening, Leiden clusters, indexes)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from smriti.config.section import Section


class StoreSettings(Section):
    """The store pipeline: how big a memory may be, when it is a duplicate, what it links to."""

    slug = "store"
    title = "Storing memories"

    max_content_chars: int = Field(
        default=20_000, ge=1, description="longest memory accepted, in characters (about 5,000 tokens)"
    )
    store_dedup_threshold: float = Field(
        default=0.95,
        gt=0,
        le=1,
        description=(
            "cosine at or above which a new memory of the same user is the same memory: the old "
            "one is reinforced and its tags merged, not copied (high: only near-identical text)"
        ),
    )
    associate_top_k: int = Field(
        default=5, ge=0, description="most similar memories a new one is linked to (AssociatedWith)"
    )
    associate_min_similarity: float = Field(
        default=0.3, ge=-1, le=1, description="cosine below which no AssociatedWith link is made"
    )


class ConsolidationSettings(Section):
    """The consolidate pipeline, which the server runs every CONSOLIDATION_INTERVAL: decay,
    prune, strengthen, orphan cues, Leiden clusters, indexes."""

    slug = "consolidation"
    title = "Consolidation"

    consolidation_interval: int = Field(
        default=3600,
        ge=0,
        description="seconds between the server's consolidations (hourly: decay is slow; 0: never)",
    )
    decay_half_life_days: float = Field(default=30.0, gt=0, description="decay_factor halves in this time")
    prune_threshold: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description=(
            "a memory whose decay_factor falls below this is deleted, unless important (about 130 "
            "days unused at the default half-life)"
        ),
    )
    important_threshold: float = Field(default=0.8, ge=0, le=1, description="never pruned at or above")
    strengthen_min_access: int = Field(
        default=5, ge=1, description="recalls that make a memory frequently used, and strengthened"
    )
    strengthen_boost: float = Field(
        default=0.1, ge=0, le=1, description="decay_factor a frequently used memory gains per consolidation"
    )
    index_threshold: int = Field(
        default=50, ge=0, description="engrams before HNSW/FTS indexes are built (below it a scan is as fast)"
    )
    leiden_retune_growth: float = Field(
        default=0.10,
        ge=0,
        description="the Leiden resolution is tuned again once the graph has grown by this share (10%)",
    )
    leiden_engine: Literal["igraph", "leidenalg"] = Field(
        default="igraph",
        description=(
            "what runs Leiden: igraph's own community_leiden, or leidenalg (the design's package: the "
            "same algorithm and quality, 11-16x the CPU; docs/recall.md, Consolidation and Leiden)"
        ),
    )
