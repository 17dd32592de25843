"""Rows of the openCypher stores: how engrams, cues and edges are stored and read back.

* Timestamps are stored as ISO-8601 strings in UTC with microseconds (fixed width, so
  string order is time order, and exact: FalkorDB returns doubles with only 15 significant
  digits, which would lose the microseconds of an epoch float). They come back tz-aware UTC.
* A property missing on an older node reads back with the data model's default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from smriti.stores.base import (
    ENGRAM_FIELDS,
    MEMORY_TYPES,
    NO_CLUSTER,
    Association,
    Cue,
    Engram,
)

# Property projections shared by the store and its export.
# Every Engram field but the embedding (read only where needed), derived from the dataclass.
ENGRAM_COLUMNS = ", ".join(f"e.{name} AS {name}" for name in ENGRAM_FIELDS if name != "embedding")
CUE_COLUMNS = "c.id AS id, c.name AS name, c.cue_type AS cue_type, c.embedding AS embedding"


# -- rows -------------------------------------------------------------------------------------
def to_stored_time(value: datetime) -> str:
    """A datetime as the stored string: ISO-8601, UTC, microseconds (naive means UTC)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def from_stored_time(value: Any) -> datetime:
    """The inverse of :func:`to_stored_time`; also accepts epoch seconds."""
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    parsed = datetime.fromisoformat(str(value))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def number(row: Mapping[str, Any], key: str, default: float) -> float:
    """``row[key]`` as a float, ``default`` when the property is missing."""
    value = row.get(key)
    return float(default if value is None else value)


def floats(values: Sequence[float] | None) -> list[float] | None:
    """A vector as plain Python floats (None stays None)."""
    # Drivers serialise parameters themselves: plain Python floats only (a numpy array
    # would be stringified as "[0.1 0.2]" by the FalkorDB client).
    return None if values is None else [float(v) for v in values]


def engram_from_row(row: Mapping[str, Any]) -> Engram:
    """An Engram from a row of ENGRAM_COLUMNS (plus ``embedding``)."""
    # Properties are schemaless here: nodes written before a property existed (an older
    # Smriti, an import from elsewhere) read back with the data model's defaults.
    return Engram(
        id=row["id"],
        content=row.get("content") or "",
        summary=row.get("summary") or "",
        memory_type=row.get("memory_type") or "episodic",
        importance=number(row, "importance", 0.5),
        access_count=int(number(row, "access_count", 0)),
        created_at=from_stored_time(row["created_at"]),
        last_accessed_at=from_stored_time(row.get("last_accessed_at") or row["created_at"]),
        decay_factor=number(row, "decay_factor", 1.0),
        embedding=floats(row.get("embedding")),
        source=row.get("source") or "",
        tags=row.get("tags") or "",
        cluster_id=int(number(row, "cluster_id", NO_CLUSTER)),
        superseded_by=row.get("superseded_by") or "",
        facts=(row.get("facts") or "").replace(_STORED_LINE_BREAK, "\n"),
    )


def cue_from_row(row: Mapping[str, Any]) -> Cue:
    return Cue(id=row["id"], name=row["name"], cue_type=row["cue_type"], embedding=floats(row["embedding"]))


def association_from_row(row: Mapping[str, Any]) -> Association:
    return Association(
        source_id=row["source_id"],
        target_id=row["target_id"],
        strength=float(row["strength"]),
        relation_type=row["relation_type"] or "similar",
        created_at=from_stored_time(row["created_at"]),
    )


_TIME_FIELDS = frozenset({"created_at", "last_accessed_at"})
# Facts are stored one per line, but FalkorDB's full-text tokenizer does not split on a bare
# newline (measured on 4.x: "Kafka\nBob" indexes one token, found by neither word), so lines are
# stored joined by a space and a newline, and read back as plain lines.
_STORED_LINE_BREAK = " \n"


def engram_props(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Engram fields as stored properties (times as strings, numbers coerced).

    Raises:
        ValueError: a memory_type outside MEMORY_TYPES.
    """
    props: dict[str, Any] = {}
    for name, value in fields.items():
        if name in _TIME_FIELDS:
            if not isinstance(value, datetime):
                raise TypeError(f"{name} must be a datetime, not {type(value).__name__}")
            value = to_stored_time(value)
        elif name == "facts":
            value = "\n".join(line.rstrip() for line in str(value).split("\n")).replace(
                "\n", _STORED_LINE_BREAK
            )
        elif name == "memory_type" and value not in MEMORY_TYPES:
            raise ValueError(f"memory_type must be one of {MEMORY_TYPES}, not {value!r}")
        elif name in ("importance", "decay_factor"):
            value = float(value)
        elif name in ("access_count", "cluster_id"):
            value = int(value)
        props[name] = value
    return props
