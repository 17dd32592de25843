"""Authentication of ``smriti-mcp --transport streamable-http``: who may connect, as which user.

The server is an OAuth 2.1 *resource server* in the MCP authorization specification's terms,
built from the SDK's own parts: a :class:`TokenVerifier` (here :class:`SmritiTokenVerifier`)
and :class:`AuthSettings` given to ``MCPServer``, which then wraps ``/mcp`` in
``RequireAuthMiddleware`` (401 with ``WWW-Authenticate: Bearer ..., resource_metadata="..."``)
and serves the protected-resource metadata (RFC 9728) at
``/.well-known/oauth-protected-resource/mcp``. The SDK also ties each MCP session to the
credential that opened it: another token presenting its session id gets 404.

Tokens a request may carry:

* static tokens (:mod:`smriti.server.tokens`: the tokens file and SMRITI_TOKENS), each naming a user;
* with SMRITI_AUTH_ISSUER_URL, JWT access tokens of that external authorization server, checked
  against its signing keys (a JWKS over HTTPS or in a local file), issuer, audience
  (SMRITI_AUTH_AUDIENCE, default the resource URL) and expiry; the user is the
  SMRITI_AUTH_USER_CLAIM claim (default ``sub``).

Without an external issuer the metadata names no authorization server (RFC 9728 makes
``authorization_servers`` optional; the SDK's route always names one, so
:func:`serve_resource_metadata` replaces it): naming the server's own origin, which issues no
tokens, sent OAuth clients such as the MCP Inspector into a login flow against a 404.

Policy (:func:`plan_http_auth`): serving without authentication needs ``--no-auth`` and a loopback
bind; anything else without a configured token source is refused before the server starts.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings

from smriti.errors import SettingsError, UnsafeUserError
from smriti.server.tokens import TokenTable, parse_env_tokens
from smriti.stores.base import validate_user_name

if TYPE_CHECKING:
    from smriti.config import Settings

logger = logging.getLogger("smriti.auth")

USER_CLAIM = "smriti_user"  # where a verified token carries its Smriti user (AccessToken.claims)
STATIC_ISSUER = "smriti-static-token"
# Asymmetric algorithms only: with a JWKS, accepting HS256 would let the public key act as a secret.
JWT_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


# ----------------------------------------------------------------------------- JWT of an issuer
class JwtTokens:
    """JWT access tokens of an external authorization server.

    Args:
        issuer: the ``iss`` tokens must carry (SMRITI_AUTH_ISSUER_URL).
        audience: the ``aud`` tokens must carry.
        jwks_url: the signing keys; empty: discovered from the issuer's OAuth (RFC 8414) or
            OpenID metadata at first use.
        user_claim: the claim naming the user.
    """

    def __init__(self, issuer: str, audience: str, jwks_url: str, user_claim: str) -> None:
        self.issuer, self.audience, self.user_claim = issuer, audience, user_claim
        self._jwks_url = jwks_url
        self._keys: Any = None

    def _client(self) -> Any:
        import jwt

        if self._keys is None:
            url = self._jwks_url or _discover_jwks(self.issuer)
            if urlsplit(url).scheme in ("http", "https"):
                self._keys = jwt.PyJWKClient(url, cache_keys=True, lifespan=300)
            else:  # pinned keys in a local file (file:// URL or path): no network at all
                self._keys = FileKeys(Path(urlsplit(url).path if url.startswith("file:") else url))
        return self._keys

    def user_of(self, token: str) -> str | None:
        """The user a valid token names, else None (an invalid token is logged at DEBUG only:
        anyone can send garbage, and the log must not fill with it)."""
        import jwt

        try:
            key = self._client().get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token,
                key.key,
                algorithms=JWT_ALGORITHMS,
                audience=self.audience,
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except (jwt.PyJWTError, OSError, ValueError) as error:
            logger.debug("JWT refused: %s", error)
            return None
        user = claims.get(self.user_claim)
        if not isinstance(user, str):
            logger.warning("JWT without a string %r claim refused", self.user_claim)
            return None
        try:
            return validate_user_name(user)
        except UnsafeUserError as error:
            logger.warning("JWT refused: %s", error)
            return None


class FileKeys:
    """A JWKS kept in a local file (SMRITI_AUTH_JWKS_URL=file:///...), re-read when it changes:
    the ``get_signing_key_from_jwt`` of ``jwt.PyJWKClient``, which only fetches over HTTP(S)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: int | None = None
        self._keys: Any = None

    def get_signing_key_from_jwt(self, token: str) -> Any:
        import jwt

        stamp = self.path.stat().st_mtime_ns
        if stamp != self._stamp:
            self._keys, self._stamp = jwt.PyJWKSet.from_json(self.path.read_text(encoding="utf-8")), stamp
        kid = jwt.get_unverified_header(token).get("kid")
        for key in self._keys.keys:
            if kid is None or key.key_id == kid:
                return key
        raise jwt.PyJWKClientError(f"no key {kid!r} in {self.path}")


def _discover_jwks(issuer: str) -> str:
    base = issuer.rstrip("/")
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        try:
            with urllib.request.urlopen(base + path, timeout=10) as reply:
                jwks = json.load(reply).get("jwks_uri")
        except (OSError, ValueError):
            continue
        if isinstance(jwks, str) and jwks:
            return jwks
    raise OSError(f"no jwks_uri in the metadata of {issuer}: set SMRITI_AUTH_JWKS_URL")


# ----------------------------------------------------------------------------- the verifier
class SmritiTokenVerifier:
    """The SDK's ``TokenVerifier``: a static token or an issuer's JWT -> an AccessToken naming the user."""

    def __init__(self, table: TokenTable, jwt_tokens: JwtTokens | None = None) -> None:
        self.table = table
        self.jwt_tokens = jwt_tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        entry = self.table.lookup(token)
        if entry is not None:
            # client_id is the token's id: the SDK binds a session to (client_id, iss, sub), so a
            # session opened with one token cannot be continued with another, even of the same user.
            return AccessToken(
                token=token,
                client_id=f"smriti-token-{entry.id}",
                scopes=[],
                subject=entry.user,
                claims={"iss": STATIC_ISSUER, USER_CLAIM: entry.user},
            )
        if self.jwt_tokens is None:
            return None
        user = await anyio.to_thread.run_sync(self.jwt_tokens.user_of, token)  # may fetch the JWKS
        if user is None:
            return None
        return AccessToken(
            token=token,
            client_id=f"jwt-{user}",
            scopes=[],
            subject=user,
            claims={"iss": self.jwt_tokens.issuer, USER_CLAIM: user},
        )


def request_user(request: Any) -> str | None:
    """The Smriti user a request was authenticated as (None: unauthenticated).

    Tools get the HTTP request (its ``scope["user"]`` set by the SDK's bearer middleware);
    resources get none, so the SDK's per-request context variable answers for them.
    """
    token: AccessToken | None = None
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, dict) else None
    if isinstance(user, AuthenticatedUser):
        token = user.access_token
    if token is None:
        token = get_access_token()
    if token is None:
        return None
    named = (token.claims or {}).get(USER_CLAIM)
    return named if isinstance(named, str) else None


