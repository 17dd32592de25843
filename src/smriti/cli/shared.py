"""The CLI on a memory that the user's shared server holds open.

While the shared server runs, it alone may open the embedded database, so ``smriti`` commands
ask it instead, found and called with the standard library only (no settings, no MCP SDK, no
HTTP library: :mod:`smriti.server.shared.calls`), so a command costs little more than Python's
start: its MCP tools on the lines socket (store, recall, forget, consolidate, stats, sync), which
check every request as they check an MCP client's, and its routes for what no tool does
(``/cli/resolve``: the id a prefix names; ``/cli/export``: every record as JSON Lines).

The commands that open the database themselves (``import``, ``view``, ``restore``) borrow it
(:func:`borrowed`): the server closes the memory until the command is done, its clients'
requests wait meanwhile, and the first one after opens it again.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from smriti.errors import InvalidInput, StoreError
from smriti.server.shared.calls import call_tool, http_request, json_lines, post_json
from smriti.server.shared.client import Attachment, SharedPaths, server_status, shared_paths


class SharedMemory:
    """The memory of the shared server, answering what the CLI's commands call."""

    def __init__(self, paths: SharedPaths) -> None:
        self.paths = paths

    def tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return call_tool(self.paths, name, arguments)

    def store(self, content: str, **fields: Any) -> dict[str, Any]:
        """``smriti_store``: the server checks the request (MAX_CONTENT_CHARS and every rule)."""
        arguments = {"content": content, **{key: value for key, value in fields.items() if value != ""}}
        return self.tool("smriti_store", arguments)

    def recall(self, **request: Any) -> dict[str, Any]:
        """``smriti_recall`` (checked by the server, as for any client)."""
        return self.tool("smriti_recall", {key: value for key, value in request.items() if value is not None})

    def forget(self, memory_id: str) -> dict[str, Any]:
        done = self.tool("smriti_manage", {"action": "forget", "memory_id": memory_id})
        details: dict[str, Any] = done["details"]
        return details

    def resolve_id(self, prefix: str) -> str:
        return str(post_json(self.paths, "/cli/resolve", {"prefix": prefix})["id"])

    def export_records(self) -> Iterator[dict[str, Any]]:
        return json_lines(self.paths, "/cli/export")


class SharedRuntime:
    """What the CLI's commands use while the shared server holds the memory."""

    def __init__(self, paths: SharedPaths, status: dict[str, Any]) -> None:
        self.paths = paths
        self.status = status  # the server's /status: pid, settings it runs with
        self.memory = SharedMemory(paths)

    def consolidate(self, on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
        done = self.memory.tool("smriti_manage", {"action": "consolidate", "explain": True})
        return {**done["details"], "trace": done.get("trace", [])}

    def sync(self) -> dict[str, Any]:
        details: dict[str, Any] = self.memory.tool("smriti_manage", {"action": "sync"})["details"]
        return details

    def describe(self) -> dict[str, Any]:
        details: dict[str, Any] = self.memory.tool("smriti_manage", {"action": "stats"})["details"]
        return details

    def refuse(self, command: str) -> InvalidInput:
        """The error for a command the shared server does itself (``enrich``: its worker)."""
        return InvalidInput(
            f"the shared Smriti server holds this memory ({self.paths.socket}) and runs `smriti {command}`'s "
            "work in the background; to run it here, `smriti stop` first"
        )


def shared_runtime(user: str | None) -> SharedRuntime | None:
    """A :class:`SharedRuntime` when a shared server serves ``user`` (default ACCESSING_USER).

    Read from the environment as the stdio relay reads it (:class:`Attachment`), without the
    settings: None when SMRITI_SHARED is off or nothing answers on the user's socket.

    Raises:
        UnsafeUserError: the user name cannot be a folder name.
    """
    attachment = Attachment.from_environment()
    if attachment is None:
        return None
    if user is not None:
        attachment = dataclasses.replace(attachment, accessing_user=user)
    paths = shared_paths(attachment)
    status = server_status(paths)
    return None if status is None else SharedRuntime(paths, status)


@contextlib.contextmanager
def borrowed(user: str | None, command: str) -> Iterator[None]:
    """The user's memory closed by its shared server (if one runs) while the block runs.

    The block opens the database itself; when it ends (or this process dies) the connection
    closes and the server's next request opens the memory again.

    Raises:
        StoreError: the server did not hand the memory over.
    """
    shared = shared_runtime(user)
    if shared is None:
        yield
        return
    with http_request(shared.paths, "POST", "/cli/lend", {"command": command}) as response:
        if not response.readline().strip():
            raise StoreError(f"the shared Smriti server did not hand the memory over for `smriti {command}`")
        yield
