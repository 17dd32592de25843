"""The GraphStore protocol, composed of the typed parts of ``stores/parts.py``, and the data
model shared by every backend.

A store is opened for exactly one user: isolation (a file, a database, a graph or a
``user`` property) is the backend's business, so no method takes a user argument and no
pipeline can forget to filter by one.

Optional abilities are flags on :class:`Capabilities`; where a backend lacks one (a vector
index on LadybugDB offline, say) the backend falls back by itself and says so once in the
log, so pipelines never branch on the backend.
"""

from __future__ import annotations

import abc
import functools
import re
import typing
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

# Re-exported: the user-name rule lives with the settings (cheap to import: the stdio relay
# checks a name before it loads numpy), and these errors were defined here before errors.py
# held them all.
from smriti.config import validate_user_name as validate_user_name
from smriti.errors import EmbeddingMismatchError as EmbeddingMismatchError
from smriti.errors import StoreError as StoreError
from smriti.errors import UnsafeUserError as UnsafeUserError
from smriti.stores.parts import (
    PARTS,
    AssociationPart,
    ClusterPart,
    CuePart,
    EngramPart,
    MetaPart,
    RecordPart,
    SearchPart,
    methods,
)

# Re-exported: defined with the input checks, which the CLI imports without numpy or the settings.
from smriti.validators import CONTROL_CHARACTERS as _CONTROL
from smriti.validators import MAX_CUE_NAME as MAX_CUE_NAME
from smriti.validators import MEMORY_TYPES as MEMORY_TYPES
from smriti.validators import MemoryType as MemoryType
from smriti.validators import clean_label as clean_label

NO_CLUSTER = -1
# Metadata keys of the LLM analysis queue: one per queued memory (see stores/queue.py).
ANALYSIS_QUEUE_PREFIX = "analysis-queue/"


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    # Random (v4), so the start of an id identifies a memory (`smriti forget 3f2a…`); recall
    # breaks score ties by creation time and content instead (nodes/state.py, Candidate.tie).
    return str(uuid.uuid4())


_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=1 << 16)
def normalise_cue_name(name: str) -> str:
    """Cue names are compared lower-cased with single hyphens for inner spaces, without control
    characters and at most MAX_CUE_NAME characters long.

    Cached: the same few thousand names come back on every store and ~40 times per memory
    in an import (measured: 1.5 s of a 10k-memory import before the cache).
    """
    return _SPACES.sub("-", _CONTROL.sub(" ", name).strip().lower())[:MAX_CUE_NAME]


@dataclass(slots=True)
class Engram:
    """One memory."""

    content: str
    id: str = field(default_factory=new_id)
    summary: str = ""
    memory_type: str = "episodic"
    importance: float = 0.5
    access_count: int = 0
    created_at: datetime = field(default_factory=utcnow)
    last_accessed_at: datetime = field(default_factory=utcnow)
    decay_factor: float = 1.0
    embedding: list[float] | None = None
    source: str = ""
    tags: str = ""
    cluster_id: int = NO_CLUSTER
    # The id of the newer memory that corrects this one ("" while it is current): history is
    # kept, recall ranks the current fact first (nodes/supersede.py).
    superseded_by: str = ""
    # The atomic facts the memory states, one per line, from its LLM analysis ("" until that
    # lands, or without a model): shown with the memory and part of its keyword-searchable text.
    facts: str = ""

    def tag_list(self) -> list[str]:
        return [t for t in (part.strip() for part in self.tags.split(",")) if t]

    def fact_list(self) -> list[str]:
        return [f for f in (line.strip() for line in self.facts.splitlines()) if f]


@dataclass(slots=True)
class Cue:
    """An entity or keyword that encodes engrams. ``name`` is normalised and unique per user."""

    name: str
    cue_type: str = "keyword"
    id: str = field(default_factory=new_id)
    embedding: list[float] | None = None


@dataclass(slots=True, frozen=True)
class Association:
    """(Engram)-[:AssociatedWith]->(Engram)."""

    source_id: str
    target_id: str
    strength: float
    relation_type: str = "similar"
    created_at: datetime = field(default_factory=utcnow)


@dataclass(slots=True, frozen=True)
class Relation:
    """(Cue)-[:RelatesTo {relation}]->(Cue), e.g. database-engineer -recommends-> cursor-pagination."""

    source: str  # cue name
    relation: str
    target: str  # cue name
    engram_id: str = ""
    created_at: datetime = field(default_factory=utcnow)


