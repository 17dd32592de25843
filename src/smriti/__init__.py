"""Smriti: graph-shaped long-term memory for LLM agents.

The import package maps the repository's top level (see pyproject.toml): ``smriti.config``,
``smriti.stores``, ``smriti.providers``, ``smriti.nodes``, ``smriti.pipelines``,
``smriti.server.app`` and ``smriti.cli.commands``. Nothing heavy is imported here, so ``import smriti``
stays cheap for the CLI and the MCP server's start-up.
"""

__version__ = "0.1.0"

__all__ = ["Memory", "SmritiStore", "as_tools"]

# Public entry points resolve on first use (PEP 562), so ``import smriti`` loads no LangGraph.
_LAZY = {
    "Memory": ("smriti.memory", "Memory"),
    "SmritiStore": ("smriti.integrations.langgraph_store", "SmritiStore"),
    "as_tools": ("smriti.integrations.tools", "as_tools"),
}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        module, attribute = _LAZY[name]
        value = getattr(import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'smriti' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
