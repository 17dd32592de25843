"""The shared server's routes for the CLI, beside its MCP tools (see :mod:`smriti.cli.shared`).

The CLI calls the tools on the lines socket (:mod:`smriti.server.shared.calls`); these routes,
on the same 0600 HTTP socket as ``/mcp``, do what no tool does:

* ``POST /cli/resolve``: the id a prefix names (``smriti forget PREFIX``);
* ``GET /cli/export``: every record as JSON Lines (``smriti export``);
* ``POST /cli/lend``: the hand-over for the commands that open the database themselves
  (``import``, ``view``, ``restore``): the server closes the memory, answers one line, and keeps
  it closed until the CLI closes the connection (its command done, or the CLI killed). Meanwhile
  the clients' requests wait, and the first one after opens the memory again: clients survive
  the hand-over, which a ``smriti stop`` they did not ask for would not give them.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio

from smriti.errors import NotFound, UserError
from smriti.runtime import close_runtime
from smriti.server.sdk import lifespan_state

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer
    from starlette.requests import Request
    from starlette.responses import Response

    from smriti.server.users import UserRuntimes

logger = logging.getLogger("smriti.shared")
LEND_POLL = 0.2  # seconds between looks at whether the CLI that borrowed the memory is still there


def add_cli_routes(server: MCPServer) -> None:
    """Add the CLI's routes to ``server`` (the single-user shared server)."""
    from starlette.responses import JSONResponse, StreamingResponse

    def runtimes() -> UserRuntimes:
        state: UserRuntimes = lifespan_state(server)
        return state

    @server.custom_route("/cli/resolve", methods=["POST"], include_in_schema=False)
    async def _resolve(request: Request) -> Response:
        prefix = str((await request.json()).get("prefix", ""))
        try:
            async with runtimes().using(None) as runtime:
                found = await anyio.to_thread.run_sync(runtime.memory.resolve_id, prefix)
        except UserError as error:
            return JSONResponse(
                {"error": str(error)}, status_code=404 if isinstance(error, NotFound) else 400
            )
        return JSONResponse({"id": found})

    @server.custom_route("/cli/export", methods=["GET"], include_in_schema=False)
    async def _export(_: Request) -> Response:
        async def lines() -> AsyncIterator[str]:
            # Held for the whole stream: the memory is not lent away under a running export.
            async with runtimes().using(None) as runtime:
                records = runtime.memory.export_records()

                def batch() -> list[dict[str, Any]]:
                    return list(itertools.islice(records, 500))

                # The store's reads are blocking: each batch is read in a worker thread.
                while chunk := await anyio.to_thread.run_sync(batch):
                    yield "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in chunk)

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    @server.custom_route("/cli/lend", methods=["POST"], include_in_schema=False)
    async def _lend(request: Request) -> Response:
        command = str((await request.json()).get("command", "a command"))

        async def lines() -> AsyncIterator[str]:
            close = functools.partial(close_runtime, final_sync=False)
            async with runtimes().lent(None, close):
                logger.info("`smriti %s` opens the memory itself; requests wait until it is done", command)
                yield json.dumps({"lent": command}) + "\n"
                # Until the CLI hangs up (its command done, or it was killed).
                while not await request.is_disconnected():
                    await anyio.sleep(LEND_POLL)

        return StreamingResponse(lines(), media_type="application/x-ndjson")
