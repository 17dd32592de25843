"""Errors a caller can act on. The MCP server turns them into tool errors, the CLI into messages."""

from __future__ import annotations


class InvalidInput(ValueError):
    """A request that cannot be carried out as asked (nothing was changed)."""


class NotFound(LookupError):
    """No memory with that id for this user."""