# ----------------------------------------------------------------------------- policy
@dataclass(frozen=True)
class HttpAuth:
    """What ``MCPServer`` takes to authenticate: the verifier and the SDK's AuthSettings."""

    verifier: SmritiTokenVerifier
    settings: AuthSettings
    issuer: str = ""  # the external authorization server; empty: static tokens only

    @property
    def resource_url(self) -> str:
        return str(self.settings.resource_server_url)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def plan_http_auth(settings: Settings, host: str, port: int, no_auth: bool) -> HttpAuth | None:
    """The authentication of an HTTP server bound to ``host:port``; None means none (``--no-auth``).

    Raises:
        SettingsError: ``--no-auth`` on a non-loopback bind, no token source configured, or a
            tokens file that cannot be read.
    """
    if no_auth:
        if not is_loopback(host):
            raise SettingsError(
                f"--no-auth is only allowed on a loopback address (127.0.0.1, ::1, localhost), not {host!r}: "
                "add bearer tokens with `smriti token add USER` and drop --no-auth"
            )
        return None
    tokens_file = settings.tokens_file
    explicit_file = settings.smriti_tokens_file is not None
    env = settings.smriti_tokens.get_secret_value() if settings.smriti_tokens else ""
    table = TokenTable(tokens_file if explicit_file or tokens_file.exists() else None, parse_env_tokens(env))
    issuer = settings.smriti_auth_issuer_url.strip()
    if table.file is None and not table.env_entries and not issuer:
        where = "on this address" if is_loopback(host) else f"on {host!r} (not a loopback address)"
        raise SettingsError(
            f"refusing to serve HTTP without authentication {where}: add a token with "
            "`smriti token add USER` (or set SMRITI_TOKENS_FILE, SMRITI_TOKENS or SMRITI_AUTH_ISSUER_URL)"
            + (", or pass --no-auth" if is_loopback(host) else "")
        )
    if not issuer and not table.entries():
        logger.warning(
            "no tokens yet in %s: every request is refused until `smriti token add USER`", tokens_file
        )
    resource = settings.smriti_resource_url.strip() or f"http://{_url_host(host)}:{port}/mcp"
    if not settings.smriti_resource_url.strip() and host.strip("[]") in ("0.0.0.0", "::", ""):
        logger.warning(
            "the protected-resource metadata names %s: set SMRITI_RESOURCE_URL to the URL clients use",
            resource,
        )
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(resource))
    jwt_tokens = None
    if issuer:
        audience = settings.smriti_auth_audience.strip() or resource
        jwt_tokens = JwtTokens(
            issuer, audience, settings.smriti_auth_jwks_url.strip(), settings.smriti_auth_user_claim
        )
    try:
        auth_settings = AuthSettings(
            issuer_url=issuer or origin,  # type: ignore[arg-type]  # pydantic parses the URL
            resource_server_url=resource,  # type: ignore[arg-type]
            # The verifier checks the audience of an issuer's JWT itself; static tokens have none.
            validate_token_resource=False,
        )
    except ValueError as error:
        raise SettingsError(f"SMRITI_RESOURCE_URL or SMRITI_AUTH_ISSUER_URL is not a URL: {error}") from None
    return HttpAuth(SmritiTokenVerifier(table, jwt_tokens), auth_settings, issuer)


