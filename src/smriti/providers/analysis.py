"""Memory analysis and query parsing: the LLM when one is configured, the heuristic otherwise.

The LLM is asked for structured output. Models behind OpenAI-compatible endpoints do not
all honour that, so the raw answer is repaired when it is almost JSON (code fences, prose
around the object, trailing commas), and anything else - a timeout, an HTTP error, an
answer that is not the schema - falls back to the heuristic analyser with a warning. A
memory is never lost because the model failed.
"""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel, ValidationError

from smriti.providers import heuristic
from smriti.providers.schemas import INTENTS, Analysis, ParsedQuery
from smriti.stores.base import normalise_cue_name

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

log = logging.getLogger(__name__)

ANALYZE_PROMPT = (
    "You encode memories for an AI assistant's long-term memory. Analyse the memory below and "
    "answer with JSON only, matching this schema: {schema}\n"
    "Cues are the entities (people, places, organisations, technologies, dates) and keywords "
    "someone would later search by. Relations are facts between two entities, such as "
    '{{"source": "database-engineer", "relation": "uses", "target": "pgvector"}}. '
    "Facts are the atomic statements the memory makes, each one short and understandable on "
    'its own (name the subject, no pronouns), such as "Alice prefers Qdrant". occurred_at is '
    "when the event the memory tells happened (an ISO date or date-time), only when the memory "
    "states it; null otherwise.\n\nMemory:\n{content}"
)
QUERY_PROMPT = (
    "Take apart a search query for an AI assistant's memory. Answer with JSON only, matching this "
    "schema: {schema}\ncues: the entities and keywords to look up; entity_hints: the entities the "
    "query names; intent: one of decision, procedure, event, person, fact, general.\n\nQuery:\n{content}"
)


def repair_json(text: str) -> dict[str, Any] | None:
    """Best effort: the first JSON object in ``text``, tolerating fences and trailing commas."""
    text = re.sub(r"```(?:json)?", "", text)
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    candidate = re.sub(r",\s*([}\]])", r"\1", text[start : end + 1])
    try:
        value = json.loads(candidate)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def _raw_text(message: Any) -> str:
    """The text of an AIMessage, or the arguments of its first tool call (function calling)."""
    tool_calls = getattr(message, "tool_calls", None) or []
    if tool_calls:
        return json.dumps(tool_calls[0].get("args", {}))
    content = getattr(message, "content", message)
    if isinstance(content, list):  # content blocks
        return "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
    return str(content)


def ask_structured[Model: BaseModel](llm: BaseChatModel, schema: type[Model], prompt: str) -> Model:
    """Ask ``llm`` for an instance of ``schema``; raises ValueError when no valid answer comes back."""
    try:
        structured = llm.with_structured_output(schema, include_raw=True)
    except (NotImplementedError, AttributeError):
        structured = None  # e.g. plain or fake chat models: parse the text answer instead
    if structured is not None:
        # include_raw=True: the answer is {"raw", "parsed", "parsing_error"}, never the model itself
        answer = cast(dict[str, Any], structured.invoke(prompt))
        if answer.get("parsed") is not None:
            return answer["parsed"]
        text = _raw_text(answer.get("raw"))
    else:
        text = _raw_text(llm.invoke(prompt))
    data = repair_json(text)
    if data is None:
        raise ValueError(f"the model did not answer with JSON: {text[:120]!r}")
    try:
        return schema.model_validate(data)
    except ValidationError as error:
        raise ValueError(
            f"the model's JSON does not match {schema.__name__}: {error.error_count()} errors"
        ) from error


def _prompt(template: str, schema: type[BaseModel], content: str) -> str:
    return template.format(schema=json.dumps(schema.model_json_schema()), content=content)


def analyze_memory(llm: BaseChatModel | None, content: str) -> tuple[Analysis, str]:
    """Analyse a memory; returns the analysis and which analyser produced it ("llm" or "heuristic")."""
    if llm is not None:
        try:
            analysis = ask_structured(llm, Analysis, _prompt(ANALYZE_PROMPT, Analysis, content))
            if not analysis.cues:  # an empty answer is useless for recall: keep the model's type and summary
                analysis.cues = heuristic.extract_cues(content)
            return analysis, "llm"
        except Exception as error:  # the model is optional; any failure must not lose the memory
            log.warning(
                "LLM analysis failed (%s: %s); using the heuristic analyser", type(error).__name__, error
            )
    return heuristic.analyze_offline(content), "heuristic"


def parse_query(llm: BaseChatModel | None, query: str) -> ParsedQuery:
    """Parse a recall query into normalised cues, entity hints and an intent."""
    parsed = heuristic.parse_query_offline(query)
    if llm is not None:
        try:
            answer = ask_structured(llm, ParsedQuery, _prompt(QUERY_PROMPT, ParsedQuery, query))
            # The model's cues lead; the heuristic's are kept too, since recall is a union of signals.
            parsed = ParsedQuery(
                cues=[*answer.cues, *parsed.cues],
                entity_hints=answer.entity_hints or parsed.entity_hints,
                intent=answer.intent if answer.intent in INTENTS else parsed.intent,
            )
        except Exception as error:
            log.warning(
                "LLM query parsing failed (%s: %s); using the heuristic parser", type(error).__name__, error
            )
    cues = [normalise_cue_name(c) for c in parsed.cues]
    parsed.cues = [c for c in dict.fromkeys(cues) if c]
    return parsed
