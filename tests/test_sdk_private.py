"""The MCP SDK's private parts that ``smriti.server.sdk`` reaches into still exist with the shape it
uses: an SDK release that renames or reshapes one fails here, not in a server. And no other
module of Smriti reaches into the SDK's private names."""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.models import InitializationOptions

import smriti
from smriti.server import sdk

PACKAGE = Path(smriti.__file__).parent
# The one module allowed a private SDK name (the stdio relay imports no SDK at all).
ALLOWED = {PACKAGE / "server" / "sdk.py"}


def _server() -> MCPServer:
    server = MCPServer("probe")

    @server.tool()
    def remember(text: str, importance: float = 0.5) -> str:
        return text

    return server


def test_the_lowlevel_server_runs_on_streams_of_our_own():
    lowlevel = sdk.lowlevel_server(_server())
    assert isinstance(lowlevel, Server)
    parameters = list(inspect.signature(lowlevel.run).parameters)
    assert parameters[:3] == ["read_stream", "write_stream", "initialization_options"]
    assert isinstance(lowlevel.create_initialization_options(), InitializationOptions)
    assert callable(lowlevel.add_request_handler)


def test_a_registered_tools_schema_is_the_one_it_advertises():
    server = _server()
    sdk.tool_parameters(server, "remember")["properties"]["importance"]["maximum"] = 1.0
    listed = anyio.run(server.list_tools)
    assert listed[0].input_schema["properties"]["importance"]["maximum"] == 1.0  # amended in place
    with pytest.raises(KeyError):
        sdk.tool_parameters(server, "absent")


def test_sessions_are_counted_from_the_session_managers_dict():
    server = _server()
    server.streamable_http_app()
    assert isinstance(server.session_manager._server_instances, dict)
    assert sdk.session_count(server) == 0
    server.session_manager._server_instances["probe"] = object()  # type: ignore[assignment]
    assert sdk.session_count(server) == 1


def test_the_lifespan_state_is_what_the_session_manager_entered_the_lifespan_with():
    """What the lines socket serves relays' sessions with (the app's open memory): the state the
    app's lifespan yielded, while the session manager runs, and nothing once it has stopped."""
    opened = {"memory": "open"}

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[dict[str, str]]:
        yield opened

    server = MCPServer("probe", lifespan=lifespan)
    server.streamable_http_app()
    seen: list[object] = []

    async def run() -> None:
        async with server.session_manager.run():
            seen.append(sdk.lifespan_state(server))
        seen.append(sdk.lifespan_state(server))

    anyio.run(run)
    assert seen == [opened, None]


def test_a_requests_session_leads_to_its_clients_connection():
    """Through a real client session (the SDK's in-memory transport): a request's session gives
    its client's Connection, which resource notifications are sent on."""
    server = MCPServer("probe")
    seen: list[object] = []

    @server.tool()
    def probe(ctx: Context) -> str:
        seen.append(sdk.session_connection(ctx.session))
        return "ok"

    async def call() -> None:
        async with Client(server) as client:
            await client.call_tool("probe", {})
            await client.call_tool("probe", {})

    anyio.run(call)
    assert len(seen) == 2 and all(isinstance(connection, Connection) for connection in seen)
    assert callable(seen[0].send_resource_updated)  # what subscriptions.py notifies through


def test_the_http_client_is_an_httpx2_client_with_our_headers():
    async def make() -> httpx2.AsyncClient:
        async with sdk.http_client(headers={"Authorization": "Bearer t"}) as client:
            return client

    client = anyio.run(make)
    assert isinstance(client, httpx2.AsyncClient)
    assert client.headers["Authorization"] == "Bearer t"


def test_no_other_module_reaches_into_the_sdks_private_names():
    private = re.compile(
        r"\b(mcp(?:_types)?(?:\.\w+)*\._\w+)"
        r"|\._(?:lowlevel_server|tool_manager|server_instances|connection|lifespan_state)\b"
    )
    offenders = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path in PACKAGE.rglob("*.py")
        if path not in ALLOWED
        for match in private.finditer(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
