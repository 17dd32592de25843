"""The GraphStore protocol and the data model shared by every backend.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
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
class GraphStore(Protocol):
    """What every backend provides, for one user.

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

    # -- lifecycle ------------------------------------------------------------------------
    def close(self) -> None: ...
    def warm(self) -> None:
        """Load now what the first query would load lazily (the vector cache); safe to call
        from a background thread while queries run (they wait for it, not redo it)."""
        ...

    def finish_indexes(self, on_progress: Callable[[int, int], None] | None = None) -> None:
        """Build now the search indexes a query would otherwise wait for or build in the
        background (the import calls it): ``on_progress(done, total)`` follows it."""
        ...

    def bulk_import(self, memories: int) -> AbstractContextManager[None]:
        """Entered around a whole import (see :func:`smriti.stores.records.import_into`)."""
        ...

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

    # -- key/value metadata (embedding model and dims, Leiden cache, index state) ---------
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def meta_items(self, prefix: str) -> dict[str, str]:
        """Every metadata key starting with ``prefix`` (matched literally) and its value, by key."""
        ...

    def delete_meta(self, key: str) -> None:
        """Remove a metadata key (a missing one is a no-op)."""
        ...

    # -- engrams ---------------------------------------------------------------------------
    def create_engram(self, engram: Engram) -> None: ...
    def create_engrams(self, engrams: Sequence[Engram]) -> None:
        """Insert new engrams; an existing id raises StoreError."""
        ...

    def get_engrams(self, ids: Sequence[str]) -> list[Engram]:
        """Engrams with these ids, in the given order, silently skipping missing ones."""
        ...

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """Cluster id of each existing engram asked for: a light read (no text, no embedding)."""
        ...

    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        """Change fields listed in UPDATABLE_FIELDS of each id; returns how many engrams changed.

        Raises:
            ValueError: a field outside UPDATABLE_FIELDS, or a None value (nothing is written).
        """
        ...

    def reinforce(self, ids: Sequence[str], at: datetime, boost: float) -> dict[str, tuple[int, float]]:
        """Strengthen recalled engrams in place: access_count + 1, last_accessed_at = ``at``,
        decay_factor = min(1, decay_factor + ``boost``).

        One statement computes the new values from the stored ones, so two recalls of the same
        memory at once both count (a read-then-write would lose one). Returns
        id -> (access_count, decay_factor) after the change, for the ids that exist.
        """
        ...

    def delete_engram(self, engram_id: str) -> bool:
        """Forget the engram: it, its edges and everything it contributed (see
        :meth:`StoreBase.delete_engram`); False if it did not exist."""
        ...

    def remove_engram(self, engram_id: str) -> bool:
        """The backend's part of :meth:`delete_engram`: the engram, its edges (EncodedBy,
        AssociatedWith), its search entries and the RelatesTo facts recorded with its id;
        False if it did not exist. Callers use ``delete_engram``."""
        ...

    def unlink_engram(self, engram_id: str) -> None:
        """The backend's part of :meth:`StoreBase.take_back_links`: remove the engram's EncodedBy
        edges and the RelatesTo facts recorded with its id, keeping the engram and its associations."""
        ...

    def superseded_ids(self, engram_id: str) -> list[str]:
        """Ids of the engrams whose ``superseded_by`` is ``engram_id``, sorted."""
        ...

    def list_recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        """Most recently accessed first (ties: newest created, then id)."""
        ...

    def engram_states(self, ids: Sequence[str] | None = None) -> list[EngramState]:
        """The consolidation fields of every engram (or of the existing ones among ``ids``), by id."""
        ...

    def count_engrams(self) -> int: ...
    def latest_of_source(self, source: str, limit: int) -> list[str]:
        """Ids of the ``limit`` latest engrams (by created_at, newest first) of ``source``.
        Needed only of a store whose ``capabilities.shared`` is set."""
        ...

    def uncued_engram_ids(self) -> list[str]:
        """Ids of engrams linked to no cue, sorted: memories half written by versions whose
        stores were not atomic (consolidation's repair step re-links them)."""
        ...

    # -- cues ------------------------------------------------------------------------------
    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]:
        """Insert each cue by normalised name, or take the stored cue of that name unchanged.

        Returns one stored cue per cue given, in order (a name given twice: the same cue).

        Raises:
            ValueError: a cue name is empty once normalised (nothing is written).
        """
        ...

    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None:
        """(Engram)-[:EncodedBy]->(Cue) for each cue id, idempotent; a missing end is a no-op."""
        ...

    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]: ...
    def recall_rows(
        self, ids: Sequence[str], query: Sequence[float] | np.ndarray | None = None
    ) -> list[RecallRow]:
        """Engrams with these ids (given order, missing ones skipped), each with its embedding
        as a float32 array and its cues: what recall loads for its candidates.

        ``query`` is the recall's query embedding: a backend may answer each row's cosine with
        it (``RecallRow.similarity``) instead of its embedding. :class:`StoreBase` derives the
        rows from ``get_engrams`` and ``cues_of``; a backend may read them more cheaply (SQLite
        decodes the embedding BLOB straight into the array, FalkorDB computes the cosine).
        """
        ...

    def engrams_by_cues(self, cue_names: Sequence[str], limit: int) -> list[CueHit]:
        """Engrams encoded by any of the (normalised) cue names, most matched cues first."""
        ...

    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        """How many engrams each existing cue encodes (for the cross-reference boost)."""
        ...

    def set_cue_types(self, types: Mapping[str, str]) -> None:
        """Set the type of each cue, by name (normalised here); an unknown name or an empty type
        is a no-op. What a landed LLM analysis does: its types replace the ones a cue was created
        with (``upsert_cues`` keeps a stored cue's type)."""
        ...

    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]], replace: bool = False) -> None:
        """Strengthen (Cue a)-[:CoOccurs]->(Cue b) by delta for each (a, b, delta) (cue names),
        creating missing cues and edges; symmetric (an edge either way is the one updated).

        With ``replace`` the strength is set to delta (used by import, to stay idempotent).
        """
        ...

    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        """(Cue source)-[:RelatesTo {relation, engram_id}]->(Cue target) by cue names, idempotent;
        cues it has to create get ``cue_type`` (existing ones keep theirs).

        Raises:
            ValueError: a relation without a name or with an empty cue name (nothing is written).
        """
        ...

    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        """RelatesTo edges recorded by these engrams."""
        ...

    def related_entities(self, cue_names: Sequence[str], limit: int) -> list[Relation]:
        """RelatesTo edges with either end among these cue names (normalised here), at most
        ``limit``: newest first, ties by (source, relation, target, engram_id). One hop of the
        Memory Fabric traversal (entity -> relation -> entity), read for a whole frontier at once.
        """
        ...

    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        """Take delta off (Cue a)-[:CoOccurs]-(Cue b) for each (a, b, delta) (cue names), either
        direction; an edge left at or below zero is removed, a missing one is never created."""
        ...

    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int:
        """Delete cues that encode no engram (among ``names`` when given, normalised here), with
        their CoOccurs and RelatesTo edges; returns how many."""
        ...

    # -- associations ----------------------------------------------------------------------
    def associate_many(self, associations: Sequence[Association]) -> None:
        """Create or strengthen (keep the max strength) AssociatedWith edges; symmetric."""
        ...

    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        """AssociatedWith edges touching these engrams, in either direction."""
        ...

    def all_associations(self) -> list[Association]: ...
    def association_weights(self) -> list[tuple[str, str, float]]:
        """(source id, target id, strength) of every AssociatedWith edge: what clustering reads.

        :class:`StoreBase` derives it from ``all_associations``; a backend may read it more
        cheaply (SQLite: no times, no objects; 570k edges at 100k engrams).
        """
        ...

    # -- search ----------------------------------------------------------------------------
    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        """Cosine similarity, best first; uses the HNSW index when built, else brute force."""
        ...

    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        """Keyword search over content, best first; an index when built, else a scan."""
        ...

    # -- maintenance -----------------------------------------------------------------------
    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        """Build vector/full-text indexes once engrams exceed threshold; returns their state."""
        ...

    def stats(self) -> StoreStats: ...

    # -- portability -----------------------------------------------------------------------
    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every node and edge as JSON-ready dicts, in the order of stores.records.KINDS."""
        ...

    # -- derived by StoreBase (declared here so callers see them) --------------------------
    def get_engram(self, engram_id: str) -> Engram | None: ...
    def take_back_links(self, engram_id: str) -> None: ...
    def update_engram(self, engram_id: str, **fields: Any) -> bool: ...
    def upsert_cue(self, cue: Cue) -> Cue: ...
    def link_cue(self, engram_id: str, cue_id: str) -> None: ...
    def link_cues(self, engram_id: str, cues: Sequence[Cue]) -> list[Cue]: ...
    def link_many(self, links: Mapping[str, Sequence[str]]) -> None: ...
    def add_cooccurrence(self, cue_a: str, cue_b: str, delta: float = 1.0, replace: bool = False) -> None: ...
    def add_relation(self, relation: Relation) -> None: ...
    def associate(self, association: Association) -> None: ...


class StoreBase(ABC):
    """The base class of every backend: the single forms, derived once from the batch forms.

    LangGraph's BaseStore economy: a backend writes the batch forms of the protocol, and
    ``store.associate(a)`` is ``store.associate_many([a])`` everywhere, so "a batch equals its
    singles in order" holds by construction instead of by two implementations kept in step.
    """

    backend: str
    user: str
    capabilities: Capabilities

    @abstractmethod
    def get_engrams(self, ids: Sequence[str]) -> list[Engram]: ...
    @abstractmethod
    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int: ...
    @abstractmethod
    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]: ...
    @abstractmethod
    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None: ...
    @abstractmethod
    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]: ...
    @abstractmethod
    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]], replace: bool = False) -> None: ...
    @abstractmethod
    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None: ...
    @abstractmethod
    def associate_many(self, associations: Sequence[Association]) -> None: ...
    @abstractmethod
    def remove_engram(self, engram_id: str) -> bool: ...
    @abstractmethod
    def uncued_engram_ids(self) -> list[str]: ...
    @abstractmethod
    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None: ...
    @abstractmethod
    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int: ...
    @abstractmethod
    def unlink_engram(self, engram_id: str) -> None: ...
    @abstractmethod
    def superseded_ids(self, engram_id: str) -> list[str]: ...
    @abstractmethod
    def delete_meta(self, key: str) -> None: ...

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

    def warm(self) -> None:  # noqa: B027 -- a hook backends may override; most need nothing
        """Nothing to load ahead here: the backend's first query costs what later ones do."""

    def finish_indexes(self, on_progress: Callable[[int, int], None] | None = None) -> None:  # noqa: B027
        """Nothing is built in the background here."""

    def bulk_import(self, memories: int) -> AbstractContextManager[None]:
        """Around a whole import of ``memories`` memories (each batch still its own transaction):
        nothing to prepare here. SQLite defers its secondary indexes and enlarges its cache."""
        return nullcontext()

    @abstractmethod
    def create_engram(self, engram: Engram) -> None: ...

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
        return [(a.source_id, a.target_id, a.strength) for a in self.all_associations()]  # type: ignore[attr-defined]

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

    The protocol stays the one definition of each method (its signature and docstring); what a
    backend must write is whatever the base class leaves undefined, so a backend that misses
    one fails when it is constructed (TypeError naming it), not at the first call in production.
    """
    required = set(StoreBase.__abstractmethods__)
    for name, member in vars(GraphStore).items():
        if name.startswith("_") or not callable(member) or hasattr(StoreBase, name):
            continue
        setattr(StoreBase, name, abstractmethod(member))
        required.add(name)
    abc.update_abstractmethods(StoreBase)  # type: ignore[type-abstract]  # why: it is abstract on purpose
    return frozenset(required)


BACKEND_METHODS = _require_what_the_protocol_leaves_to_backends()
"""The methods every backend writes (the rest of :class:`GraphStore` comes from StoreBase)."""
