"""The shared server per user: real ``smriti-mcp`` relays, a real server on a unix socket, the real CLI.

Every test has its own STORAGE_LOCATION, so its own server; the ``shared`` fixture kills
whatever server is still running at the end, so none outlives its test.
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from contextlib import AsyncExitStack, suppress
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from smriti.config import Settings
from smriti.server.shared.client import read_state, server_running, server_status, shared_paths
from tests.client_examples import CLIENTS, EXAMPLES, example_server, pasted_env
from tests.envs import offline_env


def script(name: str) -> list[str]:
    """The installed console script, or its module when scripts are not installed."""
    path = Path(sys.executable).with_name(name)
    module = {"smriti-mcp": "smriti.server.app", "smriti": "smriti.cli.commands"}[name]
    return [str(path)] if path.exists() else [sys.executable, "-m", module]


class Shared:
    """One test's storage folder, environment and shared server."""

    def __init__(self, location: Path, **extra: str) -> None:
        self.location = location
        values = offline_env(location, **{"SMRITI_SHARED": "true", "SHARED_IDLE_TIMEOUT": "60", **extra})
        self.env = {**os.environ, **values}
        self.paths = shared_paths(Settings(**{k.lower(): v for k, v in values.items()}))

    @classmethod
    def pasted(cls, home: Path) -> Shared:
        """The server of a client configured from an example file as it is: no setting at all,
        so the user's own name and ``~/.smriti`` (``home`` stands in for the home folder)."""
        one = cls.__new__(cls)
        one.location = home / ".smriti"
        one.env = pasted_env(home)
        one.paths = shared_paths(Settings(storage_location=one.location, accessing_user=getpass.getuser()))
        return one

    def params(self, env: dict[str, str] | None = None) -> StdioServerParameters:
        command = script("smriti-mcp")
        return StdioServerParameters(command=command[0], args=command[1:], env=env or self.env)

    def cli(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*script("smriti"), *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=120
        )

    def status(self) -> dict:
        status = server_status(self.paths)
        assert status is not None, self.log()
        return status

    def log(self) -> str:
        return self.paths.log.read_text() if self.paths.log.exists() else "(no server log)"

    def wait_stopped(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while server_running(self.paths):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def kill(self) -> None:
        """Kill -9 whatever server holds the lock (the state file names it)."""
        deadline = time.monotonic() + 15
        while server_running(self.paths) and time.monotonic() < deadline:
            state = read_state(self.paths)
            if state:
                with suppress(ProcessLookupError):
                    os.kill(state["pid"], signal.SIGKILL)
            time.sleep(0.1)


@pytest.fixture
def shared(tmp_path):
    made: list[Shared] = []

    def make(location: Path | None = None, **extra: str) -> Shared:
        made.append(Shared(location or tmp_path / "store", **extra))
        return made[-1]

    yield make
    for one in made:
        one.kill()


@pytest.fixture
def pasted(tmp_path):
    """The shared server of clients configured from the examples as pasted, in ``tmp_path/home``."""
    one = Shared.pasted(tmp_path / "home")
    yield one
    one.kill()


def run(main, timeout: float) -> None:
    """``anyio.run(main)``, failing after ``timeout`` seconds instead of hanging the suite."""

    async def bounded() -> None:
        with anyio.fail_after(timeout):
            await main()

    anyio.run(bounded)


async def store(client, content: str) -> str:
    result = await client.call_tool("smriti_store", {"content": content})
    assert not result.is_error, result.content
    return result.structured_content["id"]


async def listed(client, limit: int = 20) -> set[str]:
    result = await client.call_tool("smriti_recall", {"mode": "list", "limit": limit})
    assert not result.is_error, result.content
    return {item["id"] for item in result.structured_content["results"]}


def test_the_five_example_clients_at_once_share_one_server(pasted, tmp_path):
    """Claude Desktop, Claude Code, Cursor, Windsurf and VS Code, each starting the server its
    example file names, as pasted (no settings, no key: the offline default) and at the same
    moment: one server starts, every tool is listed, and each client's store is recalled by the
    others at once, in the user's own ~/.smriti."""
    one = pasted
    home = tmp_path / "home"
    contents = {
        "claude_desktop": "Alice prefers PostgreSQL with pgvector for retrieval projects.",
        "claude_code": "The Atlas deploy pipeline runs on GitHub Actions every night.",
        "cursor": "Bob recommends cursor-based pagination for the orders API.",
        "windsurf": "Carol keeps the billing service on Kubernetes in Frankfurt.",
        "vscode": "Dana reviews every schema migration before it ships.",
    }
    ids: dict[str, str] = {}
    seen: dict[str, set[str]] = {}
    recalled: dict[str, str] = {}
    stored = anyio.Event()

    async def client(name: str, errlog) -> None:
        server = example_server(name)
        env = {**one.env, **server.get("env", {})}
        params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
        async with Client(stdio_client(params, errlog=errlog)) as session:
            tools = await session.list_tools()
            assert {"smriti_store", "smriti_recall", "smriti_manage"} <= {tool.name for tool in tools.tools}
            ids[name] = await store(session, contents[name])
            if len(ids) == len(contents):
                stored.set()
            await stored.wait()
            seen[name] = await listed(session)
            result = await session.call_tool("smriti_recall", {"query": "who reviews schema migrations?"})
            assert not result.is_error, result.content
            recalled[name] = result.structured_content["results"][0]["id"]

    async def main() -> None:
        async with AsyncExitStack() as stack, anyio.create_task_group() as tasks:
            for name in contents:
                errlog = stack.enter_context((tmp_path / f"{name}.log").open("w"))
                tasks.start_soon(client, name, errlog)

    run(main, 240)
    for name in contents:
        assert seen[name] == set(ids.values()), (name, seen[name], ids)
        assert recalled[name] == ids["vscode"], (name, recalled[name], ids)
        relay_log = (tmp_path / f"{name}.log").read_text()
        assert "Traceback" not in relay_log, relay_log
    log = one.log()
    assert log.count("shared Smriti server 0") == 1, log  # one server started, not five
    assert "already serves" not in log and "could not embed" not in log
    assert one.paths.folder.is_relative_to(home / ".smriti")  # the default place, nothing set
    mode = stat.S_IMODE(os.stat(one.paths.socket).st_mode)
    assert stat.S_ISSOCK(os.stat(one.paths.socket).st_mode) and mode == 0o600, oct(mode)
    assert one.status()["requests_in_flight"] == 0  # the relays said goodbye


def test_cli_and_hook_while_a_client_is_connected(shared):
    """`smriti store/list/recall/stats/export/forget/context/capture/view` work through the
    server while an MCP client holds the memory, and each side sees the other's writes at once."""
    one = shared()

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            from_client = await store(session, "Bob recommends cursor-based pagination for the orders API.")

            def run(*args: str, stdin: str = "") -> str:
                done = one.cli(*args, stdin=stdin)
                assert done.returncode == 0, (args, done.stdout, done.stderr)
                assert "locked" not in done.stderr
                return done.stdout

            cli = anyio.to_thread.run_sync
            fact = "Alice prefers pgvector for RAG."
            from_cli = json.loads(await cli(lambda: run("store", fact, "--json")))
            assert from_cli["id"] in await listed(session)  # the client sees the CLI's store
            listed_by_cli = json.loads(await cli(lambda: run("list", "--json")))
            assert {r["id"] for r in listed_by_cli["results"]} == {from_client, from_cli["id"]}
            recalled = json.loads(await cli(lambda: run("recall", "which pagination for orders", "--json")))
            assert recalled["results"][0]["id"] == from_client
            stats = json.loads(await cli(lambda: run("stats", "--json")))
            assert stats["engrams"] == 2 and stats["user"] == "alice"
            hook = json.dumps({"prompt": "what pagination does Bob recommend?"})
            context = await cli(lambda: run("context", "-", stdin=hook))
            assert context.startswith("- ") and "cursor-based pagination" in context
            exported = await cli(lambda: run("export", "-"))
            engrams = [json.loads(line) for line in exported.splitlines() if '"engram"' in line]
            assert len(engrams) == 2, exported[:500]
            transcript = "We decided to deploy the billing service on Fridays.\n"
            await cli(lambda: run("capture", "-", stdin=transcript))
            assert len(await listed(session)) == 3
            await cli(lambda: run("forget", from_cli["id"][:8]))
            assert from_cli["id"] not in await listed(session)
            status = json.loads(await cli(lambda: run("status", "--json")))
            assert status["pid"] == read_state(one.paths)["pid"] and status["sessions"] >= 1
            page = one.location / "g.html"
            await cli(lambda: run("view", "-o", str(page)))  # the server hands the database over
            assert "cursor-based pagination" in page.read_text()
            assert from_client in await listed(session)  # and the client goes on

    run(main, 240)


def test_kill_9_during_stores_loses_nothing_acknowledged_and_clients_recover(shared, tmp_path):
    one = shared(MEMORY_FABRIC_MAX_RESULTS="200")
    acknowledged: list[str] = []
    failures: list[str] = []
    pids: list[int] = []

    async def main() -> None:
        with (tmp_path / "relay.log").open("w") as errlog:
            async with Client(stdio_client(one.params(), errlog=errlog)) as session:

                async def stores() -> None:
                    for n in range(40):
                        text = f"Deployment note number {n}: service s{n} runs on host h{n}."
                        try:
                            result = await session.call_tool("smriti_store", {"content": text})
                        except MCPError as error:  # the one the server was running when killed
                            failures.append(str(error))
                            continue
                        if result.is_error:
                            failures.append(result.content[0].text)
                        else:
                            acknowledged.append(result.structured_content["id"])

                async def killer() -> None:
                    while len(acknowledged) < 10:
                        await anyio.sleep(0.01)
                    pid = read_state(one.paths)["pid"]
                    pids.append(pid)
                    os.kill(pid, signal.SIGKILL)

                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(killer)
                    tasks.start_soon(stores)
                # The same client goes on: its next requests started a new server.
                assert set(acknowledged) <= await listed(session, 200)

        # A new client finds every acknowledged memory too.
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as later:
            assert set(acknowledged) <= await listed(later, 200)

    run(main, 240)
    assert len(failures) <= 1, failures  # at most the store the server was running when killed
    assert len(acknowledged) >= 39
    assert read_state(one.paths)["pid"] != pids[0]  # a new server
    assert "Traceback" not in (tmp_path / "relay.log").read_text()


def test_an_attached_client_keeps_the_server_and_it_exits_when_idle(shared):
    one = shared(SHARED_IDLE_TIMEOUT="2")

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Carol keeps her notes in Obsidian.")
            await anyio.sleep(5)  # idle longer than the timeout, but attached
            assert server_running(one.paths)
            assert len(await listed(session)) == 1

    run(main, 120)
    assert one.wait_stopped(20), one.log()
    assert "idle for 2 s: exiting" in one.log()
    assert not one.paths.socket.exists() and not one.paths.state.exists()
    assert one.cli("status").returncode == 1
    listed_here = one.cli("list", "--json")  # no server: the CLI opens the database itself
    assert listed_here.returncode == 0 and "Obsidian" in listed_here.stdout, listed_here.stderr
    assert not server_running(one.paths)  # and starts none


def test_a_server_started_before_its_first_request_waits_for_it_past_the_idle_timeout(shared):
    """A relay starts the server before it imports the MCP SDK (seconds on a loaded machine):
    a server nobody has talked to yet outlives a short idle timeout, then serves the relay."""
    one = shared(SHARED_IDLE_TIMEOUT="1")
    start = (
        "from smriti.config import load_settings; from smriti.server.shared.client import ensure_server; "
        "ensure_server(load_settings())"
    )
    started = subprocess.run(
        [sys.executable, "-c", start], env=one.env, capture_output=True, text=True, timeout=120
    )
    assert started.returncode == 0, started.stderr  # what the relay's early start does
    pid = one.status()["pid"]
    time.sleep(3)  # three idle timeouts, no request
    assert one.status()["pid"] == pid, one.log()

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Erin keeps the release checklist in the wiki.")

    run(main, 120)
    assert one.wait_stopped(20), one.log()  # once served, the idle timeout applies again
    assert "idle for 1 s: exiting" in one.log()


def test_smriti_stop_stops_it_and_the_next_request_starts_another(shared):
    one = shared()

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            first = await store(session, "Dana reviews pull requests in the morning.")
            pid = one.status()["pid"]
            stopped = await anyio.to_thread.run_sync(lambda: one.cli("stop"))
            assert stopped.returncode == 0 and f"stopped pid {pid}" in stopped.stderr, stopped.stderr
            assert not server_running(one.paths)
            # Its parent, the relay that started it, reaped it: no zombie while the client runs.
            for _ in range(50):
                if not Path(f"/proc/{pid}").exists():
                    break
                await anyio.sleep(0.1)
            assert not Path(f"/proc/{pid}").exists()
            assert await listed(session) == {first}  # the session goes on, on a new server
            assert one.status()["pid"] != pid

    run(main, 120)
    assert "memory database closed" in one.log()  # stop shut down cleanly


def test_a_stale_socket_and_state_are_cleaned(shared):
    one = shared()
    one.paths.folder.mkdir(parents=True)
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(one.paths.socket))  # a socket file that nobody listens on (a crashed server's)
    dead.close()
    one.paths.state.write_text(json.dumps({"pid": 2**22 + 7, "socket": str(one.paths.socket)}))
    assert one.cli("status").returncode == 1

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Erin deploys with Ansible.")

    run(main, 120)
    assert one.status()["pid"] == read_state(one.paths)["pid"] != 2**22 + 7