def checked_cue_name(name: str) -> str:
    """The normalised cue name.

    Raises:
        ValueError: the name is empty once normalised.
    """
    normalised = normalise_cue_name(name)
    if not normalised:
        raise ValueError("a cue name cannot be empty")
    return normalised


def check_dims(embedding: Sequence[float] | None, dims: int, what: str) -> None:
    """Raises EmbeddingMismatchError when ``embedding`` is not ``dims`` long."""
    if embedding is not None and len(embedding) != dims:
        raise EmbeddingMismatchError(
            f"{what} has {len(embedding)} dimensions but this store holds {dims} (EMBEDDING_DIMS)"
        )


def mismatch_message(path: Path, stored: int, wanted: int, configured: str | None = None) -> str:
    """Why an embedded store written with ``stored`` dimensions cannot be opened with ``wanted``.

    ``configured`` says where ``wanted`` comes from, naming only what the user set (see
    :func:`smriti.providers.models.dims_origin`); by default the embedder configured.
    """
    origin = configured or f"the embedder configured makes {wanted}-dimensional ones"
    return (
        f"{path} was written with {stored}-dimensional embeddings, but {origin}. "
        f"Use the embedding model and EMBEDDING_DIMS={stored} it was created with, or move to the "
        f"new model: export with the old settings (`smriti export`), start a new store (another "
        f"STORAGE_LOCATION, or move {path.name} aside), and store the exported content again with "
        f"the new model (`smriti store`). Do not `smriti import` it into the new store: import copies "
        f"the old {stored}-dimensional embeddings and would be refused."
    )


def distinct_cues(
    cues: Sequence[Cue], check_embedding: Callable[[Cue, str], object]
) -> tuple[list[str], dict[str, Cue]]:
    """``upsert_cues``' first step on every backend: the normalised name of each cue given, in
    order, and the first cue of each name, each checked once by ``check_embedding(cue, name)``.

    Raises:
        ValueError: a cue name that is empty once normalised (before anything is checked).
    """
    names = [checked_cue_name(cue.name) for cue in cues]
    wanted: dict[str, Cue] = {}
    for name, cue in zip(names, cues, strict=True):
        if name not in wanted:
            check_embedding(cue, name)
            wanted[name] = cue
    return names, wanted


def checked_relation(relation: Relation) -> tuple[str, str, str]:
    """(source cue name, relation name, target cue name), normalised and stripped.

    Raises:
        ValueError: the relation name or a cue name is empty.
    """
    name = clean_label(relation.relation).strip()
    if not name:
        raise ValueError("a relation needs a name")
    return checked_cue_name(relation.source), name, checked_cue_name(relation.target)


def merge_cooccurrences(
    pairs: Iterable[tuple[str, str, float]], replace: bool = False
) -> dict[tuple[str, str], float]:
    """Normalised, unordered cue-name pairs with their summed deltas (self-pairs dropped).

    With ``replace`` the last delta of a pair wins instead (what setting it pair by pair
    leaves). Keyed (a, b) in the order the pair was first seen, which is the direction a new
    edge gets. Raises ValueError for an empty name.
    """
    merged: dict[tuple[str, str], float] = {}
    for raw_a, raw_b, delta in pairs:
        a, b = checked_cue_name(raw_a), checked_cue_name(raw_b)
        if a == b:
            continue
        key = (b, a) if (b, a) in merged else (a, b)
        merged[key] = float(delta) if replace else merged.get(key, 0.0) + float(delta)
    return merged


# CoOccurs grows quadratically with the cues of one memory; the first few (entities first)
# carry the topic, so a memory adds pairs among its leading cues only.
MAX_COOCCURRING_CUES = 6
# A CoOccurs strength at or below this once weakened is spent and the edge removed (sums of
# 1.0 are exact; an imported fraction may leave float noise).
SPENT_STRENGTH = 1e-9
# Cue types that rank after named entities when the leading cues are chosen.
_LATER_CUE_TYPES = {"keyword": 1, "tag": 2}