def serve_resource_metadata(app: Any, auth: HttpAuth) -> None:
    """Without an issuer, make the protected-resource metadata name no authorization server.

    ``app`` is the Starlette app of ``streamable_http_app()``; its SDK route at
    ``/.well-known/oauth-protected-resource/…`` is replaced by one that describes the resource
    and its bearer header only. With an issuer the SDK's route (naming it) stays.
    """
    if auth.issuer:
        return
    from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    resource = auth.settings.resource_server_url
    assert resource is not None  # plan_http_auth always sets it
    path = urlsplit(str(build_resource_metadata_url(resource))).path
    body = {
        "resource": str(resource),
        "bearer_methods_supported": ["header"],
        "resource_name": "Smriti memory",
    }

    async def metadata(_: Request) -> Response:
        return JSONResponse(body, headers={"Cache-Control": "public, max-age=3600"})

    ours = Route(path, endpoint=cors_middleware(metadata, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"])
    routes = app.router.routes
    found = [i for i, route in enumerate(routes) if getattr(route, "path", None) == path]
    if found:
        routes[found[0]] = ours
    else:
        routes.append(ours)


def add_health_route(server: Any, version: str) -> None:
    """``GET /health``: ``{"status": "ok", "version": ...}`` without authentication, for load
    balancers and supervisors (it says nothing about any user's memory)."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response

    @server.custom_route("/health", methods=["GET"], include_in_schema=False)
    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok", "version": version})
