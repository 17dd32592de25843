"""CLI commands answered by a running server: ``--server URL`` or the user's shared server.

An embedded database admits one process: while the server holds a user's SQLite or Kuzu file, a hook
that runs ``smriti context`` would find it locked. With ``--server URL`` the CLI asks the
running server through its MCP tools instead of opening the database itself. A server that
authenticates gets the bearer token in ``SMRITI_TOKEN`` (from ``smriti token add USER``).
"""

from __future__ import annotations

import os
from typing import Any

from smriti.errors import InvalidInput, StoreError


def call_tool(url: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call one tool on the server at ``url``; returns its structured content.

    (The user's shared server is asked without the MCP SDK: :mod:`smriti.server.shared.calls`.)

    Raises:
        InvalidInput: the server refused the call (tool error), with its message, or the token.
        StoreError: the server could not be reached.
    """
    import anyio
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from smriti.server.sdk import http_client

    token = os.environ.get("SMRITI_TOKEN", "").strip()
    headers = {"Authorization": f"Bearer {token}"} if token else None

    refused: list[int] = []  # the client reports a 401 as a bare "error response": note it here

    async def note_refusal(response: Any) -> None:
        if response.status_code in (401, 403):
            refused.append(response.status_code)

    async def run() -> Any:
        async with http_client(headers=headers) as http:
            http.event_hooks["response"].append(note_refusal)
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return await client.call_tool(name, arguments)

    try:
        result = anyio.run(run)
    except Exception as error:  # connection refused, DNS, HTTP errors, inside exception groups
        if refused:
            why = "was refused" if token else "is missing"
            raise InvalidInput(
                f"the Smriti server at {url} answered {refused[0]}: the bearer token (SMRITI_TOKEN) {why}; "
                "create one with `smriti token add USER`"
            ) from None
        raise StoreError(f"cannot reach the Smriti server at {url}: {_first_cause(error)}") from None
    if result.is_error:
        text = " ".join(getattr(block, "text", "") for block in result.content)
        raise InvalidInput(text.removeprefix(f"Error executing tool {name}: "))
    return dict(result.structured_content or {})


def _first_cause(error: BaseException) -> str:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"
