"""What analysis produces: the structured output the LLM is asked for, and the heuristic's too."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from smriti.stores.base import MEMORY_TYPES, MemoryType

INTENTS = ("decision", "procedure", "event", "person", "fact", "general")


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

    @field_validator("memory_type", mode="before")
    @classmethod
    def _known_type(cls, value: Any) -> str:
        # Models answer "Semantic", "fact", "procedure"...: map what is recognisable, default to episodic.
        text = str(value or "").strip().lower()
        for kind in MEMORY_TYPES:
            if text.startswith(kind[:5]):
                return kind
        return "episodic"


class ParsedQuery(BaseModel):
    """A recall query taken apart (Memory Fabric step 1)."""

    cues: list[str] = Field(default_factory=list, description="normalised cue names to traverse from")
    entity_hints: list[str] = Field(default_factory=list, description="entities the query names")
    intent: str = Field(default="general", description=" | ".join(INTENTS))
