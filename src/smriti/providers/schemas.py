"""What analysis produces: the structured output the LLM is asked for, and the heuristic's too.

Validation is lenient where a model's slip must not cost the whole answer (an answer that
fails validation is retried and, in the end, parked): overlong or empty facts are dropped and
their number capped, and a time reference that is not an ISO date or date-time, or lies in
the future, becomes None.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field, field_validator

from smriti.stores.base import MEMORY_TYPES, MemoryType

INTENTS = ("decision", "procedure", "event", "person", "fact", "general")
MAX_FACTS = 8
MAX_FACT_CHARS = 200


class CueItem(BaseModel):
    """A retrieval cue: an entity or a keyword the memory can be found by."""

    name: str = Field(description="the entity or keyword, as short as possible (1-3 words)")
    type: str = Field(
        default="keyword",
        description="person, place, organization, technology, time, event, concept or keyword",
    )

    @field_validator("type", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> str:
        return str(value or "keyword").strip().lower() or "keyword"


class RelationItem(BaseModel):
    """A fact between two entities, e.g. ("database-engineer", "uses", "pgvector")."""

    source: str
    relation: str = Field(description="a short verb phrase in snake_case, e.g. uses, works_at")
    target: str

    @field_validator("relation", mode="before")
    @classmethod
    def _snake(cls, value: Any) -> str:
        return "_".join(str(value).strip().lower().split()) or "related_to"


class Analysis(BaseModel):
    """How a memory is encoded."""

    summary: str = Field(description="one sentence, at most 200 characters")
    memory_type: MemoryType = Field(
        description="episodic: an event or conversation; semantic: a fact or preference; "
        "procedural: how to do something"
    )
    cues: list[CueItem] = Field(default_factory=list, description="up to 12 entities and keywords")
    relations: list[RelationItem] = Field(default_factory=list, description="facts between entities")
    facts: list[str] = Field(
        default_factory=list,
        description=f"up to {MAX_FACTS} short self-contained statements the memory states, each at "
        f"most {MAX_FACT_CHARS} characters, naming who or what they are about "
        '(e.g. "Alice prefers Qdrant")',
    )
    occurred_at: str | None = Field(
        default=None,
        description="when the event the memory describes happened, as an ISO 8601 date "
        "(2024-05-07) or date-time, relative times resolved against the time the memory was "
        "stored; null when the memory states no time",
    )

    @field_validator("facts", mode="before")
    @classmethod
    def _short_facts(cls, value: Any) -> list[str]:
        # One overlong or empty fact is dropped, not a reason to reject the whole analysis.
        if isinstance(value, str):
            value = value.splitlines()
        if not isinstance(value, list | tuple):
            return []
        kept: list[str] = []
        for item in value:
            text = " ".join(str(item).split()) if isinstance(item, str | int | float) else ""
            if text and len(text) <= MAX_FACT_CHARS and text not in kept:
                kept.append(text)
        return kept[:MAX_FACTS]

    @field_validator("occurred_at", mode="before")
    @classmethod
    def _past_time(cls, value: Any) -> str | None:
        moment = parse_time_reference(value)
        return None if moment is None else moment.isoformat()

    def stated_time(self) -> datetime | None:
        """``occurred_at`` as an aware datetime (a date is its midnight, UTC), or None."""
        return parse_time_reference(self.occurred_at)

    @field_validator("memory_type", mode="before")
    @classmethod
    def _known_type(cls, value: Any) -> str:
        # Models answer "Semantic", "fact", "procedure"...: map what is recognisable, default to episodic.
        text = str(value or "").strip().lower()
        for kind in MEMORY_TYPES:
            if text.startswith(kind[:5]):
                return kind
        return "episodic"


def parse_time_reference(value: Any) -> datetime | None:
    """An ISO 8601 date or date-time as an aware datetime (naive means UTC, a date its
    midnight); None for anything else, and for a time more than a day in the future (no event
    a memory tells has happened yet; the day allows for time zones)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if moment > datetime.now(UTC) + timedelta(days=1):
        return None
    return moment.astimezone(UTC)


class ParsedQuery(BaseModel):
    """A recall query taken apart (Memory Fabric step 1)."""

    cues: list[str] = Field(default_factory=list, description="normalised cue names to traverse from")
    entity_hints: list[str] = Field(default_factory=list, description="entities the query names")
    intent: str = Field(default="general", description=" | ".join(INTENTS))
