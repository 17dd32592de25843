"""The portable record format of ``export``/``import`` and backups (JSON Lines).

One JSON object per line, ``{"kind": ..., ...}``. Edges name cues by their (normalised,
per-user unique) name rather than by id, so a store exported from Kuzu imports into
FalkorDB or Neo4j unchanged. Kinds are written in :data:`KINDS` order so nodes precede
the edges that need them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.errors import RecordDimensionError as RecordDimensionError
from smriti.errors import RecordFormatError
from smriti.stores.base import Association, Cue, Engram, Relation

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
LOCAL_META_KEYS = frozenset({"schema_version", "vector_index", "fulltext_index"})


def parse_lines(lines: Iterable[str], embedding_dims: int | None) -> list[dict[str, Any]]:
    """Parse a whole export before anything is written, so a bad file changes nothing.

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
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise RecordFormatError(number, f"not JSON ({error.msg})") from None
        kind = record.get("kind") if isinstance(record, dict) else None
        if kind not in KINDS:
            raise RecordFormatError(number, f"not a Smriti export record (kind {kind!r})")
        embedding = record.get("embedding")
        if embedding_dims and kind == "engram" and embedding is not None and len(embedding) != embedding_dims:
            raise RecordDimensionError(
                number,
                f"{len(embedding)}-dimensional embeddings, "
                f"but this store uses EMBEDDING_DIMS={embedding_dims}",
            )
        records.append(record)
    return records


def import_into(store: GraphStore, records: Iterable[dict[str, Any]]) -> int:
    """Apply records to ``store`` idempotently; returns how many records were read.

    Engrams that already exist are left as they are; cues are upserted by name; edges are
    created or set to the exported strength, so importing the same file twice changes nothing.

    Raises:
        ValueError: on an unknown record kind (the file is not a Smriti export).
    """
    applied = 0
    cue_ids: dict[str, str] = {}

    def cue_id(name: str, cue_type: str = "keyword") -> str:
        if name not in cue_ids:
            cue_ids[name] = store.upsert_cue(Cue(name=name, cue_type=cue_type)).id
        return cue_ids[name]

    for record in records:
        kind = record.get("kind")
        if kind == "meta":
            if record["key"] not in LOCAL_META_KEYS:
                store.set_meta(record["key"], str(record["value"]))
        elif kind == "engram":
            if store.get_engram(record["id"]) is None:
                store.create_engram(engram_from_record(record))
        elif kind == "cue":
            cue = Cue(
                id=record["id"],
                name=record["name"],
                cue_type=record.get("cue_type", "keyword"),
                embedding=record.get("embedding"),
            )
            cue_ids[cue.name] = store.upsert_cue(cue).id
        elif kind == "encoded_by":
            store.link_cue(record["engram_id"], cue_id(record["cue"]))
        elif kind == "associated_with":
            store.associate(
                Association(
                    source_id=record["source_id"],
                    target_id=record["target_id"],
                    strength=float(record["strength"]),
                    relation_type=record.get("relation_type", "similar"),
                    created_at=_dt(record["created_at"]),
                )
            )
        elif kind == "co_occurs":
            cue_id(record["source"])
            cue_id(record["target"])
            store.add_cooccurrence(
                record["source"], record["target"], float(record["strength"]), replace=True
            )
        elif kind == "relates_to":
            cue_id(record["source"])
            cue_id(record["target"])
            store.add_relation(
                Relation(
                    source=record["source"],
                    relation=record["relation"],
                    target=record["target"],
                    engram_id=record.get("engram_id", ""),
                    created_at=_dt(record["created_at"]),
                )
            )
        else:
            raise ValueError(f"unknown record kind {kind!r}: not a Smriti export")
        applied += 1
    return applied
