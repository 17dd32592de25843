"""The parsed query as the recall result shows it (Memory Fabric step 1).

The specification's step 1 turns "What pagination approach did database-engineer
recommend?" into ``query`` "pagination approach recommend", ``entity_hints`` and ``intent``.
parse_query (nodes/search.py) computes cues, hints and intent for the search itself; this
module only words them for the caller, so they can see what their question was taken to ask.
"""

from __future__ import annotations

from typing import Any

from smriti.text import STOPWORDS, words


def cleaned_query(query: str) -> str:
    """The query's words without stop words and repeats, in order, case kept ("What pagination
    approach did database-engineer recommend?" -> "pagination approach database-engineer recommend")."""
    kept = [w for w in words(query) if w.casefold() not in STOPWORDS]
    return " ".join(dict.fromkeys(kept))


def parsed_result(query: str, parsed: dict[str, Any]) -> dict[str, Any]:
    """``{query, entity_hints, intent}``: the cleaned query (the parser's own when it gives one),
    the entities the query names and its intent."""
    return {
        "query": str(parsed.get("query") or cleaned_query(query)),
        "entity_hints": list(parsed.get("entity_hints", [])),
        "intent": str(parsed.get("intent", "general")),
    }
