"""Smriti: graph-shaped long-term memory for LLM agents.

The import package maps the repository's top level (see pyproject.toml): ``smriti.config``,
``smriti.stores``, ``smriti.providers``, ``smriti.nodes``, ``smriti.pipelines``,
``smriti.server`` and ``smriti.cli``. Nothing heavy is imported here, so ``import smriti``
stays cheap for the CLI and the MCP server's start-up.
"""

__version__ = "0.1.0"