def cooccurring_pairs(cues: Iterable[Cue]) -> list[tuple[str, str, float]]:
    """What one memory adds to CoOccurs: 1.0 for every pair of its leading cues.

    The leading cues are the first MAX_COOCCURRING_CUES of the memory's *stored* cues ordered
    by kind (named entities, then keywords, then tags) and name. Why a function of the stored
    cues and not of the analysis order: forget recomputes it from the cues the memory still
    links, so it takes back exactly what the store added (see :meth:`StoreBase.delete_engram`).
    """
    unique = {cue.name: cue for cue in cues}.values()
    leading = sorted(unique, key=lambda c: (_LATER_CUE_TYPES.get(c.cue_type, 0), c.name))
    names = sorted(cue.name for cue in leading[:MAX_COOCCURRING_CUES])
    return [(a, b, 1.0) for i, a in enumerate(names) for b in names[i + 1 :]]


def merge_relations(relations: Iterable[Relation]) -> dict[tuple[str, str, str, str], Relation]:
    """Distinct relations keyed (source, relation, target, engram_id), names checked and
    normalised, the first of each kept.

    Raises:
        ValueError: a relation without a name or with an empty cue name.
    """
    merged: dict[tuple[str, str, str, str], Relation] = {}
    for relation in relations:
        source, name, target = checked_relation(relation)
        merged.setdefault((source, name, target, relation.engram_id), relation)
    return merged


def merge_associations(associations: Iterable[Association]) -> list[Association]:
    """One association per unordered pair (self-pairs dropped), as sequential ``associate`` calls
    would leave it: the first one's direction, type and time, the largest strength."""
    merged: dict[frozenset[str], Association] = {}
    for association in associations:
        if association.source_id == association.target_id:
            continue
        key = frozenset((association.source_id, association.target_id))
        first = merged.get(key)
        if first is None:
            merged[key] = association
        elif association.strength > first.strength:
            merged[key] = Association(
                first.source_id, first.target_id, association.strength, first.relation_type, first.created_at
            )
    return list(merged.values())


@dataclass(slots=True, frozen=True)
class ScoredId:
    """A search hit: engram id and a similarity in [0, 1] (higher is closer)."""

    id: str
    score: float


@dataclass(slots=True, frozen=True)
class CueHit:
    """An engram reached through cues: which of the asked cue names encode it."""

    engram_id: str
    cues: tuple[str, ...]


@dataclass(slots=True, frozen=True)
class RecallRow:
    """One engram as recall reads it (:meth:`GraphStore.recall_rows`).

    ``vector`` is the embedding as a float32 array (None when it has none): recall computes
    cosines on arrays, and a list of 1,536 Python floats per candidate cost more than the
    rest of loading it. ``engram.embedding`` may be None even when ``vector`` is not (the
    SQLite store skips building the list); read the vector. ``cues`` carry name and type.

    ``similarity`` is the cosine of the embedding with the query ``recall_rows`` was given,
    when the store computed it (None: not computed, or no embedding). A store that computes it
    may leave ``vector`` None (FalkorDB does so instead of sending the embedding).
    """

    engram: Engram
    vector: np.ndarray | None
    cues: list[Cue]
    similarity: float | None = None


@dataclass(slots=True, frozen=True)
class EngramState:
    """The fields consolidation needs, without content or embedding (cheap to list)."""

    id: str
    importance: float
    access_count: int
    created_at: datetime
    last_accessed_at: datetime
    decay_factor: float
    cluster_id: int

    @classmethod
    def from_row(cls, row: Sequence[Any], read_time: Callable[..., datetime]) -> EngramState:
        """From (id, importance, access_count, created_at, last_accessed_at, decay_factor,
        cluster_id) as a backend stores them; ``read_time(value, default)`` reads its times."""
        id_, importance, access_count, created, accessed, decay, cluster = row
        created_at = read_time(created)
        return cls(
            id_,
            float(importance),
            int(access_count),
            created_at,
            read_time(accessed, created_at),
            float(decay),
            int(cluster),
        )


@dataclass(slots=True)
class StoreStats:
    engrams: int = 0
    cues: int = 0
    associations: int = 0
    cue_links: int = 0
    clusters: int = 0
    vector_index: bool = False
    fulltext_index: bool = False
    backend: str = ""
    location: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class Capabilities:
    """What a backend can build natively: a vector index, a full-text index.

    Read by the backend's ``ensure_indexes`` (nothing is attempted without the ability) and
    by callers that want to know whether an index can ever serve (the conformance tests).
    Without one, the in-memory :class:`~smriti.stores.search.SearchIndex` answers.
    """

    vector_index: bool = False
    fulltext: bool = False
    # Other processes may write the database (a database server: several Smriti processes on one
    # FalkorDB or Neo4j). Callers then keep no per-process state about it that the database does
    # not confirm: what the store pipeline remembers of recent writes is read back instead.
    shared: bool = False


