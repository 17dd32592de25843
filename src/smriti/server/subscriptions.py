"""The MCP surface of protocols up to 2025-11-25 that the SDK's ``MCPServer`` leaves out.

``MCPServer`` (mcp 2.x) serves change notifications through ``subscriptions/listen``
(protocol 2026-07-28) only, and has no ``logging/setLevel``: a client on 2025-06-18 or
2025-11-25 (most of them, and the MCP Inspector) got "method not found" for both. This
module registers them on the low-level server, whose capabilities then say so
(``resources.subscribe`` and ``logging``):

- ``resources/subscribe`` / ``resources/unsubscribe`` for the ``memory://`` resources: a
  subscribed session is sent ``notifications/resources/updated`` after every store, forget
  and consolidation of its user's memory (:meth:`ResourceSubscribers.notify`), besides the
  ``subscriptions/listen`` streams that :func:`smriti.server.app.memories_changed` publishes to;
- ``logging/setLevel`` is accepted and changes nothing: Smriti sends no log messages over
  MCP (its log is stderr, or the shared server's log file), so every level is already honoured.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    EmptyResult,
    SetLevelRequestParams,
    SubscribeRequestParams,
    UnsubscribeRequestParams,
)

from smriti.server.sdk import session_connection

if TYPE_CHECKING:
    from mcp.server.connection import Connection
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession

    from smriti.server.users import UserRuntimes

logger = logging.getLogger("smriti.server")

User = str | None  # None: the one user of a server without authentication


class ResourceSubscribers:
    """Which sessions subscribed to which resources, per user.

    Clients' connections are held weakly: a client that goes away without unsubscribing is
    forgotten with its connection, and a session that can no longer be written to is dropped at the
    next notification.
    """

    def __init__(self) -> None:
        self._sessions: dict[tuple[User, str], weakref.WeakSet[Connection]] = {}

    def subscribe(self, user: User, uri: str, session: Connection) -> None:
        self._sessions.setdefault((user, uri), weakref.WeakSet()).add(session)

    def unsubscribe(self, user: User, uri: str, session: Connection) -> None:
        sessions = self._sessions.get((user, uri))
        if sessions is not None:
            sessions.discard(session)

    def subscribed(self, user: User, uri: str) -> int:
        """How many sessions of ``user`` are subscribed to ``uri``."""
        return len(self._sessions.get((user, uri), ()))

    async def notify(self, user: User, uris: Iterable[str]) -> None:
        """Send ``notifications/resources/updated`` to ``user``'s sessions subscribed to ``uris``."""
        for uri in uris:
            sessions = self._sessions.get((user, uri))
            for session in list(sessions or ()):
                try:
                    await session.send_resource_updated(uri)
                except Exception as error:  # the session is gone: the change itself is done
                    logger.debug("dropping a subscription to %s: %s", uri, error)
                    if sessions is not None:
                        sessions.discard(session)


def register_classic_surface(lowlevel: Server[Any], resources: tuple[str, ...]) -> None:
    """Serve ``resources/subscribe``, ``resources/unsubscribe`` and ``logging/setLevel``.

    Args:
        lowlevel: the MCPServer's low-level server (the place the SDK names for spec methods
            that MCPServer does not serve). Its lifespan context is the server's
            :class:`~smriti.server.users.UserRuntimes`, which keeps the subscribers.
        resources: the URIs that can be subscribed to.
    """

    def client(session: ServerSession) -> Connection:
        return session_connection(session)

    def checked(uri: str) -> str:
        if uri not in resources:
            raise MCPError(
                INVALID_PARAMS, f"no resource {uri!r} to subscribe to; use one of {', '.join(resources)}"
            )
        return uri

    async def subscribe(
        ctx: ServerRequestContext[UserRuntimes], params: SubscribeRequestParams
    ) -> EmptyResult:
        runtimes = ctx.lifespan_context
        runtimes.subscribers.subscribe(
            runtimes.user_key(ctx.request), checked(params.uri), client(ctx.session)
        )
        return EmptyResult()

    async def unsubscribe(
        ctx: ServerRequestContext[UserRuntimes], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        runtimes = ctx.lifespan_context
        runtimes.subscribers.unsubscribe(
            runtimes.user_key(ctx.request), checked(params.uri), client(ctx.session)
        )
        return EmptyResult()

    async def set_level(
        ctx: ServerRequestContext[UserRuntimes], params: SetLevelRequestParams
    ) -> EmptyResult:
        logger.debug(
            "logging/setLevel %s: nothing to change (no log messages are sent over MCP)", params.level
        )
        return EmptyResult()

    lowlevel.add_request_handler("resources/subscribe", SubscribeRequestParams, subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, unsubscribe)
    lowlevel.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
