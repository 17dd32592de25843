"""``smriti view --serve``: the one page it wrote, on loopback, and nothing else.

The page holds the user's memories, so the server answers as little as it can:

* it binds a loopback address only (127.0.0.1 by default, or ``::1``); nothing else can reach it;
* it answers only requests whose ``Host`` header names a loopback host with its own port
  (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``): a web page in the user's browser that
  rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own name there and gets 403;
* it serves the bytes it generated, kept in memory, at an allow-list of paths (``/`` and
  ``/<file name>``); every other path is 404, compared before any decoding, so ``/..``, ``/%2e%2e/``,
  dotfiles, ``memory.sqlite`` or a folder are never looked up on disk at all (there is no
  directory listing: nothing is read from disk).

Only GET and HEAD are served (anything else is 405); responses are ``no-store`` and may not be
framed by another site.
"""

from __future__ import annotations

import http.server
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from smriti.errors import InvalidInput

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""The host names (as a ``Host`` header writes them) a page served on loopback answers to."""


@dataclass(frozen=True)
class Page:
    """What is served: ``body`` (UTF-8 HTML) at ``/`` and at ``/<name>``."""

    name: str
    body: bytes

    def paths(self) -> frozenset[str]:
        return frozenset({"/", f"/{self.name}"})


def allowed_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values accepted on ``port``: each loopback name with the port (and without
    it on port 80, where browsers leave it out)."""
    hosts = {f"{name}:{port}" for name in LOOPBACK_NAMES}
    if port == 80:
        hosts |= set(LOOPBACK_NAMES)
    return frozenset(hosts)


def check_loopback(bind: str) -> str:
    """``bind`` if it is a loopback address (127.0.0.0/8 or ::1), else a one-line refusal."""
    try:
        loopback = ipaddress.ip_address(bind).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidInput(f"--bind must be a loopback address (127.0.0.1 or ::1), got {bind!r}")
    return bind


def _handler(page: Page, hosts: Callable[[], frozenset[str]]) -> type[http.server.BaseHTTPRequestHandler]:
    paths = page.paths()

    class PageHandler(http.server.BaseHTTPRequestHandler):
        server_version = "smriti-view"
        sys_version = ""

        def _answer(self, status: HTTPStatus, body: bytes, content_type: str, with_body: bool) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Content-Security-Policy", "frame-ancestors 'none'")
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def _refuse(self, status: HTTPStatus, with_body: bool = True) -> None:
            text = f"{status.value} {status.phrase}\n".encode()
            self._answer(status, text, "text/plain; charset=utf-8", with_body)

        def _serve(self, with_body: bool) -> None:
            if self.headers.get("Host", "").lower() not in hosts():
                return self._refuse(HTTPStatus.FORBIDDEN, with_body)
            # The raw path, query dropped, never decoded: only the exact allowed paths match.
            if self.path.split("?", 1)[0] not in paths:
                return self._refuse(HTTPStatus.NOT_FOUND, with_body)
            self._answer(HTTPStatus.OK, page.body, "text/html; charset=utf-8", with_body)

        def do_GET(self) -> None:
            self._serve(with_body=True)

        def do_HEAD(self) -> None:
            self._serve(with_body=False)

        def _not_allowed(self) -> None:
            self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
            self.send_header("Allow", "GET, HEAD")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed

        def log_message(self, format: str, *args: Any) -> None:
            pass  # why: the request log would only repeat the URL printed at start

    return PageHandler


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def page_server(page: Page, bind: str = "127.0.0.1", port: int = 0) -> http.server.ThreadingHTTPServer:
    """A server (not yet serving) for ``page`` on loopback ``bind``:``port`` (0: a free port).

    Raises:
        InvalidInput: ``bind`` is not a loopback address.
    """
    bind = check_loopback(bind)
    server: list[http.server.ThreadingHTTPServer] = []

    def hosts() -> frozenset[str]:
        return allowed_hosts(server[0].server_address[1])

    kind = _Server6 if ":" in bind else _Server
    server.append(kind((bind, port), _handler(page, hosts)))
    return server[0]


def page_url(server: http.server.ThreadingHTTPServer, page: Page) -> str:
    """The page's address on ``server``, as a browser opens it."""
    host, port = str(server.server_address[0]), server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/{page.name}"
