"""Multi-user streamable HTTP: bearer tokens, per-user memories, the MCP authorization metadata.

Every test runs a real ``smriti-mcp --transport streamable-http`` process and talks to it over
real HTTP: raw requests (httpx2) for status codes and headers, and the SDK's MCP client for
sessions. Tokens come from the real ``smriti token`` commands.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from typer.testing import CliRunner

from smriti.cli import app
from tests.envs import offline_env
from tests.http_server import Server, free_port, server_command

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw-test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def env(tmp_path, monkeypatch) -> dict[str, str]:
    variables = offline_env(tmp_path / "store", LOG_LEVEL="INFO")
    for name, value in variables.items():  # the CLI (in-process) sees what the server sees
        monkeypatch.setenv(name, value)
    return variables


def add_token(user: str) -> str:
    result = CliRunner().invoke(app, ["token", "add", user])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert token.startswith("smriti_") and len(token) > 40
    return token


@pytest.fixture
def server(env):
    tokens = {"alice": add_token("alice"), "bob": add_token("bob")}
    running = Server(env)
    yield running, tokens
    code, stderr = running.stop()
    assert code == 0, stderr
    for token in tokens.values():  # a token is never logged
        assert token not in stderr


def _client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


def _post(url: str, token: str | None, body: dict = INITIALIZE, **headers: str) -> httpx2.Response:
    sent = {**MCP_HEADERS, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx2.post(url, json=body, headers=sent, timeout=30)


def _assert_unauthorized(response: httpx2.Response, metadata_url: str) -> None:
    assert response.status_code == 401, response.text
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert f'resource_metadata="{metadata_url}"' in challenge


def test_missing_wrong_and_revoked_tokens_get_401_with_the_resource_metadata(server):
    running, tokens = server
    metadata_url = f"{running.base}/.well-known/oauth-protected-resource/mcp"
    _assert_unauthorized(_post(running.url, None), metadata_url)
    _assert_unauthorized(_post(running.url, "smriti_not-a-token"), metadata_url)
    _assert_unauthorized(_post(running.url, tokens["alice"] + "x"), metadata_url)
    _assert_unauthorized(_post(running.url, None, Authorization=f"Basic {tokens['alice']}"), metadata_url)
    assert _post(running.url, tokens["alice"]).status_code == 200

    # Revoked while the server runs: refused at the next request, bob's token still works.
    revoked = CliRunner().invoke(app, ["token", "revoke", "alice"])
    assert revoked.exit_code == 0 and "alice" in revoked.stdout, revoked.output
    _assert_unauthorized(_post(running.url, tokens["alice"]), metadata_url)
    assert _post(running.url, tokens["bob"]).status_code == 200


def test_protected_resource_metadata_and_health_need_no_token(server):
    running, _ = server
    metadata = httpx2.get(f"{running.base}/.well-known/oauth-protected-resource/mcp", timeout=10)
    assert metadata.status_code == 200
    body = metadata.json()
    assert body["resource"] == running.url
    assert body["bearer_methods_supported"] == ["header"]
    # No issuer configured: no authorization server is named (naming the server's own origin,
    # which issues no tokens, sent OAuth clients into a login flow against a 404).
    assert "authorization_servers" not in body, body
    assert httpx2.get(f"{running.base}/.well-known/oauth-authorization-server", timeout=10).status_code == 404
    health = httpx2.get(f"{running.base}/health", timeout=10)
    from smriti import __version__

    assert health.status_code == 200 and health.json() == {"status": "ok", "version": __version__}


def test_users_are_isolated_and_other_users_ids_are_not_found(server):
    running, tokens = server

    async def main() -> None:
        async with _client(running.url, tokens["alice"]) as alice:
            content = "Alice keeps her keys in the blue drawer."
            stored = await alice.call_tool("smriti_store", {"content": content})
            assert not stored.is_error, stored.content
            alice_id = stored.structured_content["id"]
        async with _client(running.url, tokens["bob"]) as bob:
            stored = await bob.call_tool("smriti_store", {"content": "Bob parks his bike by the station."})
            bob_id = stored.structured_content["id"]
            listed = await bob.call_tool("smriti_recall", {"mode": "list", "limit": 10})
            assert [item["id"] for item in listed.structured_content["results"]] == [bob_id]
            found = await bob.call_tool("smriti_recall", {"query": "keys blue drawer", "limit": 10})
            assert alice_id not in [item["id"] for item in found.structured_content["results"]]
            # Bob forgets Alice's memory by id: not found, and nothing changes.
            forgotten = await bob.call_tool("smriti_manage", {"action": "forget", "memory_id": alice_id})
            assert forgotten.is_error and "no memory with id" in forgotten.content[0].text
            stats = await bob.call_tool("smriti_manage", {"action": "stats"})
            assert stats.structured_content["details"]["user"] == "bob"
            assert stats.structured_content["details"]["engrams"] == 1
            resource = await bob.read_resource("memory://stats")
            assert json.loads(resource.contents[0].text)["user"] == "bob"
        async with _client(running.url, tokens["alice"]) as alice:
            listed = await alice.call_tool("smriti_recall", {"mode": "list", "limit": 10})
            assert [item["id"] for item in listed.structured_content["results"]] == [alice_id]
            stats = await alice.call_tool("smriti_manage", {"action": "stats"})
            assert stats.structured_content["details"]["user"] == "alice"

    anyio.run(main)
    # A file per user on the embedded default, and both closed at shutdown.
    store = Path(os.environ["STORAGE_LOCATION"])
    assert (store / "alice").is_dir() and (store / "bob").is_dir()
    code, stderr = running.stop()
    assert code == 0 and stderr.count("memory database closed") == 2, stderr


def test_a_session_cannot_be_continued_with_another_users_token(server):
    running, tokens = server
    opened = _post(running.url, tokens["alice"])
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    hijack = _post(running.url, tokens["bob"], listing, **{"mcp-session-id": session})
    assert hijack.status_code == 404


def test_cli_server_option_sends_the_token(server, monkeypatch):
    running, tokens = server
    runner = CliRunner()
    monkeypatch.delenv("SMRITI_TOKEN", raising=False)
    refused = runner.invoke(app, ["context", "anything", "--server", running.url])
    assert refused.exit_code == 2 and "answered 401" in refused.stderr, refused.output
    assert "SMRITI_TOKEN) is missing" in refused.stderr
    monkeypatch.setenv("SMRITI_TOKEN", tokens["alice"])
    asked = runner.invoke(app, ["sync", "--server", running.url])
    assert asked.exit_code == 0 and "disabled" in asked.stdout, asked.output


@pytest.mark.parametrize(
    ("args", "host", "needle"),
    [
        (["--no-auth"], "0.0.0.0", "--no-auth is only allowed on a loopback address"),
        ([], "0.0.0.0", "refusing to serve HTTP without authentication on '0.0.0.0'"),
        ([], "127.0.0.1", "or pass --no-auth"),
    ],
)
def test_serving_without_authentication_is_refused_unless_asked_for_on_loopback(env, args, host, needle):
    command = [*server_command(), "--transport", "streamable-http", "--host", host]
    command += ["--port", str(free_port()), *args]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=60)
    assert done.returncode == 2, done.stderr
    assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


def test_no_auth_on_loopback_serves_accessing_user_and_keeps_dns_rebinding_protection(env):
    running = Server(env, "--no-auth")
    try:
        assert _post(running.url, None).status_code == 200
        # The SDK's Host/Origin check is on for a loopback bind.
        assert _post(running.url, None, Host="evil.example").status_code == 421
        assert _post(running.url, None, Origin="http://evil.example").status_code == 403
    finally:
        code, stderr = running.stop()
    assert code == 0, stderr
    assert "without authentication" in stderr


def test_tokens_from_the_environment_are_hashes(env, monkeypatch):
    from smriti.server.tokens import hash_token

    env = {**env, "SMRITI_TOKENS": f"carol:{hash_token('carols-secret')}"}
    running = Server(env)
    try:
        assert _post(running.url, "carols-secret").status_code == 200
        assert _post(running.url, hash_token("carols-secret")).status_code == 401  # the hash is no token
    finally:
        running.stop()


def test_token_commands(env):
    runner = CliRunner()
    token = add_token("dave")
    listed = runner.invoke(app, ["token", "list", "--json"])
    rows = json.loads(listed.stdout)
    assert [row["user"] for row in rows] == ["dave"]
    path = Path(env["STORAGE_LOCATION"]) / "tokens.json"
    text = path.read_text()
    assert token not in text and (path.stat().st_mode & 0o777) == 0o600
    bad = runner.invoke(app, ["token", "add", "../etc"])
    assert bad.exit_code == 2 and "path separator" in bad.stderr, bad.output
    missing = runner.invoke(app, ["token", "revoke", "nobody"])
    assert missing.exit_code == 2 and "no token" in missing.stderr
    assert runner.invoke(app, ["token", "revoke", rows[0]["id"]]).exit_code == 0
    assert json.loads(runner.invoke(app, ["token", "list", "--json"]).stdout) == []


def test_a_non_loopback_bind_with_tokens_serves_and_still_demands_them(env):
    token = add_token("alice")
    running = Server(env, host="0.0.0.0")
    try:
        assert _post(running.url, None).status_code == 401
        assert _post(running.url, token).status_code == 200
    finally:
        code, stderr = running.stop()
    assert code == 0, stderr
    assert "SMRITI_RESOURCE_URL" in stderr  # the advertised URL of a wildcard bind is a guess: said so


def test_version_flag():
    done = subprocess.run([*server_command(), "--version"], capture_output=True, text=True, timeout=60)
    from smriti import __version__

    assert done.returncode == 0 and done.stdout.strip() == f"smriti-mcp {__version__}"


# ----------------------------------------------------------------------------- an external issuer
@pytest.fixture
def issuer(tmp_path):
    """A signing key pair of an "authorization server": its JWKS as a file the server reads."""
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def sign(audience: str, *, user: str = "erin", expires_in: int = 300, signer=key, **extra) -> str:
        import time

        claims = {"iss": "https://issuer.example", "aud": audience, "sub": user}
        claims |= {"exp": int(time.time()) + expires_in, **extra}
        return jwt.encode(claims, signer, algorithm="RS256", headers={"kid": "k1"})

    return jwks, sign, other


def test_jwt_access_tokens_of_an_external_issuer(env, issuer):
    jwks, sign, other = issuer
    env = {**env, "SMRITI_AUTH_ISSUER_URL": "https://issuer.example", "SMRITI_AUTH_JWKS_URL": jwks.as_uri()}
    running = Server(env)
    try:
        metadata = httpx2.get(f"{running.base}/.well-known/oauth-protected-resource/mcp", timeout=10).json()
        assert metadata["authorization_servers"] == ["https://issuer.example"]
        good = sign(running.url)
        assert _post(running.url, good).status_code == 200
        for bad in (
            sign("https://another-resource.example/mcp"),  # issued for another resource
            sign(running.url, expires_in=-60),  # expired
            sign(running.url, signer=other),  # not signed by the issuer's key
            sign(running.url, user="../root"),  # a user name that cannot be a memory
        ):
            assert _post(running.url, bad).status_code == 401

        async def main() -> None:
            async with _client(running.url, good) as erin:
                stats = await erin.call_tool("smriti_manage", {"action": "stats"})
                assert stats.structured_content["details"]["user"] == "erin"

        anyio.run(main)
    finally:
        code, stderr = running.stop()
    assert code == 0, stderr


def test_smriti_serve_applies_the_same_rule(env):
    refused = CliRunner().invoke(
        app, ["serve", "--transport", "streamable-http", "--host", "0.0.0.0", "--no-auth"]
    )
    assert refused.exit_code == 2 and "only allowed on a loopback address" in refused.stderr


def test_a_memory_opened_at_a_first_request_gets_its_background_consolidation(env):
    token = add_token("alice")
    running = Server({**env, "CONSOLIDATION_INTERVAL": "1", "LOG_LEVEL": "DEBUG"})
    try:

        async def main() -> None:
            async with _client(running.url, token) as alice:
                await alice.call_tool("smriti_store", {"content": "Consolidation runs in the background."})
                await anyio.sleep(2.5)

        anyio.run(main)
    finally:
        code, stderr = running.stop()
    assert code == 0, stderr
    assert "opened the memory of user alice" in stderr
    assert "periodic consolidation done" in stderr, stderr[-2000:]
