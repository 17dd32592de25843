"""What every node sees: the run's context, its typed state, the recall candidate, the trace.

This is the bottom layer of the pipelines: nodes import it, ``pipelines/`` wires nodes into
graphs, and nothing here imports either. A node is ``def step(state, runtime:
Runtime[MemoryContext]) -> dict`` returning only the keys it changes; the :func:`traced`
decorator appends its one :class:`TraceEntry`.

The states are TypedDicts with separate input and output schemas, so a caller (or a parent
graph using a pipeline as a subgraph) never sees internal channels. Channels written by the
recall graph's parallel branches use merging reducers.
"""

from __future__ import annotations

import functools
import inspect
import operator
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NotRequired, TypedDict, cast

import numpy as np

from smriti.nodes.learned import shipped_model
from smriti.nodes.reinforcement import Reinforcer
from smriti.nodes.scoring import Fusion, ScoringProfile, build_fusion, build_profile
from smriti.stores.base import NO_CLUSTER, utcnow

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

    from smriti.config import Settings
    from smriti.nodes.leiden import LeidenEngine
    from smriti.providers.rerank import Reranker
    from smriti.stores.base import Cue, Engram, GraphStore


# ----------------------------------------------------------------------------- context
@dataclass
class ContextCache:
    """What one context keeps between runs, for its one user's memory.

    Attributes:
        leiden: the Leiden engine and its tuned resolution (nodes/cluster.py).
        indexes_ready: every search index is built, so the store pipeline's lazy check skips
            the store call (nodes/index.py, nodes/link.py).
        recent_by_source: the latest memories stored per source, newest first (nodes/link.py).
    """

    leiden: LeidenEngine | None = None
    indexes_ready: bool = False
    recent_by_source: dict[str, deque[str]] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget everything: after a restore, all of it describes a memory that is gone."""
        self.leiden, self.indexes_ready = None, False
        self.recent_by_source.clear()


@dataclass
class MemoryContext:
    """Everything a pipeline run needs, passed to each graph run as ``context=``.

    Nothing is global: a context is built once (by the server's lifespan, the CLI, a
    notebook or a test; ``smriti.pipelines.context.build_context`` does it from settings).
    Tests swap in fake models and a frozen clock by building the dataclass themselves.

    Attributes:
        store: the accessing user's graph store.
        embedder: any LangChain ``Embeddings``.
        llm: a LangChain chat model, or None to use the offline heuristic analysis.
        settings: validated settings (weights, thresholds).
        clock: returns "now" (UTC); tests and benchmarks replace it.
        write_lock: serialises writes; embedded databases allow one writer at a time.
        cache: what the context keeps between runs (:class:`ContextCache`).
        reranker: the optional cross-encoder (RERANKER), None when off.
    """

    store: GraphStore
    embedder: Embeddings
    settings: Settings
    llm: BaseChatModel | None = None
    # The chat model the analysis queue calls (built without client retries: the queue retries
    # with backoff and Retry-After itself); None: ``llm``.
    analyst: BaseChatModel | None = None
    clock: Callable[[], datetime] = utcnow
    write_lock: threading.RLock = field(default_factory=threading.RLock)
    cache: ContextCache = field(default_factory=ContextCache)
    reranker: Reranker | None = None
    _scoring: tuple[Settings, ScoringProfile] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _reinforcer: Reinforcer | None = field(default=None, init=False, repr=False, compare=False)
    _fusion: tuple[Settings, Fusion] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def scoring(self) -> ScoringProfile:
        """The recall scoring profile, built once per settings object.

        Rebuilt only when ``settings`` is replaced (the benchmark's ablation swaps them).
        """
        built = self._scoring
        if built is None or built[0] is not self.settings:
            built = self._scoring = (self.settings, build_profile(self.settings))
        return built[1]

    @property
    def reinforcer(self) -> Reinforcer:
        """Writes recall's reinforcement without waiting behind other writers (built once)."""
        if self._reinforcer is None:
            self._reinforcer = Reinforcer(self.store, self.write_lock, self.settings.reinforce_boost)
        return self._reinforcer

    @property
    def fusion(self) -> Fusion:
        """The branch weights of rank fusion (or, with FUSION=learned, the fitted model), built
        once per settings object (as ``scoring``)."""
        built = self._fusion
        if built is None or built[0] is not self.settings:
            model = shipped_model() if self.settings.fusion == "learned" else None
            lexical = bool(getattr(self.embedder, "lexical", False))  # the hashing embedder
            built = self._fusion = (self.settings, build_fusion(self.settings, model, lexical))
        return built[1]

    def close(self) -> None:
        if self._reinforcer is not None:
            self._reinforcer.close()
        self.store.close()


# A long background write (consolidation) takes the write lock a chunk at a time; between two
# chunks it sleeps this long, so a thread waiting for the lock (a recall's reinforcement) takes it
# then rather than after the whole pass (a lock has no queue: the releasing thread could take
# it straight back).
PAUSE_SECONDS = 0.002


def pause() -> None:
    """Let threads waiting for the write lock in (see PAUSE_SECONDS)."""
    time.sleep(PAUSE_SECONDS)


# ----------------------------------------------------------------------------- trace
class TraceCandidate(TypedDict):
    id: str
    score: float


class TraceEntry(TypedDict):
    """One step of a run: which node, how long, its candidates (best first, capped), a note."""

    node: str
    ms: float
    candidates: list[TraceCandidate]
    notes: str


MAX_TRACE_CANDIDATES = 25


def _entry(name: str, started: float, update: dict[str, Any]) -> TraceEntry:
    candidates = update.pop("_candidates", [])[:MAX_TRACE_CANDIDATES]
    return {
        "node": name,
        "ms": round((time.perf_counter() - started) * 1000, 3),
        "candidates": [{"id": c["id"], "score": round(float(c["score"]), 6)} for c in candidates],
        "notes": update.pop("_notes", ""),
    }


def traced[F: Callable[..., Any]](func: F) -> F:
    """Wrap a node (sync or async) so it appends one timed :class:`TraceEntry`, named after the
    function: a node's name in its pipeline, in its trace and in its code is one name.

    The node may return two private keys that go into the entry instead of the state:
    ``_candidates`` (a list of ``{"id", "score"}``) and ``_notes`` (one line of prose).
    """
    name = func.__name__
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def async_node(state: Any, runtime: Any) -> dict[str, Any]:
            started = time.perf_counter()
            update = dict(await func(state, runtime) or {})
            update["trace"] = [_entry(name, started, update)]
            return update

        return cast(F, async_node)

    @functools.wraps(func)
    def node(state: Any, runtime: Any) -> dict[str, Any]:
        started = time.perf_counter()
        update = dict(func(state, runtime) or {})
        update["trace"] = [_entry(name, started, update)]
        return update

    return cast(F, node)


def trace_scores(candidates: Sequence[Candidate], attribute: str = "relevance") -> list[TraceCandidate]:
    """``[{"id", "score"}]`` of candidates for a trace entry, scored by ``attribute``."""
    return [{"id": c.id, "score": getattr(c, attribute)} for c in candidates]


# ----------------------------------------------------------------------------- recall candidate
class Hit(TypedDict, total=False):
    """What the direct branches found for one engram; each branch writes its own keys."""

    similarity: float  # vector branch: cosine
    text_score: float  # full-text branch: normalised to (0, 1]
    cue_score: float  # cue branch: idf-weighted share of the query's cues
    matched_cues: list[str]
    origins: list[str]  # which branches found it: cue, vector, fulltext (hop, list later)


@dataclass(slots=True)
class Candidate:
    """One engram on its way through recall: its fields, its signals, then its score.

    Filled in stages: the engram's fields and the branch signals at gather (or hop);
    ``relevance`` and ``ranks`` by fusion; ``cross_validated``, ``merged_ids``, ``boosted``,
    ``cross_references`` and ``graph_relations`` by the Memory Fabric stages; ``score`` and
    ``components`` by the scoring profile.
    """

    id: str
    # the engram
    text: str = ""
    summary: str = ""
    memory_type: str = "episodic"
    importance: float = 0.5
    access_count: int = 0
    created_at: datetime = field(default_factory=utcnow)
    last_accessed_at: datetime = field(default_factory=utcnow)
    decay_factor: float = 1.0
    embedding: np.ndarray | Sequence[float] | None = None  # float32 array when loaded by recall
    source: str = ""
    tags: str = ""
    cluster_id: int = NO_CLUSTER
    superseded_by: str = ""  # the newer memory that corrects this one (nodes/refine.py, nodes/rank.py)
    facts: list[str] = field(default_factory=list)  # the atomic facts its LLM analysis found
    entities: list[str] = field(default_factory=list)  # cue names, sorted
    entity_types: dict[str, str] = field(default_factory=dict)  # cue name -> cue type
    # the direct signals (see Hit) and how it was reached
    similarity: float = 0.0
    text_score: float = 0.0
    cue_score: float = 0.0
    graph_score: float = 0.0  # spreading activation (nodes/pagerank.py)
    matched_cues: list[str] = field(default_factory=list)
    # idf-weighted share of the query's cues its words or cues match (1 when not measured):
    # how much a full-text or cue hit says, not only that it matched (nodes/scoring.support_factor)
    coverage: float = 1.0
    origins: list[str] = field(default_factory=list)
    hops: int = 0
    via: str | None = None  # the engram a hop result was reached from
    focus: dict[str, float] = field(default_factory=dict)  # query focus factors (nodes/refine.py)
    rerank_score: float | None = None  # the reranker's score, when one ran (nodes/refine.py)
    # fusion
    relevance: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)  # branch -> rank among its direct hits
    fused: dict[str, float] = field(default_factory=dict)  # learned fusion: feature -> w * x (explain)
    # Memory Fabric
    cross_validated: bool = False
    merged_ids: list[str] = field(default_factory=list)
    boosted: bool = False
    cross_references: list[str] = field(default_factory=list)
    graph_relations: list[dict[str, Any]] = field(default_factory=list)
    relation_paths: list[dict[str, Any]] = field(default_factory=list)  # nodes/relations.py
    # scoring
    score: float = 0.0
    components: dict[str, float] = field(default_factory=dict)

    @property
    def tie(self) -> tuple[datetime, str, str]:
        """How two equally scored candidates are ordered: the older memory first, then by content,
        the id last. Ids are random, so a tie broken by id alone ranked two stores of the same
        content differently (322 of 776 LoCoMo questions), and reinforcement amplified it."""
        return self.created_at, self.text, self.id

    def copy(self) -> Candidate:
        """A shallow copy (as ``copy.copy``; lists and dicts shared), made field by field (see
        :func:`_compile_copy`): ``copy.copy`` and ``dataclasses.replace`` cost 10-20 us on this
        many slots, and recall copies every candidate two or three times (~200 copies a
        question) so each step's output stays as it was."""
        return _copy_candidate(self)

    @classmethod
    def from_engram(
        cls,
        engram: Engram,
        cues: Sequence[Cue],
        hit: Hit | None = None,
        vector: np.ndarray | None = None,
    ) -> Candidate:
        """A candidate for ``engram`` with its cues as entities and the signals found so far.

        ``vector`` is the embedding as a float32 array when the store read it so
        (:class:`~smriti.stores.base.RecallRow`); otherwise ``engram.embedding`` is converted.
        """
        hit = hit or {}
        if vector is None and engram.embedding is not None:
            vector = np.asarray(engram.embedding, dtype=np.float32)
        return cls(
            id=engram.id,
            text=engram.content,
            summary=engram.summary,
            memory_type=engram.memory_type,
            importance=engram.importance,
            access_count=engram.access_count,
            created_at=engram.created_at,
            last_accessed_at=engram.last_accessed_at,
            decay_factor=engram.decay_factor,
            embedding=vector,
            source=engram.source,
            tags=engram.tags,
            cluster_id=engram.cluster_id,
            superseded_by=engram.superseded_by,
            facts=engram.fact_list(),
            entities=sorted(c.name for c in cues),
            entity_types={c.name: c.cue_type for c in cues},
            similarity=float(hit.get("similarity", 0.0)),
            text_score=float(hit.get("text_score", 0.0)),
            cue_score=float(hit.get("cue_score", 0.0)),
            matched_cues=list(hit.get("matched_cues", [])),
            origins=list(hit.get("origins", [])),
        )


