"""The server's open memories, one :class:`~smriti.runtime.Runtime` per user.

On stdio and with ``--no-auth`` the server serves one user (ACCESSING_USER), whose memory is
opened at start, as before: a locked store is a start-up error, not a failing first call. With
authentication every request names its user (see :mod:`smriti.server.auth`) and that user's
memory is opened at its first request. Isolation is the backend's
(``open_runtime(settings, user=...)``): a file per user on SQLite and Kuzu, the tenant property
or a graph per user on FalkorDB and Neo4j.

A multi-user server must not keep every user it ever served open: each open memory holds a
database connection, a vector cache (~60 MB at 10k memories of 1,536 dims), an analysis
worker and its timers. So a user's memory is closed (final backup sync included) once it has
had no request in flight for USER_IDLE_TIMEOUT seconds, and at most MAX_OPEN_USERS are open:
opening one more closes the least recently used idle one first. A memory with a request in
flight is never closed; requests take it with :meth:`UserRuntimes.using`, which counts them.

Opening and closing run in worker threads (opening may create a database and import LangGraph).
A per-user lock keeps two first requests of one user from opening the memory twice, and a
request that arrives while its memory is being closed waits, then opens it again: an embedded
file is never open twice.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from smriti.errors import InvalidInput, TooManyUsers
from smriti.runtime import Runtime
from smriti.server.auth import request_user
from smriti.server.subscriptions import ResourceSubscribers

logger = logging.getLogger("smriti.server")

OnOpen = Callable[[anyio.abc.TaskGroup, Runtime], None]
"""Starts a runtime's background work (its timers) in the task group it is given."""


