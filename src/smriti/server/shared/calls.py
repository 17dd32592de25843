"""The CLI's calls to the user's shared server, in the standard library only.

``smriti recall`` beside a running client used to speak MCP's streamable HTTP to the server
through the MCP SDK and httpx2: importing them, plus the SDK's session (initialize, the call,
a DELETE), cost 4.5-5.9 s a command on a loaded machine, against ~1 s for opening the file
directly (issue 44). Here the same tools are called on the server's lines socket, where a
relay's client speaks to it (:mod:`smriti.server.shared.lines`): one connection, the
``initialize`` handshake and one ``tools/call``, as newline-delimited JSON-RPC, with nothing
imported but the standard library. The server runs the very tool an MCP client calls, with its
checks and notifications.

What no tool does goes to the server's own routes on its HTTP socket (``/cli/...``, see
:mod:`smriti.server.shared.routes`), through :func:`http_request`: an ``http.client``
connection over the unix socket.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from smriti import __version__
from smriti.errors import InvalidInput, NotFound, StoreError
from smriti.server.shared.client import SharedPaths

if TYPE_CHECKING:
    import http.client

# Any version the server's SDK accepts; it answers with the one it speaks.
PROTOCOL_VERSION = "2025-06-18"
CONNECT_TIMEOUT = 5.0


def call_tool(paths: SharedPaths, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call the tool ``name`` of the shared server; returns its structured content.

    No read timeout: a consolidation may take minutes, and the server is local.

    Raises:
        InvalidInput: the tool refused the call (its message, as an MCP client shows it).
        StoreError: the server could not be reached or answered with a protocol error.
    """
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(str(paths.lines))
            sock.settimeout(None)
            with sock.makefile("rwb") as stream:
                hello = {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "smriti-cli", "version": __version__},
                }
                _send(stream, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
                _answer(stream, 1)
                _send(stream, {"jsonrpc": "2.0", "method": "notifications/initialized"})
                call = {"name": name, "arguments": arguments}
                _send(stream, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
                result = _answer(stream, 2)
    except OSError as error:
        raise StoreError(f"cannot reach the shared Smriti server ({paths.lines}): {error}") from None
    if result.get("isError"):
        text = " ".join(str(block.get("text", "")) for block in result.get("content", []))
        raise InvalidInput(text.removeprefix(f"Error executing tool {name}: "))
    return dict(result.get("structuredContent") or {})


def _send(stream: Any, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message).encode() + b"\n")
    stream.flush()


def _answer(stream: Any, request_id: int) -> dict[str, Any]:
    """The result of request ``request_id``; notifications on the way are skipped."""
    while line := stream.readline():
        message = json.loads(line)
        if message.get("id") != request_id or "method" in message:
            continue
        if "error" in message:
            raise StoreError(f"the shared Smriti server answered: {message['error'].get('message')}")
        result: dict[str, Any] = message.get("result") or {}
        return result
    raise StoreError("the shared Smriti server closed the connection before it answered")


def _connection(path: str) -> http.client.HTTPConnection:
    """An HTTP/1.1 connection whose socket is the server's unix socket (http.client is imported
    here: a tool call, the common case, needs none of it)."""
    import http.client

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(CONNECT_TIMEOUT)
            self.sock.connect(path)
            self.sock.settimeout(None)  # no read timeout: an export or a hand-over may take long

    return UnixConnection("localhost")


@contextlib.contextmanager
def http_request(
    paths: SharedPaths, method: str, path: str, body: dict[str, Any] | None = None
) -> Iterator[http.client.HTTPResponse]:
    """One request to the server's HTTP socket; yields the response once its status is 200.

    Raises:
        NotFound: the server answered 404 (its message).
        InvalidInput: 400 or 409 (its message).
        StoreError: another status, or the server could not be reached.
    """
    connection = _connection(str(paths.socket))
    try:
        payload = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            connection.request(method, path, body=payload, headers=headers)
            response = connection.getresponse()
        except OSError as error:
            raise StoreError(f"cannot reach the shared Smriti server ({paths.socket}): {error}") from None
        if response.status != 200:
            raise _refusal(response)
        yield response
    finally:
        connection.close()


def _refusal(response: http.client.HTTPResponse) -> Exception:
    text = response.read().decode("utf-8", "replace")
    try:
        message = str(json.loads(text)["error"])
    except (ValueError, KeyError, TypeError):
        message = text.strip() or f"the shared Smriti server answered {response.status}"
    if response.status == 404:
        return NotFound(message)
    if response.status in (400, 409):
        return InvalidInput(message)
    return StoreError(message)


def post_json(paths: SharedPaths, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to a route and return its JSON answer (see :func:`http_request`)."""
    with http_request(paths, "POST", path, body) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def json_lines(paths: SharedPaths, path: str) -> Iterator[dict[str, Any]]:
    """GET a route that streams JSON Lines, one record at a time."""
    with http_request(paths, "GET", path) as response:
        while line := response.readline():
            if line.strip():
                yield json.loads(line)
