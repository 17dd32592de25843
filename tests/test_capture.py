"""``smriti capture``: a session-end hook that keeps what the session stated, not the transcript."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from smriti.cli import app
from smriti.cli.capture import read_session, statements
from tests.envs import offline_env

SESSION = "9f1c2d3e-0000-4a5b-8c7d-0123456789ab"


def _line(kind: str, content, uuid: str) -> str:
    """One line of a Claude Code transcript (~/.claude/projects/<project>/<session>.jsonl)."""
    return json.dumps(
        {
            "parentUuid": None,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/alice/atlas",
            "sessionId": SESSION,
            "version": "2.0.0",
            "type": kind,
            "message": {"role": kind, "content": content},
            "uuid": uuid,
            "timestamp": "2026-12-01T10:00:00.000Z",
        }
    )


TRANSCRIPT = [
    json.dumps({"type": "summary", "summary": "Pagination for the orders API", "leafUuid": "x"}),
    _line("user", "Can you look at the orders API? We decided to use cursor pagination for it.", "u1"),
    _line(
        "assistant",
        [
            {"type": "text", "text": "Sure. Let me read the handler first."},
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "api/orders.py"}},
        ],
        "a1",
    ),
    _line("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "orders(): always offset"}], "u2"),
    _line(
        "assistant",
        [
            {
                "type": "text",
                "text": "The handler uses offsets.\n```python\nquery.offset(page * size)  # always\n```\n"
                "Alice prefers opaque tokens over page numbers in public APIs.",
            }
        ],
        "a2",
    ),
    _line("user", "Ok thanks! What time is it?", "u3"),
    _line("user", "Remember that the staging deploy runs every night at 02:00 UTC.", "u4"),
]


def _run(tmp_path, *args, input=None):
    env = offline_env(tmp_path / "store", COLUMNS="200")
    return CliRunner().invoke(app, list(args), env=env, input=input)


def test_statements_keep_the_durable_ones_only():
    session = read_session("\n".join(TRANSCRIPT))
    assert session.id == SESSION
    kept = list(statements(session.texts))
    assert kept == [
        "We decided to use cursor pagination for it.",
        "Alice prefers opaque tokens over page numbers in public APIs.",
        "Remember that the staging deploy runs every night at 02:00 UTC.",
    ]  # no tool results, no code, no questions, no chatter


def test_decisions_said_as_the_plan_are_kept_and_plain_next_steps_are_not():
    decisions = [
        "We will use PostgreSQL with pgvector for the search index.",
        "We'll go with gRPC between the billing services.",
        "We are going to switch to uv for the Python builds.",
        "Let's use cursor pagination on the public API.",
        "We went with Tailwind for the admin dashboard.",
    ]
    chatter = [
        "We will look at the failing tests after lunch.",
        "I'll run the migration script again now.",
        "We will use it later?",  # a question is never a statement
    ]
    assert list(statements([" ".join(decisions + chatter)])) == decisions


def test_a_session_end_hook_payload_is_captured_once(tmp_path):
    transcript = tmp_path / f"{SESSION}.jsonl"
    transcript.write_text("\n".join(TRANSCRIPT) + "\n")
    payload = json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(transcript),
            "cwd": "/home/alice/atlas",
            "hook_event_name": "SessionEnd",
            "reason": "exit",
        }
    )
    first = _run(tmp_path, "capture", "-", input=payload)
    assert first.exit_code == 0, first.output
    assert "captured 3 new memories" in first.stderr
    again = _run(tmp_path, "capture", "-", input=payload)
    assert "captured 0 new memories" in again.stderr and "3 already known" in again.stderr

    listed = json.loads(_run(tmp_path, "list", "--json").stdout)["results"]
    assert len(listed) == 3
    assert {item["source"] for item in listed} == {f"session:{SESSION}"}
    found = json.loads(_run(tmp_path, "recall", "what does Alice prefer for public APIs", "--json").stdout)
    assert found["results"][0]["text"] == "Alice prefers opaque tokens over page numbers in public APIs."


def test_plain_text_and_bad_input(tmp_path):
    done = _run(tmp_path, "capture", "-", input="Bob works at Acme since 2021. Nice weather today.")
    assert done.exit_code == 0 and "captured 1 new memories" in done.stderr
    empty = _run(tmp_path, "capture", "-", input="   ")
    assert empty.exit_code == 2 and "empty" in empty.stderr
    nowhere = json.dumps({"transcript_path": str(tmp_path / "nope.jsonl")})
    missing = _run(tmp_path, "capture", "-", input=nowhere)
    assert missing.exit_code == 2 and "does not exist" in missing.stderr
