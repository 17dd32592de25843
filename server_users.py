"""The server's open memories, one :class:`~smriti.server_runtime.Runtime` per user.

On stdio and with ``--no-auth`` the server serves one user (ACCESSING_USER), whose memory is
opened at start, as before: a locked store is a start-up error, not a failing first call. With
authentication every request names its user (see :mod:`smriti.server_auth`) and that user's
memory is opened at its first request, then kept until shutdown. Isolation is the backend's
(``open_runtime(settings, user=...)``): a file per user on SQLite and Kuzu, the tenant property
or a graph per user on FalkorDB and Neo4j.

Opening runs in a worker thread (it may create a database and import LangGraph); a per-user lock
keeps two first requests of one user from opening the memory twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import anyio

from smriti.errors import InvalidInput
from smriti.server_auth import request_user
from smriti.server_runtime import Runtime

logger = logging.getLogger("smriti.server")


class UserRuntimes:
    """Runtimes by user, opened on demand and closed together.

    Args:
        open_runtime: opens a user's runtime (None: ACCESSING_USER); called in a worker thread.
        close_runtime: closes one (final backup sync included); called in a worker thread.
        multi_user: requests must be authenticated and are served in their user's memory.
    """

    def __init__(
        self,
        open_runtime: Callable[[str | None], Runtime],
        close_runtime: Callable[[Runtime], None],
        *,
        multi_user: bool,
    ) -> None:
        self._open, self._close = open_runtime, close_runtime
        self.multi_user = multi_user
        self._runtimes: dict[str | None, Runtime] = {}
        self._locks: dict[str | None, anyio.Lock] = {}
        self._on_open: Callable[[Runtime], None] | None = None

    def opened(self) -> list[Runtime]:
        return list(self._runtimes.values())

    def start(self, on_open: Callable[[Runtime], None]) -> None:
        """Call ``on_open`` (start the background work) for every runtime, now and when opened."""
        self._on_open = on_open
        for runtime in self._runtimes.values():
            on_open(runtime)

    async def get(self, user: str | None) -> Runtime:
        """The runtime of ``user`` (None: the single user), opened if it is not yet."""
        runtime = self._runtimes.get(user)
        if runtime is not None:
            return runtime
        lock = self._locks.setdefault(user, anyio.Lock())
        async with lock:
            runtime = self._runtimes.get(user)
            if runtime is None:
                runtime = await anyio.to_thread.run_sync(self._open, user)
                self._runtimes[user] = runtime
                if user is not None:
                    logger.info("opened the memory of user %s", user)
                if self._on_open is not None:
                    self._on_open(runtime)
        return runtime

    async def for_request(self, request: Any) -> Runtime:
        """The runtime of the user ``request`` was authenticated as.

        Raises:
            InvalidInput: a multi-user server got a request without a user (an in-process
                client of a server built with authentication).
        """
        if not self.multi_user:
            return await self.get(None)
        user = request_user(request)
        if user is None:
            raise InvalidInput("this server serves authenticated users only: send a bearer token")
        return await self.get(user)

    async def aclose(self) -> None:
        """Close every runtime (each in a worker thread); a failure is logged, the rest still close."""
        runtimes, self._runtimes = list(self._runtimes.values()), {}
        for runtime in runtimes:
            try:
                await anyio.to_thread.run_sync(self._close, runtime)
            except Exception:  # why: one user's failing close must not leave the others open
                logger.exception("closing the memory of user %s failed", runtime.memory.context.store.user)