def test_a_storage_path_too_long_for_a_socket_uses_a_private_temporary_folder(shared, tmp_path):
    one = shared(tmp_path / ("deep" * 30))
    assert one.paths.socket.parent != one.paths.folder

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Frank writes his tests first.")

    run(main, 120)
    assert stat.S_IMODE(one.paths.socket.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(one.paths.socket.stat().st_mode) == 0o600


def initialize_reply(one: Shared) -> dict:
    """What a raw stdio ``smriti-mcp`` answers to ``initialize``."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    pipe = subprocess.PIPE
    process = subprocess.Popen(
        script("smriti-mcp"), stdin=pipe, stdout=pipe, stderr=subprocess.DEVNULL, env=one.env
    )
    try:
        process.stdin.write((json.dumps(request) + "\n").encode())
        process.stdin.flush()
        return json.loads(process.stdout.readline())
    finally:
        process.kill()
        process.wait()


def test_smriti_shared_false_serves_in_process(shared, tmp_path):
    """SMRITI_SHARED=false: the stdio process opens the database itself, as before, and no
    server, socket or lock of the shared server appears."""
    one = shared()
    env = {**one.env, "SMRITI_SHARED": "false"}
    log = tmp_path / "stderr.log"

    async def main() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(one.params(env), errlog=errlog)) as session:
                await store(session, "Grace prefers tabs.")
                assert not one.paths.socket.exists() and not one.paths.server_lock.exists()
                reply = await anyio.to_thread.run_sync(initialize_reply, one)
                # A shared client meanwhile cannot start a server: it says why, in one message.
                assert reply["error"]["message"].startswith("the shared Smriti server exited at start")
                assert "memory.sqlite is locked by another process" in reply["error"]["message"]

    run(main, 120)
    assert "memory database closed" in log.read_text()  # this process closed it
    assert not server_running(one.paths)


def test_the_settings(monkeypatch):
    assert Settings().shared is True and Settings().shared_idle_timeout == 600
    monkeypatch.setenv("SMRITI_SHARED", "false")
    monkeypatch.setenv("SHARED_IDLE_TIMEOUT", "5")
    assert Settings().shared is False and Settings().shared_idle_timeout == 5
    from smriti.config import load_settings
    from smriti.errors import SettingsError

    monkeypatch.setenv("SHARED_IDLE_TIMEOUT", "0")
    with pytest.raises(SettingsError, match="SHARED_IDLE_TIMEOUT"):
        load_settings()
    monkeypatch.setenv("SHARED_IDLE_TIMEOUT", "5")
    monkeypatch.setenv("SMRITI_SHARED", "maybe")
    with pytest.raises(SettingsError, match="SMRITI_SHARED"):
        load_settings()


def test_a_client_with_other_settings_is_told_that_the_running_server_keeps_its_own(shared, tmp_path):
    one = shared()
    other = {**one.env, "MAX_CONTENT_CHARS": "5000"}

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as first:
            await store(first, "Heidi runs the on-call rotation.")
            for name, env in (("same", one.env), ("other", other)):
                with (tmp_path / f"{name}.log").open("w") as errlog:
                    async with Client(stdio_client(one.params(env), errlog=errlog)) as session:
                        assert len(await listed(session)) == 1

    run(main, 120)
    assert "runs with other settings" in (tmp_path / "other.log").read_text()
    assert "runs with other settings" not in (tmp_path / "same.log").read_text()


def test_the_readme_block_and_the_examples_name_one_memory_for_every_client():
    """The README's client block (the same in the getting-started page) is one server entry that
    every client can use, offline with no key, and the example configurations set nothing that
    would give a client a memory of its own (no user, no folder, no SMRITI_SHARED=false), so every
    client shares the user's one server."""
    import re

    root = EXAMPLES.parents[1]
    readme = (root / "README.md").read_text()
    section = readme.split("### In an MCP client", 1)[1].split("##", 1)[0]
    text = re.search(r"```json\n(.*?)```", section, re.S).group(1)
    assert f"```json\n{text}```" in (root / "docs" / "getting-started.md").read_text()
    (entry,) = json.loads(text)["mcpServers"].values()
    assert Path(entry["command"]).name == "smriti-mcp"
    assert entry["args"] == []  # langchain-mcp-adapters refuses a stdio entry without args
    env = entry.get("env", {})
    # One memory for every client: the defaults (the OS user, ~/.smriti) or a user and folder named.
    assert ("ACCESSING_USER" in env) == ("STORAGE_LOCATION" in env)
    assert not any(name.endswith("_API_KEY") for name in env)  # the offline default needs none
    assert "SMRITI_SHARED" not in env  # the default: shared
    for client in CLIENTS:
        server = example_server(client)
        assert server["args"] == []
        assert not {"ACCESSING_USER", "STORAGE_LOCATION", "SMRITI_SHARED"} & set(server.get("env", {}))


def test_a_relay_starts_the_shared_server_before_its_client_writes_anything(shared, tmp_path):
    """The server's start (seconds) overlaps the client's own start and handshake: a relay whose
    client has sent nothing yet has started it, and exits at once when stdin closes."""
    from tests.raw_stdio import RawServer

    one = shared()
    relay = RawServer(one.env, tmp_path / "relay.log")
    try:
        deadline = time.monotonic() + 60
        while server_status(one.paths) is None:
            assert time.monotonic() < deadline, one.log()
            time.sleep(0.1)
        # and connected to it, ready for the first line (the relay connects once it sees the
        # server answer, a poll after the status this test saw: give it a moment, not a minute)
        connected = time.monotonic() + 5
        while one.status()["sessions"] != 1 and time.monotonic() < connected:
            time.sleep(0.05)
        assert one.status()["sessions"] == 1
        relay.close_stdin()
        assert relay.process.wait(10) == 0
    finally:
        relay.stop()


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"SMRITI_SHARED": "TRUE", "ACCESSING_USER": "bob", "STORAGE_LOCATION": "~/elsewhere"},
        {"shared": "yes", "LOG_LEVEL": "debug"},
        {"SMRITI_SHARED": "off"},
        {"SMRITI_SHARED": "maybe"},
    ],
)
def test_the_relay_reads_the_environment_as_the_settings_do(env, monkeypatch):
    """The relay reads where the user's server is without the settings (no pydantic): the same
    user, folder and on/off as Settings, and no relay where Settings would refuse the value."""
    from smriti.errors import SettingsError
    from smriti.server.shared.client import Attachment

    for name in ("SMRITI_SHARED", "SHARED", "ACCESSING_USER", "STORAGE_LOCATION", "LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    attachment = Attachment.from_environment(env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        settings = Settings()
    except Exception as error:
        assert isinstance(error, SettingsError) or "validation" in str(error)
        assert attachment is None
        return
    if not settings.shared:
        assert attachment is None
        return
    assert attachment is not None
    assert (attachment.accessing_user, attachment.storage_location) == (
        settings.accessing_user,
        settings.storage_location,
    )
    assert attachment.log_level == settings.log_level


def test_smriti_status_shows_what_matters_and_all_shows_everything(shared, tmp_path):
    """The summary: running, sessions, the memory's counts and only the settings changed from
    their defaults (not the name of every setting); --all shows the whole report."""
    from tests.raw_stdio import RawServer

    one = shared(CONTEXT_SEEDS="2")
    relay = RawServer(one.env, tmp_path / "relay.log")
    try:
        relay.initialize()
        stored = relay.request(
            2,
            "tools/call",
            {"name": "smriti_store", "arguments": {"content": "Alice prefers PostgreSQL with pgvector."}},
        )
        assert not stored["result"].get("isError"), stored
        table = one.cli("status")
        assert table.returncode == 0, table.stderr
        shown = table.stdout
        assert "running" in shown and "sessions" in shown and "1 memories" in shown, shown
        assert "CONTEXT_SEEDS" in shown and "EMBEDDING_DIMS" in shown, shown  # changed: shown
        assert "RECENCY_HALF_LIFE_DAYS" not in shown.upper() and "setting_names" not in shown, shown
        assert len(shown.splitlines()) < 40, shown
        everything = one.cli("status", "--all").stdout
        assert "setting_names" in everything and "recency_half_life_days" in everything
        report = json.loads(one.cli("status", "--json").stdout)
        assert report["memory"]["memories"] == 1 and report["changed_settings"]["CONTEXT_SEEDS"] == "2"
    finally:
        relay.close_stdin()
        relay.process.wait(10)
        relay.stop()


def test_smriti_status_counts_an_attached_relay_and_names_the_backend_auto_opened(shared, tmp_path):
    """With a stdio client attached through its relay, ``smriti status`` shows that session and
    the backend DB_TYPE=auto resolved to (not "sessions 0" and "db_type auto")."""
    from tests.raw_stdio import RawServer

    one = shared(DB_TYPE="auto")
    relay = RawServer(one.env, tmp_path / "relay.log")
    try:
        relay.initialize()
        assert relay.request(2, "tools/list")["result"]["tools"]
        shown = one.cli("status", "--json")
        assert shown.returncode == 0, shown.stderr
        status = json.loads(shown.stdout)
        assert status["sessions"] == 1, status
        assert (status["db_type"], status["db_type_setting"]) == ("sqlite", "auto"), status
        table = one.cli("status")
        assert "sqlite" in table.stdout and "sessions" in table.stdout
    finally:
        relay.close_stdin()
        relay.process.wait(10)
        relay.stop()
