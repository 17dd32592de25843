"""Logging for every process ``smriti-mcp`` runs as (the app, the relay, the shared daemon)."""

from __future__ import annotations

import logging
import sys


def configure_logging(level: str) -> None:
    """Send all logging to stderr (stdout is the MCP channel on stdio) at ``level``."""
    root = logging.getLogger()
    if not any(getattr(h, "_smriti", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        handler._smriti = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.setLevel(level)
