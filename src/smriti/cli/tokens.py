"""``smriti token add USER`` / ``revoke`` / ``list``: the bearer tokens of the HTTP server.

``add`` prints the new token once, on stdout (so ``TOKEN=$(smriti token add alice)`` works),
and writes only its SHA-256 to the tokens file (SMRITI_TOKENS_FILE, default
``STORAGE_LOCATION/tokens.json``); a running server picks the change up at its next request.
"""

from __future__ import annotations

from typing import Annotated

import typer

from smriti.cli.render import error_line, mapping_table, notice, out, print_json
from smriti.config import load_settings
from smriti.errors import SmritiError
from smriti.server.tokens import TokenFile

token_app = typer.Typer(help="Bearer tokens of the HTTP server (smriti-mcp --transport streamable-http).",
                        no_args_is_help=True, add_completion=False, rich_markup_mode="rich")  # fmt: skip


def _file() -> TokenFile:
    return TokenFile(load_settings().tokens_file)


@token_app.command("add")
def add(user: Annotated[str, typer.Argument(help="The user whose memory the token opens.")]) -> None:
    """Create a token for USER and print it (once: only its hash is kept)."""
    try:
        tokens = _file()
        entry, token = tokens.add(user)
    except SmritiError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None
    print(token)
    notice(f"token {entry.id} for user {entry.user} added to {tokens.path}; it is shown only this once")


@token_app.command("revoke")
def revoke(
    user_or_id: Annotated[str, typer.Argument(help="A token id (from `smriti token list`) or a user name.")],
) -> None:
    """Revoke one token by id, or every token of a user."""
    try:
        tokens = _file()
        gone = tokens.revoke(user_or_id)
    except SmritiError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None
    for entry in gone:
        out().print(f"revoked token {entry.id} of user {entry.user}", markup=False)


@token_app.command("list")
def list_tokens(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The tokens of the tokens file: id, user, created (never the tokens, which are not kept)."""
    try:
        tokens = _file()
        entries = tokens.read()
    except SmritiError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None
    rows = [{"id": e.id, "user": e.user, "created_at": e.created_at} for e in entries]
    if as_json:
        return print_json(rows)
    if not rows:
        notice(f"no tokens in {tokens.path}: add one with `smriti token add USER`")
        return None
    listing = {r["id"]: f"{r['user']} (created {r['created_at']})" for r in rows}
    out().print(mapping_table(f"{len(rows)} token(s) in {tokens.path}", listing))
    return None