# The one list of Engram fields, in declaration order: every backend's columns, row
# conversion and record format derive from it.
ENGRAM_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Engram))
# Fields of Engram that update_engram / update_engrams may change: not the identity and not
# the embedding (Kuzu cannot SET an indexed vector; re-embed instead). created_at is: it is the
# time of the event a memory tells, which its LLM analysis may state after the store
# (nodes/enrich.py).
UPDATABLE_FIELDS = frozenset(ENGRAM_FIELDS) - {"id", "embedding"}
# The Python type of each updatable field, read from the dataclass.
FIELD_TYPES: dict[str, type] = {
    name: kind for name, kind in typing.get_type_hints(Engram).items() if name in UPDATABLE_FIELDS
}


def check_update(fields: Mapping[str, Any]) -> None:
    """Refuse an engram update naming a field outside UPDATABLE_FIELDS or giving None.

    None is refused because the data model has no nulls (Cypher's ``SET +=`` would silently
    remove the property); the identity and the embedding never change in place (Kuzu cannot
    SET an indexed vector: re-embedding rewrites the store).

    Raises:
        ValueError: naming the fields.
    """
    unknown = set(fields) - UPDATABLE_FIELDS
    if unknown:
        allowed = ", ".join(sorted(UPDATABLE_FIELDS))
        raise ValueError(f"cannot update {', '.join(sorted(unknown))}; allowed: {allowed}")
    if any(value is None for value in fields.values()):
        raise ValueError(f"None is not a value for engram fields: {dict(fields)}")


def coerce_field(name: str, value: Any, write_time: Callable[[datetime], Any]) -> Any:
    """An update value in its field's type (times through ``write_time``, the backend's form).

    Raises:
        TypeError, ValueError: a value that is not of the field's type (an integer field given
            3.5, a time given a string).
    """
    kind = FIELD_TYPES[name]
    if kind is datetime:
        if not isinstance(value, datetime):
            raise TypeError(f"{name} must be a datetime, not {type(value).__name__}")
        return write_time(value)
    if kind is int and isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{name} must be an integer, not {value!r}")
    return kind(value)


@runtime_checkable
class GraphStore(
    EngramPart, CuePart, AssociationPart, ClusterPart, SearchPart, MetaPart, RecordPart, Protocol
):
    """What every backend provides, for one user: the typed parts of :mod:`smriti.stores.parts`
    (engrams, cues and links, associations, clusters, search, metadata, records) and, here,
    the lifecycle.

    A backend implements the batch forms; the single forms (``get_engram``, ``update_engram``,
    ``upsert_cue``, ``link_cue``, ``link_cues``, ``add_cooccurrence``, ``add_relation``,
    ``associate``) are derived from them once, in :class:`StoreBase`,
    so a single call is by construction the batch of one (an import of records is
    :func:`smriti.stores.records.import_into`, over the batch forms). ``delete_engram`` (forget) is derived
    too, from ``remove_engram``, ``weaken_cooccurrences`` and ``delete_orphan_cues``, so every
    backend takes back the same things.

    Implementations are synchronous (the embedded databases are) and safe to call from
    one thread at a time; the pipelines serialise writes.
    """

    backend: str
    user: str
    capabilities: Capabilities

    def close(self) -> None: ...
    def transaction(self) -> AbstractContextManager[None]:
        """Writes made inside commit together or not at all; nested uses join the outer one.

        A backend without multi-statement transactions returns a no-op context (the
        :class:`StoreBase` default): its writes then commit one by one, as before.
        """
        ...

    def write_batch(self) -> AbstractContextManager[None]:
        """One store's writes (the store pipeline's): they commit together or not at all, also
        on a database without multi-statement transactions.

        The :class:`StoreBase` default is :meth:`transaction`. The Cypher stores queue the
        writes made inside and send them together at the end (FalkorDB: one MULTI/EXEC; Neo4j:
        one transaction), so code inside must not read back what it wrote there (reads see
        the store as it was), and writes answer without a result where theirs is not known yet
        (``update_engrams`` counts the ids asked for).
        """
        ...

    def exclusive(self, name: str, wait: float) -> AbstractContextManager[None]:
        """Hold this memory's lock ``name`` (``"consolidation"``) while inside, against every
        process and thread that opens the memory (:mod:`smriti.stores.leases`); wait up to
        ``wait`` seconds for its holder, then raise :class:`~smriti.errors.Busy`."""
        ...

    def stats(self) -> StoreStats: ...


