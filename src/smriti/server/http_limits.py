"""Bounds on HTTP connections, for ``--transport streamable-http`` and the shared server.

uvicorn (the server both run on) bounds a connection only between requests: it closes a
keep-alive connection ``timeout_keep_alive`` seconds after its last response, and has no timer
at all for a request whose headers or body never finish. Past ``limit_concurrency`` connections
it answers every new request 503, so 1,001 sockets trickling a byte now and then held every
client at 503, a client with a valid token included. :class:`GuardedH11Protocol` is uvicorn's h11
protocol with what it lacks:

- **idle**: the keep-alive timer also runs before the first request, so a connection that never
  sends one is closed after ``HTTP_KEEP_ALIVE_TIMEOUT`` seconds;
- **headers**: a request's headers must be complete ``HTTP_HEADER_TIMEOUT`` seconds after its
  first byte came, however slowly they trickle;
- **body**: a request body that stops for ``HTTP_BODY_TIMEOUT`` seconds (while the server waits
  for it) closes the connection, and the app sees the client gone;
- **full house**: when ``HTTP_MAX_CONNECTIONS`` connections are open, a new one closes the
  connection that has waited longest without a request in progress (idle, or still sending
  headers) rather than be answered 503: a flood of stalled sockets makes room for anyone who
  sends a whole request. Requests in progress (an MCP event stream included) are never closed;
  when all connections have one, the new request is answered 503 as before.

An unauthenticated request is answered 401 before its body is read, so a stalled body without a
valid token holds no request in progress either. uvicorn's own options are used where they
exist: ``timeout_keep_alive`` and ``limit_concurrency``; the h11 reader's limit on an incomplete
request (``h11_max_incomplete_event_size``, 16 KiB of headers) stays at its default.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.h11_impl import H11Protocol

if TYPE_CHECKING:
    import asyncio

    from smriti.config import Settings

logger = logging.getLogger("smriti.server.http")


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body timeouts and room made at a full house."""

    def __init__(self, *args: Any, header_timeout: float, body_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self.waiting_since = time.monotonic()  # since when no request is in progress

    # -- the state of the connection ---------------------------------------------------------
    def in_request(self) -> bool:
        """A request is in progress: its headers came, its response is not finished."""
        return self.cycle is not None and not self.cycle.response_complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting_since = time.monotonic()
        self._unset_keepalive_if_required()
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )
        self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.in_request() and self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._give_up, "request headers")
        super().data_received(data)
        if self.in_request():
            self._cancel(self._header_timer)
            self._header_timer = None
        self._watch_body()

    def on_response_complete(self) -> None:
        self.waiting_since = time.monotonic()
        self._cancel(self._body_timer)
        self._body_timer = None
        super().on_response_complete()

    # -- timers ------------------------------------------------------------------------------
    def _watch_body(self) -> None:
        """(Re)start the body timer while the app waits for more of the body; stop it after."""
        self._cancel(self._body_timer)
        self._body_timer = None
        if self.in_request() and self.cycle.more_body and not self.transport.is_closing():
            self._body_timer = self.loop.call_later(self.body_timeout, self._body_stalled)

    def _body_stalled(self) -> None:
        self._body_timer = None
        if self.flow.read_paused:  # the app reads slowly, not the client: wait again
            self._watch_body()
            return
        self._give_up("request body")

    def _give_up(self, what: str) -> None:
        timeout = self.header_timeout if what == "request headers" else self.body_timeout
        logger.info("closed a connection from %s: its %s took over %s s", self.client, what, timeout)
        self._cancel_timers()
        self.transport.close()

    def _cancel_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            self._cancel(timer)
        self._header_timer = self._body_timer = None

    @staticmethod
    def _cancel(timer: asyncio.TimerHandle | None) -> None:
        if timer is not None:
            timer.cancel()

    # -- a full house ------------------------------------------------------------------------
    def _make_room(self) -> None:
        """At HTTP_MAX_CONNECTIONS, close the connections that have waited longest with no
        request in progress, so that this one's request is not answered 503 (uvicorn answers
        503 once the open connections, this one included, reach the limit)."""
        limit = self.limit_concurrency
        if limit is None or len(self.connections) < limit:
            return
        # Closed connections leave the set a moment later (connection_lost): count the open ones.
        open_ones = [other for other in self.connections if not _closing(other)]
        excess = len(open_ones) - limit + 1
        if excess <= 0:
            return
        waiting = sorted(
            (
                other
                for other in open_ones
                if other is not self and isinstance(other, GuardedH11Protocol) and not other.in_request()
            ),
            key=lambda other: other.waiting_since,
        )
        for other in waiting[:excess]:
            logger.info("full house: closed a connection from %s with no request in progress", other.client)
            other._cancel_timers()
            other.transport.close()


def _closing(connection: Any) -> bool:
    transport = getattr(connection, "transport", None)
    return transport is None or transport.is_closing()


def uvicorn_limits(settings: Settings) -> dict[str, Any]:
    """The ``uvicorn.Config`` arguments that bound idle, slow and concurrent connections."""
    return {
        "http": functools.partial(
            GuardedH11Protocol,
            header_timeout=settings.http_header_timeout,
            body_timeout=settings.http_body_timeout,
        ),
        "timeout_keep_alive": settings.http_keep_alive_timeout,
        "limit_concurrency": settings.http_max_connections or None,
    }
