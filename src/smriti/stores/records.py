"""The portable record format of ``export``/``import`` and backups (JSON Lines).

One JSON object per line, ``{"kind": ..., ...}``. Edges name cues by their (normalised,
per-user unique) name rather than by id, so a store exported from Kuzu imports into
FalkorDB or Neo4j unchanged. Kinds are written in :data:`KINDS` order so nodes precede
the edges that need them.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from smriti.errors import RecordDimensionError as RecordDimensionError
from smriti.errors import RecordFormatError
from smriti.stores.base import Association, Cue, Engram, Relation, normalise_cue_name

if TYPE_CHECKING:
    from smriti.stores.base import GraphStore

FORMAT_VERSION = 1
KINDS = ("meta", "engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to")


def _iso(value: datetime) -> str:
    return value.isoformat()


def _dt(value: str) -> datetime:
    return datetime.fromisoformat(value)


def engram_record(engram: Engram) -> dict[str, Any]:
    return {
        "kind": "engram",
        "id": engram.id,
        "content": engram.content,
        "summary": engram.summary,
        "memory_type": engram.memory_type,
        "importance": engram.importance,
        "access_count": engram.access_count,
        "created_at": _iso(engram.created_at),
        "last_accessed_at": _iso(engram.last_accessed_at),
        "decay_factor": engram.decay_factor,
        "embedding": list(engram.embedding) if engram.embedding is not None else None,
        "source": engram.source,
        "tags": engram.tags,
        "cluster_id": engram.cluster_id,
        "superseded_by": engram.superseded_by,
        "facts": engram.facts,
    }


def engram_from_record(record: dict[str, Any]) -> Engram:
    return Engram(
        id=record["id"],
        content=record["content"],
        summary=record.get("summary", ""),
        memory_type=record.get("memory_type", "episodic"),
        importance=float(record.get("importance", 0.5)),
        access_count=int(record.get("access_count", 0)),
        created_at=_dt(record["created_at"]),
        last_accessed_at=_dt(record["last_accessed_at"]),
        decay_factor=float(record.get("decay_factor", 1.0)),
        embedding=record.get("embedding"),
        source=record.get("source", ""),
        tags=record.get("tags", ""),
        cluster_id=int(record.get("cluster_id", -1)),
        superseded_by=str(record.get("superseded_by") or ""),
        facts=str(record.get("facts") or ""),
    )


def cue_record(cue: Cue) -> dict[str, Any]:
    return {
        "kind": "cue",
        "id": cue.id,
        "name": cue.name,
        "cue_type": cue.cue_type,
        "embedding": list(cue.embedding) if cue.embedding is not None else None,
    }


def encoded_by_record(engram_id: str, cue_name: str) -> dict[str, Any]:
    return {"kind": "encoded_by", "engram_id": engram_id, "cue": cue_name}


def association_record(association: Association) -> dict[str, Any]:
    return {
        "kind": "associated_with",
        "source_id": association.source_id,
        "target_id": association.target_id,
        "strength": association.strength,
        "relation_type": association.relation_type,
        "created_at": _iso(association.created_at),
    }


def co_occurs_record(cue_a: str, cue_b: str, strength: float) -> dict[str, Any]:
    return {"kind": "co_occurs", "source": cue_a, "target": cue_b, "strength": strength}


def relation_record(relation: Relation) -> dict[str, Any]:
    return {
        "kind": "relates_to",
        "source": relation.source,
        "relation": relation.relation,
        "target": relation.target,
        "engram_id": relation.engram_id,
        "created_at": _iso(relation.created_at),
    }


def meta_record(key: str, value: str) -> dict[str, Any]:
    return {"kind": "meta", "key": key, "value": value}


# Metadata that describes the physical store, not the memories: never carried across.
LOCAL_META_KEYS = frozenset({"schema_version", "migrations", "vector_index", "fulltext_index"})


def parse_lines(lines: Iterable[str], embedding_dims: int | None) -> list[dict[str, Any]]:
    """Parse a whole export before anything is written, so a bad file changes nothing.

    Engram embeddings come back as ``array("d")`` (a compact sequence of the same floats).

    Args:
        lines: the file's lines (blank ones are skipped).
        embedding_dims: the store's dimension, checked on engram embeddings; None skips the check
            (re-embedding imports).

    Raises:
        RecordFormatError: a line is not JSON or not a Smriti record.
        RecordDimensionError: an engram embedding of another dimension.
    """
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)  # why orjson: a 1,536-float line parses ~4x faster than json's
        except orjson.JSONDecodeError as error:
            raise RecordFormatError(number, f"not JSON ({error.msg})") from None
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind not in KINDS:
            raise RecordFormatError(number, f"not a Smriti export record (kind {kind!r})")
        embedding = record.get("embedding")
        if kind == "engram" and embedding is not None:
            if embedding_dims and len(embedding) != embedding_dims:
                raise RecordDimensionError(
                    number,
                    f"{len(embedding)}-dimensional embeddings, "
                    f"but this store uses EMBEDDING_DIMS={embedding_dims}",
                )
            try:
                # why: 100k memories x 1,536 Python floats take ~5 GB (and the allocator's time);
                # an array of doubles takes 1.2 GB, holds the same values, and backends read it
                # as a sequence of floats (SQLite through the buffer protocol)
                record["embedding"] = array("d", embedding)
            except TypeError:
                raise RecordFormatError(number, "the embedding is not a list of numbers") from None
        records.append(record)
    return records


IMPORT_BATCH = 1000


def import_into(
    store: GraphStore,
    records: Iterable[dict[str, Any]],
    on_memories: Callable[[int], None] | None = None,
    batch_size: int = IMPORT_BATCH,
) -> int:
    """Apply records to ``store`` idempotently, in batches; returns how many records were read.

    Engrams that already exist are left as they are; cues are upserted by name; edges are
    created or set to the exported strength, so importing the same file twice changes nothing.

    Each batch of ``batch_size`` memories is one transaction with everything that belongs to
    them (their cue links, the relations they stated, their associations), so a memory is
    never imported without its cues; an interrupted import keeps the batches already written
    and rolls the current one back, and running the same import again resumes it. Cue
    co-occurrences come last. ``on_memories(n)`` is called after each batch with the number
    of memories it held (for a progress bar that counts memories, not records).

    Raises:
        ValueError: on an unknown record kind (the file is not a Smriti export).
    """
    plan = _ImportPlan.of(records)
    with store.bulk_import(len(plan.engrams)):
        _import_plan(store, plan, on_memories, batch_size)
    return plan.count


def _import_plan(
    store: GraphStore, plan: _ImportPlan, on_memories: Callable[[int], None] | None, batch_size: int
) -> None:
    with store.transaction():
        for key, value in plan.meta:
            store.set_meta(key, value)
        cue_ids = {cue.name: cue.id for cue in store.upsert_cues(plan.cues)} if plan.cues else {}

    def ids_of(names: Sequence[str]) -> list[str]:
        """Cue ids by name, creating the cues the file names without a cue record."""
        normalised = [normalise_cue_name(name) for name in names]
        missing = [Cue(name=name) for name in dict.fromkeys(normalised) if name not in cue_ids]
        if missing:
            cue_ids.update({cue.name: cue.id for cue in store.upsert_cues(missing)})
        return [cue_ids[name] for name in normalised]

    batches = [plan.engrams[start : start + batch_size] for start in range(0, len(plan.engrams), batch_size)]
    edges = plan.edges_by_batch(batch_size)
    for number, batch in enumerate(batches):
        with store.transaction():
            ids = [record["id"] for record in batch]
            existing = store.cluster_ids(ids)  # a light read: which of them are there already
            store.create_engrams([engram_from_record(r) for r in batch if r["id"] not in existing])
            _write_edges(store, edges.get(number), ids_of)
        if on_memories is not None:
            on_memories(len(batch))
    with store.transaction():  # edges of memories that are not in the file, and co-occurrences
        _write_edges(store, edges.get(None), ids_of)
        if plan.cooccurrences:
            ids_of([name for a, b, _ in plan.cooccurrences for name in (a, b)])
            store.add_cooccurrences(plan.cooccurrences, replace=True)


def _write_edges(
    store: GraphStore, edges: _Edges | None, ids_of: Callable[[Sequence[str]], list[str]]
) -> None:
    if edges is None:
        return
    if edges.links:
        ids_of([name for names in edges.links.values() for name in names])  # new cues: one upsert
        store.link_many({engram_id: ids_of(names) for engram_id, names in edges.links.items()})
    if edges.relations:
        store.add_relations(edges.relations)
    if edges.associations:
        store.associate_many(edges.associations)


@dataclass
class _Edges:
    """The edges written with one batch of memories."""

    links: dict[str, list[str]] = field(default_factory=dict)
    relations: list[Relation] = field(default_factory=list)
    associations: list[Association] = field(default_factory=list)


@dataclass
class _ImportPlan:
    """An export's records sorted by what they attach to, so each batch of memories can be
    written whole (the file lists all engrams before any edge)."""

    count: int = 0
    meta: list[tuple[str, str]] = field(default_factory=list)
    engrams: list[dict[str, Any]] = field(default_factory=list)
    cues: list[Cue] = field(default_factory=list)
    links: dict[str, list[str]] = field(default_factory=dict)
    relations: dict[str, list[Relation]] = field(default_factory=dict)
    associations: list[Association] = field(default_factory=list)
    cooccurrences: list[tuple[str, str, float]] = field(default_factory=list)

    def edges_by_batch(self, batch_size: int) -> dict[int | None, _Edges]:
        """Each edge goes with the batch that writes the last of its memories (None: a memory
        the file does not hold, so the edge is written after every batch)."""
        batch_of = {record["id"]: position // batch_size for position, record in enumerate(self.engrams)}
        edges: dict[int | None, _Edges] = {}

        def slot(*engram_ids: str) -> _Edges:
            batches = [batch_of.get(engram_id) for engram_id in engram_ids]
            key = None if None in batches else max(b for b in batches if b is not None)
            return edges.setdefault(key, _Edges())

        for engram_id, names in self.links.items():
            slot(engram_id).links[engram_id] = names
        for engram_id, relations in self.relations.items():
            slot(engram_id).relations.extend(relations)
        for association in self.associations:
            slot(association.source_id, association.target_id).associations.append(association)
        return edges

    @classmethod
    def of(cls, records: Iterable[dict[str, Any]]) -> _ImportPlan:
        plan = cls()
        links, cooccurrences = plan.links, plan.cooccurrences
        for record in records:
            plan.count += 1
            kind = record.get("kind")
            # the two most frequent kinds (~11 and ~9 per memory) inline, the rest through add
            if kind == "encoded_by":
                links.setdefault(record["engram_id"], []).append(record["cue"])
            elif kind == "co_occurs":
                cooccurrences.append((record["source"], record["target"], float(record["strength"])))
            else:
                plan.add(record)
        return plan

    def add(self, record: dict[str, Any]) -> None:
        kind = record.get("kind")
        if kind == "meta":
            if record["key"] not in LOCAL_META_KEYS:
                self.meta.append((record["key"], str(record["value"])))
        elif kind == "engram":
            self.engrams.append(record)
        elif kind == "cue":
            self.cues.append(
                Cue(
                    id=record["id"],
                    name=record["name"],
                    cue_type=record.get("cue_type", "keyword"),
                    embedding=record.get("embedding"),
                )
            )
        elif kind == "encoded_by":
            self.links.setdefault(record["engram_id"], []).append(record["cue"])
        elif kind == "associated_with":
            self.associations.append(
                Association(
                    source_id=record["source_id"],
                    target_id=record["target_id"],
                    strength=float(record["strength"]),
                    relation_type=record.get("relation_type", "similar"),
                    created_at=_dt(record["created_at"]),
                )
            )
        elif kind == "co_occurs":
            self.cooccurrences.append((record["source"], record["target"], float(record["strength"])))
        elif kind == "relates_to":
            relation = Relation(
                source=record["source"],
                relation=record["relation"],
                target=record["target"],
                engram_id=record.get("engram_id", ""),
                created_at=_dt(record["created_at"]),
            )
            self.relations.setdefault(relation.engram_id, []).append(relation)
        else:
            raise ValueError(f"unknown record kind {kind!r}: not a Smriti export")
