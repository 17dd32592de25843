"""The CLI beside a running client (issue 44): commands go through the shared server without
loading the settings or the MCP SDK, and ``import``, ``view`` and ``restore`` borrow the
database from it (its clients' requests wait, then go on) instead of refusing.

Real processes: a stdio ``smriti-mcp`` client session on the user's shared server, the real
``smriti`` CLI, a bare git repository as the backup remote.
"""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
from mcp import Client
from mcp.client.stdio import stdio_client

from smriti.server.shared.client import read_state
from tests.test_shared_server import listed, run, shared, store  # noqa: F401  # shared: a fixture


def _git_remote(tmp_path) -> str:
    remotes = tmp_path / "remotes"
    remotes.mkdir()
    subprocess.run(["git", "init", "--quiet", "--bare", str(remotes / "alice-smriti.git")], check=True)
    return f"file://{remotes}"


def test_import_view_and_restore_while_a_client_is_connected(shared, tmp_path):  # noqa: F811
    one = shared(BACKUP_TYPE="github", GIT_BASE_URL=_git_remote(tmp_path))
    notes = tmp_path / "facts.txt"
    notes.write_text("Carol runs the billing service in Frankfurt.\nDana reviews every schema migration.\n")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = one.cli(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "smriti stop" not in done.stderr
        return done

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            first = await store(session, "Bob recommends cursor-based pagination for the orders API.")
            pid = read_state(one.paths)["pid"]
            thread = anyio.to_thread.run_sync

            imported = await thread(lambda: cli("import", "--from", "text", str(notes)))
            assert "imported 2 memories" in imported.stdout and "by lines" in imported.stderr
            assert len(await listed(session)) == 3  # the client sees the import at once

            page = tmp_path / "graph.html"
            await thread(lambda: cli("view", "-o", str(page)))
            assert "Dana reviews every schema migration" in page.read_text()

            await thread(lambda: cli("sync"))  # the snapshot restore goes back to
            synced = await listed(session)
            later = await store(session, "Erin keeps the staging cluster in Dublin.")
            await thread(lambda: cli("restore", "--force"))
            restored = await listed(session)
            assert restored == synced and later not in restored and first in restored
            assert read_state(one.paths)["pid"] == pid  # one server throughout, never stopped

    run(main, 300)
    assert one.log().count("lent the memory") == 3, one.log()


def test_a_request_during_the_hand_over_waits_and_sees_what_was_written(shared, tmp_path, monkeypatch):  # noqa: F811
    """While the CLI holds the database, a client's request waits; it runs once the memory is
    back, on the file as the CLI left it."""
    from smriti.cli.shared import borrowed
    from smriti.config import Settings
    from smriti.memory import Memory

    one = shared()
    for name, value in one.env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Bob recommends cursor-based pagination for the orders API.")
            answers: list[set[str]] = []

            async def ask() -> None:
                answers.append(await listed(session))

            with borrowed(None, "test"):
                with Memory.open(settings) as memory:  # the file is free: the server closed it
                    written = memory.store("Frank maintains the Kafka cluster.")["id"]
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(ask)
                    with anyio.move_on_after(1.0):  # bounded: the answer must not come now
                        while not answers:
                            await anyio.sleep(0.05)
                    assert not answers, "a request was served while the database was lent"
                    tasks.cancel_scope.cancel()
            await ask()
            assert written in answers[-1]

    run(main, 240)


def test_commands_through_the_server_load_no_settings_nor_sdk(shared):  # noqa: F811
    """`smriti recall --json` beside a client imports neither pydantic nor the MCP SDK, httpx2,
    the settings or numpy (what made it 4.5-5.9 s a command)."""
    one = shared()
    probe = (
        "import sys, runpy; sys.argv = ['smriti', 'recall', 'pagination', '--json'];\n"
        "try:\n    runpy.run_module('smriti.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "names = ('pydantic', 'mcp', 'httpx2', 'numpy', 'smriti.config', 'rich')\n"
        "heavy = [m for m in names if m in sys.modules]\n"
        "print('HEAVY', json.dumps(heavy))"
    )

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Bob recommends cursor-based pagination for the orders API.")

            def probed() -> subprocess.CompletedProcess[str]:
                return subprocess.run(
                    [sys.executable, "-c", "import json\n" + probe],
                    env=one.env, capture_output=True, text=True, timeout=120,
                )  # fmt: skip

            done = await anyio.to_thread.run_sync(probed)
            assert done.returncode == 0, done.stderr
            answer, _, marker = done.stdout.rpartition("HEAVY ")
            assert json.loads(answer)["results"][0]["text"].startswith("Bob recommends")
            assert json.loads(marker) == []

    run(main, 240)


def test_a_request_the_server_refuses_gets_the_validators_words(shared):  # noqa: F811
    """The CLI sends a request unchecked; the server's tool checks it with validators.check_store
    under its own MAX_CONTENT_CHARS: the same one line, exit 2, nothing stored."""
    from smriti.errors import InvalidInput
    from smriti.validators import check_store

    one = shared(MAX_CONTENT_CHARS="40")
    text = "Alice prefers PostgreSQL with pgvector for retrieval projects."
    try:
        check_store(text, max_chars=40)
    except InvalidInput as error:
        expected = str(error)

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Bob likes short notes.")
            done = await anyio.to_thread.run_sync(lambda: one.cli("store", text))
            assert done.returncode == 2, (done.stdout, done.stderr)
            assert expected in " ".join(done.stderr.split()), done.stderr
            assert len(await listed(session)) == 1

    run(main, 240)
