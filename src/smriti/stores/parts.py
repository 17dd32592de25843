"""The typed parts of the store interface: GraphStore's methods in the groups a backend's
collaborators carry out (engrams, cues and links, associations, clusters, search, metadata,
records).

:class:`~smriti.stores.base.GraphStore` is the composition of these parts and keeps only the
lifecycle (close, transactions, the lock, stats); code that needs one concern can type against
its part (``def f(store: SearchPart)``). Each part holds exactly the methods of its group, each
declared once, with its docstring; a method :class:`~smriti.stores.base.StoreBase` derives from
the batch forms (the single forms, forget) is declared here without one and documented where it
is derived. ``tests/stores/test_store_interface.py`` checks that every GraphStore method belongs to
exactly one part or to the lifecycle; the conformance suite runs per part
(``pytest tests/stores -m search``, see ``tests/stores/conformance/``).

Every backend derives from StoreBase, which inherits GraphStore, so mypy checks each method a
backend writes or hands to a collaborator (``handed``, :mod:`smriti.stores.operations`) against
its part's signature, and a method no class provides is reported where the backend is built.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the data model imports this module (GraphStore is built from the parts)
    import numpy as np

    from smriti.stores.base import (
        Association,
        Cue,
        CueHit,
        Engram,
        EngramState,
        RecallRow,
        Relation,
        ScoredId,
    )


class EngramPart(Protocol):
    """Engrams: their rows, read, changed, reinforced and forgotten."""

    def create_engram(self, engram: Engram) -> None: ...
    def create_engrams(self, engrams: Sequence[Engram]) -> None:
        """Insert new engrams; an existing id raises StoreError."""
        ...

    def get_engrams(self, ids: Sequence[str]) -> list[Engram]:
        """Engrams with these ids, in the given order, silently skipping missing ones."""
        ...

    def get_engram(self, engram_id: str) -> Engram | None: ...  # derived by StoreBase
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

    def update_engrams(self, updates: Mapping[str, Mapping[str, Any]]) -> int:
        """Change fields listed in UPDATABLE_FIELDS of each id; returns how many engrams changed.

        Raises:
            ValueError: a field outside UPDATABLE_FIELDS, or a None value (nothing is written).
        """
        ...

    def update_engram(self, engram_id: str, **fields: Any) -> bool: ...  # derived by StoreBase
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

    def superseded_ids(self, engram_id: str) -> list[str]:
        """Ids of the engrams whose ``superseded_by`` is ``engram_id``, sorted."""
        ...

    def list_recent(self, limit: int, memory_type: str | None = None) -> list[Engram]:
        """Most recently accessed first (ties: newest created, then id)."""
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


class CuePart(Protocol):
    """Cues and their links: EncodedBy (engram -> cue), CoOccurs (cue <-> cue) and RelatesTo
    (cue -> cue, the facts a memory states), written and read by cue name."""

    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]:
        """Insert each cue by normalised name, or take the stored cue of that name unchanged.

        Returns one stored cue per cue given, in order (a name given twice: the same cue).

        Raises:
            ValueError: a cue name is empty once normalised (nothing is written).
        """
        ...

    def upsert_cue(self, cue: Cue) -> Cue: ...  # derived by StoreBase
    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None:
        """(Engram)-[:EncodedBy]->(Cue) for each cue id, idempotent; a missing end is a no-op."""
        ...

    # derived by StoreBase:
    def link_cue(self, engram_id: str, cue_id: str) -> None: ...
    def link_cues(self, engram_id: str, cues: Sequence[Cue]) -> list[Cue]: ...
    def link_many(self, links: Mapping[str, Sequence[str]]) -> None: ...
    def unlink_engram(self, engram_id: str) -> None:
        """The backend's part of :meth:`StoreBase.take_back_links`: remove the engram's EncodedBy
        edges and the RelatesTo facts recorded with its id, keeping the engram and its associations."""
        ...

    def take_back_links(self, engram_id: str) -> None: ...  # derived by StoreBase
    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]: ...
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

    def add_cooccurrence(  # derived by StoreBase
        self, cue_a: str, cue_b: str, delta: float = 1.0, replace: bool = False
    ) -> None: ...
    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        """Take delta off (Cue a)-[:CoOccurs]-(Cue b) for each (a, b, delta) (cue names), either
        direction; an edge left at or below zero is removed, a missing one is never created."""
        ...

    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        """(Cue source)-[:RelatesTo {relation, engram_id}]->(Cue target) by cue names, idempotent;
        cues it has to create get ``cue_type`` (existing ones keep theirs).

        Raises:
            ValueError: a relation without a name or with an empty cue name (nothing is written).
        """
        ...

    def add_relation(self, relation: Relation) -> None: ...  # derived by StoreBase
    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        """RelatesTo edges recorded by these engrams."""
        ...

    def related_entities(self, cue_names: Sequence[str], limit: int) -> list[Relation]:
        """RelatesTo edges with either end among these cue names (normalised here), at most
        ``limit``: newest first, ties by (source, relation, target, engram_id). One hop of the
        Memory Fabric traversal (entity -> relation -> entity), read for a whole frontier at once.
        """
        ...

    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int:
        """Delete cues that encode no engram (among ``names`` when given, normalised here), with
        their CoOccurs and RelatesTo edges; returns how many."""
        ...


class AssociationPart(Protocol):
    """Associations: the symmetric, weighted AssociatedWith edges between engrams."""

    def associate_many(self, associations: Sequence[Association]) -> None:
        """Create or strengthen (keep the max strength) AssociatedWith edges; symmetric."""
        ...

    def associate(self, association: Association) -> None: ...  # derived by StoreBase
    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        """AssociatedWith edges touching these engrams, in either direction."""
        ...

    def all_associations(self) -> list[Association]: ...


class ClusterPart(Protocol):
    """Clusters: what consolidation's decay and clustering read in bulk, and the cluster a new
    memory inherits from its strongest neighbour."""

    def cluster_ids(self, ids: Sequence[str]) -> dict[str, int]:
        """Cluster id of each existing engram asked for: a light read (no text, no embedding)."""
        ...

    def engram_states(self, ids: Sequence[str] | None = None) -> list[EngramState]:
        """The consolidation fields of every engram (or of the existing ones among ``ids``), by id."""
        ...

    def association_weights(self) -> list[tuple[str, str, float]]:
        """(source id, target id, strength) of every AssociatedWith edge: what clustering reads.

        :class:`StoreBase` derives it from ``all_associations``; a backend may read it more
        cheaply (SQLite: no times, no objects; 570k edges at 100k engrams).
        """
        ...


class SearchPart(Protocol):
    """Search: vector and keyword search, their indexes and the caches behind them."""

    def vector_search(
        self, embedding: Sequence[float], k: int, memory_type: str | None = None
    ) -> list[ScoredId]:
        """Cosine similarity, best first; uses the HNSW index when built, else brute force."""
        ...

    def fulltext_search(self, query: str, k: int, memory_type: str | None = None) -> list[ScoredId]:
        """Keyword search over content, best first; an index when built, else a scan."""
        ...

    def ensure_indexes(self, threshold: int) -> dict[str, bool]:
        """Build vector/full-text indexes once engrams exceed threshold; returns their state."""
        ...

    def warm(self) -> None:
        """Load now what the first query would load lazily (the vector cache); safe to call
        from a background thread while queries run (they wait for it, not redo it)."""
        ...

    def finish_indexes(self, on_progress: Callable[[int, int], None] | None = None) -> None:
        """Build now the search indexes a query would otherwise wait for or build in the
        background (the import calls it): ``on_progress(done, total)`` follows it."""
        ...


class MetaPart(Protocol):
    """Key/value metadata: the embedding model and dims, the Leiden cache, index state, the
    applied migrations, and the LLM analysis queue (:mod:`smriti.stores.queue`)."""

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def meta_items(self, prefix: str) -> dict[str, str]:
        """Every metadata key starting with ``prefix`` (matched literally) and its value, by key."""
        ...

    def delete_meta(self, key: str) -> None:
        """Remove a metadata key (a missing one is a no-op)."""
        ...


class RecordPart(Protocol):
    """Records: the whole memory as JSON-ready records (export, moves, backups), and the hook an
    import runs in (:func:`smriti.stores.records.import_into` writes through the batch forms)."""

    def export_records(self) -> Iterator[dict[str, Any]]:
        """Every node and edge as JSON-ready dicts, in the order of stores.records.KINDS."""
        ...

    def bulk_import(self, memories: int) -> AbstractContextManager[None]:
        """Entered around a whole import (see :func:`smriti.stores.records.import_into`)."""
        ...


PARTS: dict[str, type] = {
    "engrams": EngramPart,
    "cues": CuePart,
    "associations": AssociationPart,
    "clusters": ClusterPart,
    "search": SearchPart,
    "meta": MetaPart,
    "records": RecordPart,
}
"""Each part by its short name: the name of its pytest marker in the conformance suite."""


def methods(cls: type) -> frozenset[str]:
    """The public methods ``cls`` itself declares (not those it inherits)."""
    return frozenset(
        name for name, member in vars(cls).items() if not name.startswith("_") and callable(member)
    )
