"""Settings sections of recall: how candidates are found and fused, what raises or lowers
them, how they are scored, and the stages that are off by default.

Where a default was chosen by measurement, the description says so; the weights of issue 13
were chosen on LoCoMo conv-26/30 only and checked on the held-out conversations
(bench/RESULTS.md, "Associative recall"). A stage that adds less than 2 points of recall on the
held-out questions stays off by default (bench/RESULTS.md, "The graph's stages").
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from smriti.config.section import Section


class RecallSettings(Section):
    """Finding candidates: the three direct branches (cues, vectors, full text) and their rank
    fusion, and how many results a recall may ask for."""

    slug = "recall"
    title = "Recall: search and fusion"

    memory_fabric_max_results: int = Field(
        default=20,
        ge=1,
        le=1000,
        description="most results one recall may ask for (the original server's cap)",
    )
    vector_min_similarity: float = Field(
        default=0.0, ge=-1, lt=1, description="vector hits at or below this cosine are not candidates"
    )
    vector_relative_floor: float = Field(
        default=0.0,
        ge=0,
        lt=1,
        description=(
            "recall admits vector hits above this share of the best cosine (0: all; 0.6-0.85 gained nothing)"
        ),
    )
    fusion: Literal["hand", "learned"] = Field(
        default="hand",
        description=(
            "how the recall branches are fused: the hand-set FUSION_WEIGHT_* (chosen on turns, notes and "
            "passages at once), or the logistic model fitted on the same tuning parts (nodes/learned.py; "
            "it lost 3 points of R@5 on turns)"
        ),
    )
    fusion_weight_similarity: float = Field(
        default=0.5,
        ge=0,
        description=(
            "rank-fusion weight of vector search (the highest: chosen on turns, notes and passages at once, "
            "bench/shapes.py; with the offline hashing embedder, whose vectors are words, the unset "
            "FUSION_WEIGHT_* are text-led instead: 0.3 similarity, 0.5 text, 0.2 cue)"
        ),
    )
    fusion_weight_text: float = Field(default=0.3, ge=0, description="rank-fusion weight of full-text search")
    fusion_weight_cue: float = Field(default=0.1, ge=0, description="rank-fusion weight of cue traversal")
    fusion_weight_graph: float = Field(
        default=0.3, ge=0, description="rank-fusion weight of spreading activation (GRAPH_ACTIVATION)"
    )
    fusion_k: int = Field(default=5, ge=1, description="rank-fusion constant: weight / (k + rank)")
    fusion_score_share: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description="share of relevance from branch scores rather than ranks (0.3 of 0.3/0.6/1.0, measured)",
    )
    fusion_support: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description=(
            "share of the query's idf weight a full-text or cue hit must cover to vote fully in fusion; "
            "below it the hit's vote shrinks in proportion (0: off; 0.8 of 0.3/0.5/0.8/1.0, measured on "
            "every shape: held out, paraphrase R@5 +11 and top-1 +17.5 points, no shape below -1)"
        ),
    )
    query_hub_names: bool = Field(
        default=True,
        description="leave hub names (a speaker, the user: in >10% of memories) out of the query's embedding",
    )
    context_budget_chars: int = Field(
        default=2000,
        ge=100,
        description="`smriti context`: the block a prompt hook adds stays within this (about 500 tokens)",
    )


class FocusSettings(Section):
    """What raises or lowers a candidate after the search: the conversation around it, the
    entities the best candidates name (the bridge), and what the query names (focus)."""

    slug = "focus"
    title = "Recall: context, bridge and focus"

    context_weight: float = Field(
        default=1.6,
        ge=0,
        description=(
            "conversation context: share of relevance a turn passes to its neighbours (0: off; tuned)"
        ),
    )
    context_backward: float = Field(
        default=0.7,
        ge=0,
        description="conversation context passed to the turn before a seed, against 1 for the turn after it",
    )
    context_additive: bool = Field(
        default=False,
        description="context adds to a turn's own relevance (false: the larger of the two counts)",
    )
    context_seeds: int = Field(default=3, ge=0, description="best candidates whose neighbours are raised")
    # Bridge (nodes/relations.py): the best candidates name entities; the memories about those
    # entities (their subject) are raised by the naming candidate's relevance.
    bridge_weight: float = Field(
        default=0.5,
        ge=0,
        description="share of a candidate's relevance passed to memories about what it names (0: off)",
    )
    bridge_seeds: int = Field(
        default=3, ge=0, description="best candidates whose named entities are followed"
    )
    bridge_below_seed: bool = Field(
        default=True,
        description="a memory the bridge raises rises to the memory that named its subject at most",
    )
    bridge_max_links: int = Field(
        default=20,
        ge=1,
        description="entities linked to more memories than this are not followed (too general)",
    )
    # Query focus (nodes/refine.py): factors on relevance from what the parsed query names.
    entity_hint_weight: float = Field(
        default=0.2,
        ge=0,
        le=1,
        description="share of relevance that rests on the query's entities (0.2 of 0.2/0.3/0.5, measured)",
    )
    subject_weight: float = Field(
        default=0.33,
        ge=0,
        le=1,
        description="relevance lost by a memory about another entity than the one the query names",
    )
    intent_type_weight: float = Field(
        default=0.1, ge=0, le=1, description="relevance lost by a memory type that does not suit the intent"
    )
    focus_spares_nearest: bool = Field(
        default=True,
        description="focus never lowers the memory nearest the query in meaning for what it does not name",
    )
    time_window_weight: float = Field(
        default=0.5, ge=0, le=1, description="relevance lost outside the time window the query names"
    )


class ScoringSettings(Section):
    """The final score (docs/recall.md, step "score"): the composite profile or Memory Fabric's, the
    penalties of expanded results, recall's reinforcement and the Memory Fabric stages."""

    slug = "scoring"
    title = "Recall: scoring"

    scoring_profile: Literal["composite", "fabric"] = Field(
        default="composite",
        description=(
            "composite: similarity, recency, importance and decay; fabric: recency, relevance, authority"
        ),
    )
    score_weight_similarity: float = Field(default=0.4, ge=0, description="composite: weight of relevance")
    score_weight_recency: float = Field(default=0.2, ge=0, description="composite: weight of recency")
    score_weight_importance: float = Field(default=0.2, ge=0, description="composite: weight of importance")
    score_weight_decay: float = Field(default=0.2, ge=0, description="composite: weight of decay_factor")
    fabric_weight_recency: float = Field(default=0.3, ge=0, description="fabric: weight of recency")
    fabric_weight_relevance: float = Field(default=0.5, ge=0, description="fabric: weight of relevance")
    fabric_weight_authority: float = Field(
        default=0.2, ge=0, description="fabric: weight of source authority (cross-validation, graph entities)"
    )
    recency_half_life_days: float = Field(
        default=7.0,
        gt=0,
        description=(
            "recency halves every this many days of a memory's age (use counts through decay instead)"
        ),
    )
    hop_penalty: float = Field(
        default=0.7, gt=0, le=1, description="score factor per hop of an expanded result"
    )
    cross_cluster_penalty: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description=(
            "score factor of a hop result outside the query's seed cluster (penalised, never dropped)"
        ),
    )
    reinforce_boost: float = Field(
        default=0.05,
        ge=0,
        le=1,
        description="decay_factor a recalled memory gains (use keeps a memory alive)",
    )
    nearest_first_support: float = Field(
        default=0.3,
        ge=0,
        le=1,
        description=(
            "recall's first result is the memory nearest the query in meaning unless the first is a "
            "full-text or cue match covering this share of the query's idf weight, or focus found "
            "evidence against the nearest (0: off; 0.3 of 0.8/0.5/0.3 on every shape's tune part)"
        ),
    )
    memory_fabric_dedup_threshold: float = Field(
        default=0.85,
        gt=0,
        le=1,
        description=(
            "text similarity above which two results are one (the higher kept, marked cross_validated)"
        ),
    )
    memory_fabric_boost_factor: float = Field(
        default=1.2,
        ge=1,
        description="relevance factor of a result whose entities appear elsewhere in the graph",
    )


