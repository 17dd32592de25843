"""What a session learned, kept at its end: ``smriti capture -`` for a SessionEnd/Stop hook.

The specification's session-end hook syncs the session's entities into the graph. Storing the
whole transcript would bury the few durable statements under chatter, so capture keeps only
the sentences that state something: a relation the analyser can read ("Alice recommends
cursor pagination"), or a decision, preference, rule or fact ("we decided", "I prefer",
"always", "the deadline is"). Each becomes a memory whose source is the session, through the
store pipeline, so it is analysed, linked and deduplicated against what is already known:
running capture twice on the same transcript adds nothing the second time.

Input (stdin or a file): Claude Code's hook payload (JSON with ``transcript_path`` and
``session_id``; the transcript is JSON Lines of ``user``/``assistant`` messages whose content
is a string or a list of blocks, of which only ``text`` blocks are read), a transcript file
itself, or plain text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smriti.errors import InvalidInput
from smriti.providers.heuristic import extract_relations

if TYPE_CHECKING:
    from smriti.memory import Memory

MAX_FACTS = 50  # memories one session may add
MIN_CHARS, MAX_CHARS = 20, 500  # a statement, not a fragment or a pasted file

# Words that mark a durable statement (decisions, preferences, rules, facts about people and
# projects), as opposed to conversation about the work in progress.
_DURABLE = re.compile(
    r"\b(decided|decision|agreed|prefer(s|red)?|always|never|must|should always|remember|"
    r"the deadline|deadline is|we use|is located|lives in|works (at|on|for)|"
    r"is called|is named|my name is|birthday|allergic|password policy|convention)\b"
    # A decision said as the plan ("We will use Postgres", "we'll go with gRPC", "let's use
    # uv"): the choice, not a step of the work ("we will look at the logs"), so the verb is one
    # that picks something.
    r"|\b(we|i)\s*('ll|\s+will|\s+shall|\s+are\s+going\s+to|'re\s+going\s+to|\s+am\s+going\s+to)"
    r"\s+(use|go\s+with|adopt|switch\s+to|migrate\s+to|move\s+to|stick\s+with|standardi[sz]e\s+on)\b"
    r"|\blet'?s\s+(use|go\s+with|adopt|switch\s+to|stick\s+with)\b"
    r"|\bwe\s+(chose|picked|settled\s+on|went\s+with|switched\s+to|are\s+using)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CODE = re.compile(r"```.*?```", re.DOTALL)


@dataclass(frozen=True)
class Session:
    id: str
    texts: list[str]  # the messages' text, in order


def read_session(raw: str) -> Session:
    """The session in a hook payload, a transcript (JSON Lines) or plain text."""
    stripped = raw.strip()
    if not stripped:
        raise InvalidInput("nothing to capture: the input is empty")
    if stripped.startswith("{") and "\n" not in stripped:
        try:
            payload = json.loads(stripped)
        except ValueError:
            payload = None  # plain text that happens to start with a brace
        if isinstance(payload, dict) and payload.get("transcript_path"):
            path = Path(str(payload["transcript_path"])).expanduser()
            if not path.exists():
                raise InvalidInput(f"the hook's transcript_path does not exist: {path}")
            session = _transcript(path.read_text(encoding="utf-8").splitlines())
            return Session(str(payload.get("session_id") or session.id), session.texts)
    lines = stripped.splitlines()
    if all(_is_json(line) for line in lines[:5]):
        return _transcript(lines)
    return Session("text", [stripped])


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _transcript(lines: Iterable[str]) -> Session:
    session_id, texts = "", []
    for line in lines:
        if not line.strip():
            continue
        try:
            entry: dict[str, Any] = json.loads(line)
        except ValueError:
            continue  # a partly written last line: the rest is still worth reading
        session_id = session_id or str(entry.get("sessionId") or entry.get("session_id") or "")
        if entry.get("type") not in ("user", "assistant"):
            continue
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [
                str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
            ]
    return Session(session_id or "transcript", [t for t in texts if t.strip()])


def statements(texts: Iterable[str]) -> Iterator[str]:
    """The durable statements of the texts, once each, in order (see the module docstring)."""
    seen: set[str] = set()
    for text in texts:
        for sentence in _SENTENCE.split(_CODE.sub(" ", text)):
            sentence = " ".join(sentence.split()).strip("-*• ")
            if not MIN_CHARS <= len(sentence) <= MAX_CHARS or sentence.endswith("?"):
                continue
            key = sentence.lower()
            if key in seen:
                continue
            if _DURABLE.search(sentence) or _names_a_relation(sentence):
                seen.add(key)
                yield sentence


def _names_a_relation(sentence: str) -> bool:
    """A relation whose subject is a name ("Alice recommends ..."), not "the handler uses ..."."""
    return any(relation.source[:1].isupper() for relation in extract_relations(sentence))


def capture(memory: Memory, session: Session) -> dict[str, Any]:
    """Store the session's durable statements; returns what was added and what was known."""
    facts = list(statements(session.texts))[:MAX_FACTS]
    counts = {"stored": 0, "known": 0}
    for fact in facts:
        stored = memory.store(fact, source=f"session:{session.id}", tags="session")
        counts["known" if stored.get("deduplicated") else "stored"] += 1
    return {"session": session.id, "statements": len(facts), **counts}
