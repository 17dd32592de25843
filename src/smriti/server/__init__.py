"""The Smriti MCP server: three tools over a user's :class:`~smriti.memory.Memory`.

* ``app``: the tools on a typed lifespan context and ``build_server`` (the SDK examples' shape)
* ``launch``: ``smriti-mcp``'s arguments, logging and transports (``main``)
* ``schemas``, ``resources``: what the tools return and the ``memory://`` resources
* ``stdio``: the stdio transport that answers every line
* ``users``, ``auth``, ``tokens``: one memory per authenticated HTTP user
* ``shared/``: the per-user shared daemon, its client and the stdio relay to it

Nothing is imported here, so ``smriti.server.shared.client`` (which the CLI uses) stays cheap.
"""

from __future__ import annotations


def main(argv: list[str] | None = None) -> None:
    """The ``smriti-mcp`` console script (see :func:`smriti.server.launch.main`)."""
    from smriti.server.launch import main as launch_main

    launch_main(argv)