class StageSettings(Section):
    """Recall stages that are off by default: each one measured below the 2 points of recall a
    default stage must add (bench/RESULTS.md). Turn one on to try it on your own memories."""

    slug = "stages"
    title = "Recall stages off by default"

    # Multi-hop and the Memory Fabric traversal below: neither moved recall by a tenth of a
    # point on LoCoMo (tuning and held-out conversations) or HotpotQA (bench/RESULTS.md,
    # "The graph's stages").
    max_hops: int = Field(
        default=0,
        ge=0,
        le=5,
        description="multi-hop over AssociatedWith (0: off; 2 turns it on; measured +0.0)",
    )
    # Spreading activation: on LoCoMo it lost R@5 (bench/RESULTS.md, ablation) and costs a store
    # read of up to ACTIVATION_MAX_ENGRAMS engrams per recall; see README, "Associative recall".
    graph_activation: bool = Field(
        default=False,
        description="spreading activation (PPR) as a recall branch (off: it lost R@5 on LoCoMo)",
    )
    activation_damping: float = Field(
        default=0.5, gt=0, lt=1, description="PPR: probability of following an edge"
    )
    activation_seeds: int = Field(default=10, ge=1, description="best direct hits the activation restarts at")
    activation_max_engrams: int = Field(
        default=200, ge=0, description="engrams reached through cues, at most"
    )
    activation_new: int = Field(
        default=30, ge=0, description="engrams the activation adds as candidates, at most"
    )
    activation_max_cue_share: float = Field(
        default=0.05, gt=0, le=1, description="cues encoding more than this share of memories do not spread"
    )
    activation_association_weight: float = Field(
        default=1.0, ge=0, description="weight of AssociatedWith edges against EncodedBy edges"
    )
    # Episodes (nodes/associate.py): the memories of one source on one day are an episode; a
    # candidate's relevance rises with the evidence its episode holds, and the final cut keeps
    # at most MAX_PER_EPISODE results of one episode before the rest of the memory has its turn.
    episode_weight: float = Field(
        default=0.0,
        ge=0,
        description=(
            "how much a candidate's episode's evidence raises its relevance (0: off; measured below 2 points)"
        ),
    )
    episode_evidence: int = Field(
        default=3, ge=1, description="best candidates of an episode whose relevance counts as its evidence"
    )
    max_per_episode: int = Field(
        default=0,
        ge=0,
        description="results of one episode before others have their turn (0: no cap)",
    )
    # Memory Fabric traversal entity -> relation -> entity (nodes/relations.py).
    relation_traversal: bool = Field(
        default=False,
        description="follow RelatesTo from the query's entities (Memory Fabric traversal; measured +0.0)",
    )
    relation_depth: int = Field(default=2, ge=0, le=4, description="relations followed from a query entity")
    relation_seeds: int = Field(
        default=8, ge=1, description="query entities (and frontier entities) per depth"
    )
    relation_max_edges: int = Field(
        default=30, ge=1, description="RelatesTo edges read per depth, newest first"
    )
    relation_new: int = Field(
        default=10, ge=0, description="memories the traversal adds as candidates, at most"
    )
    relation_weight: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="a traversal candidate's relevance is at least best direct relevance * weight ** depth",
    )
