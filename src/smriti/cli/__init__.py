"""The ``smriti`` command line (typer + rich).

* ``commands``: the typer app and every command
* ``render``: tables, JSON and one-line errors on the terminal
* ``transfer``: export and import of records; ``remote`` and ``shared``: the commands on a
  memory the user's shared server holds open; ``tokens``: HTTP bearer tokens
* ``capture``: a session transcript into memories (hooks); ``importers/``: one module per source
"""

from __future__ import annotations

from smriti.cli.commands import app, main

__all__ = ["app", "main"]