LIFECYCLE = methods(GraphStore)
"""GraphStore's own methods, in no part: closing, transactions, the lock, stats."""
PART_OF: dict[str, str] = {
    name: part for part, cls in {"lifecycle": GraphStore, **PARTS}.items() for name in methods(cls)
}
"""Every GraphStore method, by name: the short name of its part (``"lifecycle"`` for GraphStore's own)."""
PROTOCOL_METHODS = frozenset(PART_OF)
"""Every method of :class:`GraphStore`, its parts' and its own."""


class StoreBase(GraphStore, ABC):
    """The base class of every backend: the single forms, derived once from the batch forms.

    LangGraph's BaseStore economy: a backend writes the batch forms of the protocol, and
    ``store.associate(a)`` is ``store.associate_many([a])`` everywhere, so "a batch equals its
    singles in order" holds by construction instead of by two implementations kept in step.

    It inherits :class:`GraphStore`, so each backend's methods (written, or handed to a
    collaborator) are type-checked against their part's declaration, and what neither this class
    nor the backend defines is abstract (:data:`BACKEND_METHODS`).
    """

    backend: str
    user: str
    capabilities: Capabilities

    def transaction(self) -> AbstractContextManager[None]:
        """No multi-statement transactions here: each write commits by itself."""
        return nullcontext()

    def write_batch(self) -> AbstractContextManager[None]:
        """A store's writes: :meth:`transaction` where the backend has one."""
        return self.transaction()

    def latest_of_source(self, source: str, limit: int) -> list[str]:
        """Only a shared store is asked (see ``Capabilities.shared``); an embedded one, written by
        one process, lets the store pipeline remember its latest writes itself."""
        raise NotImplementedError(f"{type(self).__name__} is not shared: the store pipeline remembers")

    def warm(self) -> None:
        """Nothing to load ahead here: the backend's first query costs what later ones do."""

    def finish_indexes(self, on_progress: Callable[[int, int], None] | None = None) -> None:
        """Nothing is built in the background here."""

    def bulk_import(self, memories: int) -> AbstractContextManager[None]:
        """Around a whole import of ``memories`` memories (each batch still its own transaction):
        nothing to prepare here. SQLite defers its secondary indexes and enlarges its cache."""
        return nullcontext()

    def create_engrams(self, engrams: Sequence[Engram]) -> None:
        """Insert new engrams (import); a backend that can insert many at once overrides this."""
        for engram in engrams:
            self.create_engram(engram)

    def get_engram(self, engram_id: str) -> Engram | None:
        found = self.get_engrams([engram_id])
        return found[0] if found else None

    def recall_rows(
        self, ids: Sequence[str], query: Sequence[float] | np.ndarray | None = None
    ) -> list[RecallRow]:
        """``get_engrams`` and ``cues_of``, the embedding also as a float32 array (no similarity:
        recall computes it from the vector)."""
        engrams = self.get_engrams(ids)
        cues = self.cues_of([e.id for e in engrams]) if engrams else {}
        return [
            RecallRow(
                engram,
                None if engram.embedding is None else np.asarray(engram.embedding, dtype=np.float32),
                cues.get(engram.id, []),
            )
            for engram in engrams
        ]

    def delete_engram(self, engram_id: str) -> bool:
        """Forget the engram and, at once, everything it contributed: its edges and search
        entries, the RelatesTo facts it recorded, its CoOccurs pairs (weakened by what it added,
        removed at zero) and the cues only it encoded. False if it did not exist.

        The pairs are recomputed from the cues it links (:func:`cooccurring_pairs`, the rule the
        store pipeline adds them by), so nothing per memory has to be kept for this. A memory
        stored before that rule (by analysis order) with more than MAX_COOCCURRING_CUES cues may
        weaken a pair it did not add (an edge is removed once spent, never made negative).
        """
        with self.transaction():  # one transaction where the backend has them (SQLite)
            cues = self.cues_of([engram_id]).get(engram_id, [])
            if not self.remove_engram(engram_id):
                return False
            if cues:
                self.weaken_cooccurrences(cooccurring_pairs(cues))
                self.delete_orphan_cues([cue.name for cue in cues])
            # The older facts it corrected are current again (nothing points at a missing
            # memory), and a queued analysis of it is dropped.
            older = self.superseded_ids(engram_id)
            if older:
                self.update_engrams({old: {"superseded_by": ""} for old in older})
            self.delete_meta(ANALYSIS_QUEUE_PREFIX + engram_id)
            return True

    def take_back_links(self, engram_id: str) -> None:
        """Undo what linking the engram added, keeping the engram: its EncodedBy edges and
        RelatesTo facts, its CoOccurs pairs (weakened as forget does) and the cues only it
        encoded. A later analysis then links it afresh (``nodes/link.py``'s ``write_links``),
        so replacing an analysis never leaves the old cues beside the new ones.
        """
        with self.transaction():
            cues = self.cues_of([engram_id]).get(engram_id, [])
            self.unlink_engram(engram_id)
            if cues:
                self.weaken_cooccurrences(cooccurring_pairs(cues))
                self.delete_orphan_cues([cue.name for cue in cues])

    def update_engram(self, engram_id: str, **fields: Any) -> bool:
        """Change fields listed in UPDATABLE_FIELDS; False if the engram does not exist."""
        if not fields:
            return self.get_engram(engram_id) is not None
        return self.update_engrams({engram_id: fields}) == 1

    def upsert_cue(self, cue: Cue) -> Cue:
        """Insert by normalised name or return the existing cue with that name."""
        return self.upsert_cues([cue])[0]

    def link_cue(self, engram_id: str, cue_id: str) -> None:
        """(Engram)-[:EncodedBy]->(Cue), idempotent."""
        self.link_cue_ids(engram_id, [cue_id])

    def association_weights(self) -> list[tuple[str, str, float]]:
        """(source id, target id, strength) of every AssociatedWith edge."""
        return [(a.source_id, a.target_id, a.strength) for a in self.all_associations()]

    def link_many(self, links: Mapping[str, Sequence[str]]) -> None:
        """EncodedBy edges of many engrams (engram id -> cue ids), as ``link_cue_ids`` of each;
        a backend that can write them in one go overrides this (SQLite: a bulk import's links)."""
        for engram_id, cue_ids in links.items():
            self.link_cue_ids(engram_id, cue_ids)

    def link_cues(self, engram_id: str, cues: Sequence[Cue]) -> list[Cue]:
        """Upsert every cue by normalised name and link it to the engram.

        Returns the stored cues (an existing cue unchanged), one per distinct normalised
        name, in the order given. A missing engram still gets its cues upserted, unlinked.

        Raises:
            ValueError: a cue name is empty once normalised (nothing is written).
        """
        stored = list({cue.name: cue for cue in self.upsert_cues(cues)}.values())  # same name, same cue
        self.link_cue_ids(engram_id, [cue.id for cue in stored])
        return stored

    def add_cooccurrence(self, cue_a: str, cue_b: str, delta: float = 1.0, replace: bool = False) -> None:
        """Strengthen (Cue a)-[:CoOccurs]->(Cue b) by delta (cue names), creating it at delta."""
        self.add_cooccurrences([(cue_a, cue_b, delta)], replace=replace)

    def add_relation(self, relation: Relation) -> None:
        """(Cue source)-[:RelatesTo {relation, engram_id}]->(Cue target) by cue names."""
        self.add_relations([relation])

    def associate(self, association: Association) -> None:
        """Create or strengthen (keep the max strength) an AssociatedWith edge."""
        self.associate_many([association])


def _require_what_the_protocol_leaves_to_backends() -> frozenset[str]:
    """Make every protocol method StoreBase does not derive abstract on StoreBase.

    The protocol stays the one definition of each method (its signature and docstring, in its
    part); what a backend must write is whatever the base class leaves to the protocol's
    declaration, so a backend that misses one fails when it is constructed (TypeError naming it),
    not at the first call in production. mypy sees the same: a protocol method with an empty body
    is abstract in a class that inherits the protocol.
    """
    declared = {GraphStore, *PARTS.values()}
    required = set()
    for name in PROTOCOL_METHODS:
        owner = next(klass for klass in StoreBase.__mro__ if name in vars(klass))
        if owner in declared:
            setattr(StoreBase, name, abstractmethod(vars(owner)[name]))
            required.add(name)
    abc.update_abstractmethods(StoreBase)  # type: ignore[type-abstract]  # why: it is abstract on purpose
    return frozenset(required)


BACKEND_METHODS = _require_what_the_protocol_leaves_to_backends()
"""The methods every backend writes (the rest of :class:`GraphStore` comes from StoreBase)."""