@dataclass
class _Background:
    """A runtime's background tasks: cancelled, and waited for, before the runtime closes."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)


class UserRuntimes:
    """Runtimes by user, opened on demand, closed when idle or crowded out, and all at shutdown.

    Args:
        open_runtime: opens a user's runtime (None: ACCESSING_USER); called in a worker thread.
        close_runtime: closes one (final backup sync included); called in a worker thread.
        multi_user: requests must be authenticated and are served in their user's memory.
        idle_timeout: seconds without a request after which a user's memory is closed (multi-user
            only; 0 keeps them open until shutdown).
        max_open: the most users' memories open at once (multi-user only; 0: no cap).
        clock: seconds, for the idle times (tests pass their own).
    """

    def __init__(
        self,
        open_runtime: Callable[[str | None], Runtime],
        close_runtime: Callable[[Runtime], None],
        *,
        multi_user: bool,
        idle_timeout: float = 0.0,
        max_open: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open, self._close = open_runtime, close_runtime
        self.multi_user = multi_user
        self.idle_timeout, self.max_open = idle_timeout, max_open
        self._clock = clock
        self._runtimes: dict[str | None, Runtime] = {}
        self._locks: dict[str | None, anyio.Lock] = {}
        self._in_flight: Counter[str | None] = Counter()
        self._last_used: dict[str | None, float] = {}
        self._opening = 0  # memories being opened, counted against max_open
        self._background: dict[str | None, _Background] = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._on_open: OnOpen | None = None
        self.subscribers = ResourceSubscribers()  # resources/subscribe, per user (server/subscriptions.py)

    def opened(self) -> list[Runtime]:
        return list(self._runtimes.values())

    def start(self, tasks: anyio.abc.TaskGroup, on_open: OnOpen) -> None:
        """Run ``on_open`` (the background work) for every runtime, now and when opened, and
        close idle memories from now on (multi-user with an idle timeout)."""
        self._tasks, self._on_open = tasks, on_open
        for user, runtime in self._runtimes.items():
            self._start_background(user, runtime)
        if self.multi_user and self.idle_timeout > 0:
            tasks.start_soon(self._close_idle_forever)

    # ------------------------------------------------------------------------- taking a runtime
    @asynccontextmanager
    async def using(self, user: str | None) -> AsyncIterator[Runtime]:
        """The runtime of ``user`` (None: the single user), opened if needed and kept open while
        the block runs."""
        runtime = await self.take(user)
        try:
            yield runtime
        finally:
            self.release(user)

    @asynccontextmanager
    async def using_request(self, request: Any) -> AsyncIterator[Runtime]:
        """:meth:`using` for the user ``request`` was authenticated as (see :meth:`take_for_request`)."""
        user, runtime = await self.take_for_request(request)
        try:
            yield runtime
        finally:
            self.release(user)

    async def get(self, user: str | None) -> Runtime:
        """Open ``user``'s runtime now (the single user's, at start) without holding it."""
        async with self.using(user) as runtime:
            return runtime

    def user_key(self, request: Any) -> str | None:
        """The user ``request`` is served as without opening anything (None: the single user,
        or no authenticated user)."""
        return request_user(request) if self.multi_user else None

    async def take_for_request(self, request: Any) -> tuple[str | None, Runtime]:
        """The user ``request`` was authenticated as and its runtime, held until :meth:`release`.

        Raises:
            InvalidInput: a multi-user server got a request without a user (an in-process
                client of a server built with authentication).
        """
        user = None
        if self.multi_user:
            user = request_user(request)
            if user is None:
                raise InvalidInput("this server serves authenticated users only: send a bearer token")
        return user, await self.take(user)

    async def take(self, user: str | None) -> Runtime:
        """``user``'s runtime, opened if needed and held (never closed) until :meth:`release`."""
        # No await between finding a runtime and counting the request: a closing pass sees
        # either the count or no runtime, never a runtime it may close under a request.
        runtime = self._runtimes.get(user)
        if runtime is None:
            async with self._lock(user):
                runtime = self._runtimes.get(user)
                if runtime is None:
                    runtime = await self._open_counted(user)
                self._in_flight[user] += 1
        else:
            self._in_flight[user] += 1
        self._last_used[user] = self._clock()
        return runtime

    def release(self, user: str | None) -> None:
        """A request that :meth:`take` served is done; the idle time counts from now."""
        self._in_flight[user] -= 1
        self._last_used[user] = self._clock()

    async def _open_counted(self, user: str | None) -> Runtime:
        """Open ``user``'s memory (its lock held), first closing the least recently used idle
        memory when MAX_OPEN_USERS are open."""
        self._opening += 1
        try:
            if self.multi_user and self.max_open > 0:
                await self._make_room()
            runtime = await anyio.to_thread.run_sync(self._open, user)
        finally:
            self._opening -= 1
        self._runtimes[user] = runtime
        if user is not None:
            logger.info("opened the memory of user %s (%d open)", user, len(self._runtimes))
        if self._tasks is not None:
            self._start_background(user, runtime)
        return runtime

    async def _make_room(self) -> None:
        while len(self._runtimes) + self._opening > self.max_open:
            idle = sorted(
                (self._last_used.get(user, 0.0), user) for user in self._runtimes if not self._in_flight[user]
            )
            for _, user in idle:
                if await self._close_if_idle(user, since=None):
                    break
            else:
                raise TooManyUsers(
                    f"{len(self._runtimes)} users' memories are in use at once (MAX_OPEN_USERS="
                    f"{self.max_open}): try again shortly"
                )

    def _lock(self, user: str | None) -> anyio.Lock:
        return self._locks.setdefault(user, anyio.Lock())

    # ------------------------------------------------------------------------- background work
    def _start_background(self, user: str | None, runtime: Runtime) -> None:
        assert self._tasks is not None and self._on_open is not None
        background = self._background[user] = _Background()
        on_open = self._on_open

        async def run() -> None:
            try:
                with background.scope:
                    async with anyio.create_task_group() as own:
                        on_open(own, runtime)
            finally:
                background.done.set()

        self._tasks.start_soon(run)

    # ------------------------------------------------------------------------- closing
    async def close_idle(self) -> list[str | None]:
        """Close the memories with no request for ``idle_timeout`` seconds; the users closed."""
        closed: list[str | None] = []
        cutoff = self._clock() - self.idle_timeout
        for user in [user for user, used in list(self._last_used.items()) if used <= cutoff]:
            if await self._close_if_idle(user, since=cutoff):
                closed.append(user)
        return closed

    async def _close_idle_forever(self) -> None:
        # Checked a few times per timeout, so a memory closes at most a quarter late (or a minute).
        period = min(60.0, max(self.idle_timeout / 4, 0.05))
        while True:
            await anyio.sleep(period)
            try:
                await self.close_idle()
            except Exception:  # why: a failed pass must not end the server's task group
                logger.exception("closing idle memories failed")

    async def _close_if_idle(self, user: str | None, *, since: float | None) -> bool:
        """Close ``user``'s memory if no request holds it (and, with ``since``, none came after
        that time). A lock someone holds means the memory is being opened or closed: skipped,
        never waited for (two users' opens crowding each other out must not deadlock)."""
        lock = self._lock(user)
        try:
            lock.acquire_nowait()
        except anyio.WouldBlock:
            return False
        try:
            used = self._last_used.get(user)
            came_since = since is not None and used is not None and used > since
            if user not in self._runtimes or self._in_flight[user] or came_since:
                return False
            runtime = self._runtimes.pop(user)
            self._last_used.pop(user, None)
            # Shielded: once out of the table the memory must close even if the server is stopping.
            with anyio.CancelScope(shield=True):
                await self._stop_background(user)
                await self._close_logged(runtime)
            logger.info("closed the idle memory of user %s (%d open)", user, len(self._runtimes))
            return True
        finally:
            lock.release()

    @asynccontextmanager
    async def lent(
        self, user: str | None, close: Callable[[Runtime], None], poll: float = 0.05
    ) -> AsyncIterator[None]:
        """``user``'s memory closed, and kept closed while the block runs, for another process
        to open the file (the CLI's ``import``, ``view`` and ``restore`` beside a shared server).

        The requests in flight finish first; requests that come meanwhile wait (the user's lock
        is held), and the first after the block opens the memory again. ``close`` closes the
        runtime (without a final backup sync: a restore must find the backup as it was).
        """
        async with self._lock(user):
            while self._in_flight[user]:
                await anyio.sleep(poll)
            runtime = self._runtimes.pop(user, None)  # no await since the count was read: none came
            if runtime is not None:
                self._last_used.pop(user, None)
                with anyio.CancelScope(shield=True):
                    await self._stop_background(user)
                    await anyio.to_thread.run_sync(close, runtime)
                logger.info("lent the memory of user %s to another process", user or "(the user)")
            try:
                yield
            finally:
                logger.info("the memory of user %s is back", user or "(the user)")

    async def _stop_background(self, user: str | None) -> None:
        background = self._background.pop(user, None)
        if background is not None:
            background.scope.cancel()
            await background.done.wait()  # a consolidation in a thread ends before the close

    async def _close_logged(self, runtime: Runtime) -> None:
        try:
            await anyio.to_thread.run_sync(self._close, runtime)
        except Exception:  # why: one user's failing close must not leave the others open
            logger.exception("closing the memory of user %s failed", runtime.memory.context.store.user)

    async def aclose(self) -> None:
        """Close every runtime (each in a worker thread); a failure is logged, the rest still close."""
        users, self._in_flight = list(self._runtimes), Counter()
        runtimes, self._runtimes = [self._runtimes[user] for user in users], {}
        for user in users:
            await self._stop_background(user)
        for runtime in runtimes:
            await self._close_logged(runtime)
