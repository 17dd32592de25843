"""Tool errors in plain words.

The SDK checks a call's arguments against the tool's signature with pydantic and sends the
model pydantic's whole report ("1 validation error for smriti_recallArguments\\nlimit\\n  Input
should be ... For further information visit https://errors.pydantic.dev/..."), prefixed with
"Error executing tool <name>: " like every tool error. :class:`SmritiServer` answers one line
per wrong argument instead ("limit must be a whole number"), and drops the prefix: the client
already knows which tool it called.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

_KINDS = {
    "int_parsing": "must be a whole number",
    "int_type": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be text",
    "missing": "is required",
}


def _one(error: Any) -> str:
    field = ".".join(str(part) for part in error["loc"]) or "the arguments"
    kind, context = error["type"], error.get("ctx") or {}
    if kind in _KINDS:
        return f"{field} {_KINDS[kind]}"
    if kind == "literal_error":
        return f"{field} must be one of {context.get('expected', '')}"
    if kind in ("greater_than_equal", "greater_than"):
        return f"{field} must be at least {context.get('ge', context.get('gt'))}"
    if kind in ("less_than_equal", "less_than"):
        return f"{field} must be at most {context.get('le', context.get('lt'))}"
    return f"{field}: {error['msg']}"  # pydantic's short message, without its report and URL


def plain_words(error: ValidationError) -> str:
    """One line naming each wrong argument and what it must be."""
    return "; ".join(dict.fromkeys(_one(item) for item in error.errors()))


class SmritiServer(MCPServer[Any]):
    """``MCPServer`` whose tool errors read as plain words (see the module docstring)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Any = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if type(error) is not ToolError:  # UnexpectedToolError: the SDK's generic words stay
                raise
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(plain_words(error.__cause__)) from error.__cause__
            raise ToolError(str(error).removeprefix(f"Error executing tool {name}: ")) from error.__cause__
