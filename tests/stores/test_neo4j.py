"""Neo4j pieces that need no server: naming, escaping, connection errors, the retry policy.

The store's behaviour against a live server is covered by the conformance and isolation
suites when NEO4J_URI is set.
"""

from __future__ import annotations

import socket

import pytest

pytest.importorskip("neo4j")

from neo4j.exceptions import ClientError, IncompleteCommit, ServiceUnavailable, TransientError

from smriti.stores.base import StoreError, UnsafeUserError
from smriti.stores.cypher.neo4j import (
    _retryable,
    _with_retries,
    database_name_for,
    escape_lucene,
    open_neo4j,
)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ("alice", "smriti-alice"),
        ("bob.smith", "smriti-bob.smith"),
        ("7of9", "smriti-7of9"),
        ("a-b", "smriti-a-b"),
    ],
)
def test_database_names_map_one_to_one(user, expected):
    assert database_name_for(user) == expected


UNMAPPABLE = ["Alice", "a_b", "bob.", "bob-", "x" * 57, "a b", "x}) MATCH (n) DELETE n //"]


@pytest.mark.parametrize("user", UNMAPPABLE)
def test_unmappable_user_names_are_refused(user):
    with pytest.raises(UnsafeUserError):
        database_name_for(user)


def test_longest_mappable_name_fits_neo4j_limit():
    assert len(database_name_for("x" * 56)) == 63


def test_escape_lucene():
    assert escape_lucene('a+b-c && d || !(e){f}[g]^"h"~i*j?k:l\\m/n') == (
        'a\\+b\\-c \\&\\& d \\|\\| \\!\\(e\\)\\{f\\}\\[g\\]\\^\\"h\\"\\~i\\*j\\?k\\:l\\\\m\\/n'
    )
    assert escape_lucene("plain words") == "plain words"


def _cfg(settings, **overrides):
    return settings.model_copy(update={"db_type": "neo4j", "neo4j_username": "neo4j", **overrides})


def test_server_down_gives_one_store_error_naming_neo4j_uri(settings):
    cfg = _cfg(settings, neo4j_uri=f"bolt://127.0.0.1:{_closed_port()}")
    with pytest.raises(StoreError, match="NEO4J_URI") as caught:
        open_neo4j(cfg, "alice")
    assert isinstance(caught.value.__cause__, ServiceUnavailable)


def test_bad_or_missing_uri_names_neo4j_uri(settings):
    with pytest.raises(StoreError, match="NEO4J_URI"):
        open_neo4j(_cfg(settings, neo4j_uri="gopher://nowhere"), "alice")
    with pytest.raises(StoreError, match="NEO4J_URI"):
        open_neo4j(_cfg(settings, neo4j_uri=""), "alice")


@pytest.mark.parametrize("isolation", ["tenant", "database"])
def test_user_name_is_checked_before_connecting(settings, isolation):
    cfg = _cfg(settings, neo4j_uri=f"bolt://127.0.0.1:{_closed_port()}", neo4j_isolation=isolation)
    with pytest.raises(UnsafeUserError):
        open_neo4j(cfg, "x}) MATCH (n) DETACH DELETE n //")
    if isolation == "database":
        with pytest.raises(UnsafeUserError):
            open_neo4j(cfg, "Alice")  # valid elsewhere, but would share a database with "alice"


def test_retry_policy():
    assert _retryable(TransientError("deadlock"))
    assert _retryable(ServiceUnavailable("leader switch"))
    assert not _retryable(IncompleteCommit("commit outcome unknown"))
    assert not _retryable(ClientError("syntax error"))

    calls = []

    @_with_retries
    def flaky():
        calls.append(1)
        if len(calls) < 3:
            raise TransientError("try again")
        return "done"

    assert flaky() == "done" and len(calls) == 3

    @_with_retries
    def broken():
        calls.append(1)
        raise ClientError("not transient")

    calls.clear()
    with pytest.raises(ClientError):
        broken()
    assert len(calls) == 1
