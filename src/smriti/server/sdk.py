"""Every private part of the MCP Python SDK that Smriti reaches into, in one module (mcp 2.3).

Each function below is a reach the SDK's public API does not offer (the reason is on each).
Nothing else in Smriti touches an underscored SDK name, and ``tests/test_sdk_private.py`` checks
that each one still exists with the shape used here, so an SDK release that renames or reshapes
one fails that test instead of a server in use.

Imports of the SDK are deferred: this module is imported by code on a cold start's path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx2
    from mcp.server.connection import Connection
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer
    from mcp.server.session import ServerSession


def lowlevel_server(server: MCPServer) -> Server[Any]:
    """The low-level server under ``server``.

    Why private: ``MCPServer.run_stdio_async`` runs it only on the SDK's own stdio streams (Smriti
    reads stdin itself, to answer malformed lines: ``server/stdio.py``), and the spec methods
    MCPServer does not serve (``resources/subscribe``, ``logging/setLevel``) are registered on it:
    the SDK's own docs point at its ``add_request_handler`` for them.
    """
    lowlevel: Server[Any] = server._lowlevel_server
    return lowlevel


def lifespan_state(server: MCPServer) -> Any:
    """The state ``server``'s lifespan yielded when the streamable-HTTP session manager entered
    it (the app's open memory), for sessions served on streams of Smriti's own.

    Why private: the session manager keeps it for its own sessions; the shared server's lines
    socket (``server/shared/lines.py``) serves relays' sessions in the same app and must share it,
    not enter the lifespan again (that would open the store a second time).
    """
    return server.session_manager._lifespan_state


def tool_parameters(server: MCPServer, name: str) -> dict[str, Any]:
    """The input JSON schema of the registered tool ``name``, to amend in place.

    Why private: MCPServer has no public way to read or amend a registered tool's schema (the
    rules the tools apply are advertised in it: ``server/app.py``).

    Raises:
        KeyError: no tool of that name is registered.
    """
    tool = server._tool_manager.get_tool(name)
    if tool is None:
        raise KeyError(name)
    parameters: dict[str, Any] = tool.parameters
    return parameters


def session_count(server: MCPServer) -> int:
    """How many streamable HTTP sessions ``server`` holds open (``smriti status``).

    Why private: the session manager keeps them in a dict and exposes no count.
    """
    return len(server.session_manager._server_instances)


def session_connection(session: ServerSession) -> Connection:
    """The client connection behind a request's ``session``.

    Why private: a handler's ServerSession lives for one request; the client's Connection (its
    standalone stream, where resource notifications go) is only reachable from it.
    """
    connection: Connection = session._connection
    return connection


def http_client(
    headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None
) -> httpx2.AsyncClient:
    """An HTTP client with the SDK transports' own defaults (timeouts, redirects).

    Why private: the SDK's streamable HTTP client makes its own this way when given none, but the
    helper lives in ``mcp.shared._httpx_utils``; Smriti's CLI needs one of its own to reach a
    server on a unix socket.
    """
    from mcp.shared._httpx_utils import create_mcp_http_client

    return create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
