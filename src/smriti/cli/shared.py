"""The CLI on a memory that the user's shared server holds open.

While the shared server runs, it alone may open the embedded database, so ``smriti`` commands
ask it instead: through its MCP tools (store, recall, forget, consolidate, stats, sync) and, for
what no tool does, through two routes of its own on the same 0600 socket (``/cli/resolve``: the
id a prefix names; ``/cli/export``: every record as JSON Lines). :class:`SharedRuntime` stands in
for :class:`~smriti.runtime.Runtime` in ``cli._runtime``, so each command keeps one code
path. Commands that need the database itself (import, view, restore) say to stop the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from smriti.cli.remote import call_tool
from smriti.errors import InvalidInput, NotFound, StoreError
from smriti.facade import MemoryFacade
from smriti.server.shared.client import MCP_URL, SharedPaths, http_client, serving

if TYPE_CHECKING:
    from smriti.config import Settings
    from smriti.validators import RecallRequest, StoreRequest

NEEDS_THE_DATABASE = (
    "the shared Smriti server holds this memory open ({socket}); `smriti {command}` needs the "
    "database itself: run `smriti stop` first (stdio clients start the server again when they next ask)"
)


class SharedMemory(MemoryFacade):
    """A memory the user's shared server holds open: :meth:`store` and :meth:`recall` are
    :class:`~smriti.facade.MemoryFacade`'s (checked here, as :class:`~smriti.memory.Memory`
    checks them); the checked requests, and the rest the CLI calls, go to the server."""

    def __init__(self, paths: SharedPaths, settings: Settings) -> None:
        self.paths = paths
        self._settings = settings

    @property
    def settings(self) -> Settings:
        return self._settings

    def _tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return call_tool(MCP_URL, name, arguments, uds=str(self.paths.socket))

    # The CLI checked these where they entered; the server checks them again at its own tool
    # boundary, since a server takes no other process's word for its input.
    def store_checked(self, request: StoreRequest, created_at: datetime | None = None) -> dict[str, Any]:
        if created_at is not None:
            raise InvalidInput(
                "the shared Smriti server stores a memory at the time it receives it: run "
                "`smriti stop` to store one with a past created_at"
            )
        return self._tool("smriti_store", {key: value for key, value in request.items() if value != ""})

    def recall_checked(self, request: RecallRequest) -> dict[str, Any]:
        return self._tool("smriti_recall", dict(request))

    def forget(self, memory_id: str) -> dict[str, Any]:
        done = self._tool("smriti_manage", {"action": "forget", "memory_id": memory_id})
        details: dict[str, Any] = done["details"]
        return details

    def resolve_id(self, prefix: str) -> str:
        answer = self._post("/cli/resolve", {"prefix": prefix})
        return str(answer["id"])

    def export_records(self) -> Iterator[dict[str, Any]]:
        with http_client(self.paths, timeout=None) as client, client.stream("GET", "/cli/export") as response:
            if response.status_code != 200:
                raise StoreError(f"the shared Smriti server could not export: {response.read().decode()}")
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)

    def _post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        with http_client(self.paths, timeout=None) as client:
            response = client.post(path, json=body)
        answer: dict[str, Any] = response.json()
        if response.status_code == 404:
            raise NotFound(answer["error"])
        if response.status_code == 400:
            raise InvalidInput(answer["error"])
        if response.status_code != 200:
            raise StoreError(answer.get("error", f"the shared Smriti server answered {response.status_code}"))
        return answer


class SharedRuntime:
    """What ``cli._runtime`` yields while the shared server holds the memory."""

    def __init__(self, paths: SharedPaths, settings: Settings) -> None:
        self.paths = paths
        self.memory = SharedMemory(paths, settings)

    def consolidate(self, on_step: Callable[[str], None] | None = None) -> dict[str, Any]:
        done = self.memory._tool("smriti_manage", {"action": "consolidate", "explain": True})
        return {**done["details"], "trace": done.get("trace", [])}

    def sync(self) -> dict[str, Any]:
        details: dict[str, Any] = self.memory._tool("smriti_manage", {"action": "sync"})["details"]
        return details

    def describe(self) -> dict[str, Any]:
        details: dict[str, Any] = self.memory._tool("smriti_manage", {"action": "stats"})["details"]
        return details

    def refuse(self, command: str) -> InvalidInput:
        """The error for a command that must open the database itself."""
        return InvalidInput(NEEDS_THE_DATABASE.format(socket=self.paths.socket, command=command))


def shared_runtime(settings: Settings, user: str | None) -> SharedRuntime | None:
    """A :class:`SharedRuntime` when a shared server serves ``user`` (default ACCESSING_USER)."""
    if user is not None and user != settings.accessing_user:
        settings = settings.model_copy(update={"accessing_user": user})
    paths = serving(settings)
    return None if paths is None else SharedRuntime(paths, settings)