_CANDIDATE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Candidate))


def _compile_copy() -> Callable[[Candidate], Candidate]:
    """Candidate.copy's body: one attribute assignment per field, written out from the fields
    once (as ``dataclasses`` writes ``__init__``). 0.8 us a copy, against 9 us for a loop of
    ``setattr`` over the field names: ~1.5 ms of a recall at 10k."""
    assignments = "".join(f"    new.{name} = old.{name}\n" for name in _CANDIDATE_FIELDS)
    source = f"def copy(old):\n    new = new_object(Candidate)\n{assignments}    return new\n"
    namespace: dict[str, Any] = {"new_object": object.__new__, "Candidate": Candidate}
    exec(source, namespace)  # the source is built from field names only
    return cast(Callable[[Candidate], Candidate], namespace["copy"])


_copy_candidate = _compile_copy()


# ----------------------------------------------------------------------------- reducers
def merge_dicts(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for channels that parallel branches fill in side by side."""
    merged = dict(left or {})
    merged.update(right or {})
    return merged


def merge_hits(left: Mapping[str, Hit] | None, right: Mapping[str, Hit] | None) -> dict[str, Hit]:
    """Reducer for recall hits: branches may find the same engram, so merge per id.

    Scores are kept per signal (each branch writes its own keys); ``origins`` lists are joined.
    """
    merged: dict[str, Hit] = {key: cast(Hit, dict(value)) for key, value in (left or {}).items()}
    for engram_id, hit in (right or {}).items():
        current = merged.setdefault(engram_id, {})
        origins = list(current.get("origins", []))
        for key, value in hit.items():
            if key == "origins":
                origins.extend(o for o in cast(list[str], value) if o not in origins)
            else:
                current[key] = value  # type: ignore[literal-required]
        current["origins"] = origins
    return merged


# ----------------------------------------------------------------------------- store
class StoreInput(TypedDict):
    content: str
    importance: NotRequired[float]
    tags: NotRequired[str]
    source: NotRequired[str]
    created_at: NotRequired[str]  # ISO time of the memory (imports, benchmarks); default now
    occurred_at: NotRequired[str]  # ISO time of the event remembered; stored as the memory's time
    supersedes: NotRequired[str]  # id of an older memory this one corrects (nodes/refine.py, nodes/rank.py)


class StoreOutput(TypedDict):
    id: str
    memory_type: str
    cues: list[dict[str, str]]  # [{"name", "type"}]
    cluster_id: int
    deduplicated: bool
    superseded: list[str]
    analysis_queued: bool
    trace: list[TraceEntry]


class StoreState(StoreInput, total=False):
    analysis: dict[str, Any]  # summary, memory_type, cues, relations, analyzer
    embedding: list[float]
    duplicate_of: str | None
    similar: list[dict[str, Any]]  # [{"id", "score"}] nearest existing engrams
    id: str
    # The new memory's time (ISO), as ``write`` stored it: later steps read it here, not back
    # from the store (a Cypher store's batch sends the writes at the store's end).
    stored_at: str
    links: dict[str, float]  # associated engram id -> strength, as written by associate
    superseded: list[str]  # older memories this one marked superseded_by it (nodes/refine.py, nodes/rank.py)
    analysis_queued: bool  # the LLM's analysis runs later, from the queue (nodes/enrich.py)
    memory_type: str
    cues: list[dict[str, str]]
    cluster_id: int
    deduplicated: bool
    trace: Annotated[list[TraceEntry], operator.add]


# ----------------------------------------------------------------------------- recall
class RecallInput(TypedDict):
    query: NotRequired[str]
    limit: NotRequired[int]
    mode: NotRequired[str]  # validators.RecallMode once validated
    memory_type: NotRequired[str | None]
    explain: NotRequired[bool]
    include_superseded: NotRequired[bool]  # superseded memories too, demoted (nodes/refine.py, nodes/rank.py)


class RecallOutput(TypedDict):
    result: dict[str, Any]  # the unified result format (docs/tools.md)
    trace: list[TraceEntry]


class RecallState(RecallInput, total=False):
    parsed: dict[str, Any]  # cues, entity_hints, intent, keywords
    recognised: dict[str, Any]  # the query's cues in the graph: counts, total, hubs
    query_embedding: list[float]
    hits: Annotated[dict[str, Hit], merge_hits]  # engram id -> signals, merged across branches
    candidates: list[Candidate]  # after gather, best relevance first; hops appended
    branch_scores: dict[str, list[float]]  # per signal, the direct hits' scores best first (rank fusion)
    seed_cluster: int
    results: list[Candidate]  # scored top ``limit``, best first
    result: dict[str, Any]
    trace: Annotated[list[TraceEntry], operator.add]


# ----------------------------------------------------------------------------- consolidate
class ConsolidateInput(TypedDict):
    now: NotRequired[str]  # ISO time to consolidate at (simulations); default the context clock


class ConsolidateOutput(TypedDict):
    report: dict[str, Any]
    trace: list[TraceEntry]


class ConsolidateState(ConsolidateInput, total=False):
    report: Annotated[dict[str, Any], merge_dicts]
    trace: Annotated[list[TraceEntry], operator.add]
