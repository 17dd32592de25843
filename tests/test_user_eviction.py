"""A multi-user server closes idle memories and caps how many are open (server/users.py).

The runtimes are real (a SQLite file per user); the clock is the test's, so idleness is decided
without sleeping. The last tests run a real ``smriti-mcp`` over streamable HTTP with tokens.
"""

from __future__ import annotations

import time

import anyio
import pytest

from smriti.errors import TooManyUsers
from smriti.runtime import Runtime, close_runtime, open_runtime
from smriti.server.users import UserRuntimes
from tests.http_server import Server
from tests.test_server_auth import _client, add_token, env  # noqa: F401 - env is a fixture


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """Opens and closes real runtimes, noting the order of events."""

    def __init__(self, settings, close_delay: float = 0.0) -> None:
        self.settings, self.close_delay = settings, close_delay
        self.events: list[tuple[str, str | None]] = []
        self.closed: list[Runtime] = []

    def open(self, user: str | None) -> Runtime:
        self.events.append(("open", user))
        return open_runtime(self.settings, user=user, with_backup=False)

    def close(self, runtime: Runtime) -> None:
        time.sleep(self.close_delay)  # a final backup sync takes a while
        close_runtime(runtime, final_sync=False)
        self.events.append(("close", runtime.memory.context.store.user))
        self.closed.append(runtime)


def _runtimes(recorder: Recorder, clock: Clock, **options) -> UserRuntimes:
    options.setdefault("idle_timeout", 60.0)
    return UserRuntimes(recorder.open, recorder.close, multi_user=True, clock=clock, **options)


def test_an_idle_memory_is_closed_and_reopened_with_its_memories(settings):
    recorder, clock = Recorder(settings), Clock()

    async def main() -> None:
        runtimes = _runtimes(recorder, clock)
        async with runtimes.using("alice") as alice:
            stored = alice.memory.store("Alice keeps her bicycle in the garage.")
        clock.now += 30
        assert await runtimes.close_idle() == []  # not idle long enough
        clock.now += 31
        assert await runtimes.close_idle() == ["alice"]
        assert recorder.closed == [alice] and runtimes.opened() == []
        async with runtimes.using("alice") as again:
            assert again is not alice
            found = again.memory.recall("bicycle garage", limit=3)
        assert [item["id"] for item in found["results"]][:1] == [stored["id"]]
        await runtimes.aclose()

    anyio.run(main)
    assert recorder.events == [("open", "alice"), ("close", "alice"), ("open", "alice"), ("close", "alice")]


def test_a_memory_with_a_request_in_flight_is_never_closed(settings):
    recorder, clock = Recorder(settings), Clock()

    async def main() -> None:
        runtimes = _runtimes(recorder, clock)
        alice = await runtimes.take("alice")
        clock.now += 3600
        assert await runtimes.close_idle() == [] and runtimes.opened() == [alice]
        runtimes.release("alice")
        clock.now += 30
        assert await runtimes.close_idle() == []  # idle time counts from the request's end
        clock.now += 31
        assert await runtimes.close_idle() == ["alice"]
        await runtimes.aclose()

    anyio.run(main)


def test_the_least_recently_used_idle_memory_makes_room_at_the_cap(settings):
    recorder, clock = Recorder(settings), Clock()

    async def main() -> None:
        runtimes = _runtimes(recorder, clock, max_open=2)
        for user in ("alice", "bob"):
            clock.now += 1
            await runtimes.get(user)
        clock.now += 1
        await runtimes.get("alice")  # alice is now the more recent
        clock.now += 1
        await runtimes.get("carol")
        users = {runtime.memory.context.store.user for runtime in runtimes.opened()}
        assert users == {"alice", "carol"}
        await runtimes.aclose()

    anyio.run(main)
    assert recorder.events[:4] == [("open", "alice"), ("open", "bob"), ("close", "bob"), ("open", "carol")]


def test_at_the_cap_with_every_memory_busy_a_new_user_is_refused_and_nothing_closes(settings):
    recorder, clock = Recorder(settings), Clock()

    async def main() -> None:
        runtimes = _runtimes(recorder, clock, max_open=1)
        alice = await runtimes.take("alice")
        with pytest.raises(TooManyUsers, match="MAX_OPEN_USERS=1"):
            await runtimes.take("bob")
        assert runtimes.opened() == [alice] and recorder.closed == []
        runtimes.release("alice")
        bob = await runtimes.take("bob")  # alice is idle now: she makes room
        assert runtimes.opened() == [bob] and recorder.closed == [alice]
        runtimes.release("bob")
        await runtimes.aclose()

    anyio.run(main)


def test_background_work_ends_before_its_memory_closes(settings):
    recorder, clock = Recorder(settings), Clock()

    def on_open(tasks, runtime: Runtime) -> None:
        async def periodic() -> None:
            try:
                await anyio.sleep_forever()
            finally:
                recorder.events.append(("timer stopped", runtime.memory.context.store.user))

        tasks.start_soon(periodic)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            runtimes = _runtimes(recorder, clock, idle_timeout=0)  # no closing pass of its own
            runtimes.start(tasks, on_open)
            await runtimes.get("alice")
            await anyio.sleep(0.05)
            clock.now += 1
            runtimes.idle_timeout = 0.5
            assert await runtimes.close_idle() == ["alice"]
            await runtimes.aclose()

    anyio.run(main)
    assert recorder.events == [("open", "alice"), ("timer stopped", "alice"), ("close", "alice")]


def test_a_request_during_the_close_waits_and_gets_a_freshly_opened_memory(settings):
    recorder, clock = Recorder(settings, close_delay=0.5), Clock()

    async def main() -> None:
        runtimes = _runtimes(recorder, clock)
        first = await runtimes.get("alice")
        clock.now += 120
        got: list[Runtime] = []

        async def request() -> None:
            await anyio.sleep(0.1)  # the close has begun
            async with runtimes.using("alice") as runtime:
                got.append(runtime)

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(request)
            assert await runtimes.close_idle() == ["alice"]
        assert got and got[0] is not first and runtimes.opened() == got
        await runtimes.aclose()

    anyio.run(main)
    # The file was never open twice: the second open came after the close.
    assert recorder.events[:3] == [("open", "alice"), ("close", "alice"), ("open", "alice")]


def test_a_single_user_server_keeps_its_memory(settings):
    recorder, clock = Recorder(settings), Clock()

    async def main() -> None:
        runtimes = UserRuntimes(
            recorder.open, recorder.close, multi_user=False, idle_timeout=0.05, max_open=1, clock=clock
        )
        async with anyio.create_task_group() as tasks:
            runtimes.start(tasks, lambda _tasks, _runtime: None)
            one = await runtimes.get(None)
            clock.now += 3600
            await anyio.sleep(0.3)  # several periods of a closing pass, had one started
            assert runtimes.opened() == [one] and recorder.closed == []
            tasks.cancel_scope.cancel()
        await runtimes.aclose()

    anyio.run(main)


def _store_and_recall(url: str, token: str, text: str, query: str) -> list[str]:
    async def main() -> list[str]:
        async with _client(url, token) as client:
            await client.call_tool("smriti_store", {"content": text})
            result = await client.call_tool("smriti_recall", {"query": query, "limit": 3})
            return [item["text"] for item in result.structured_content["results"]]

    return anyio.run(main)


def _recall(url: str, token: str, query: str) -> list[str]:
    async def main() -> list[str]:
        async with _client(url, token) as client:
            result = await client.call_tool("smriti_recall", {"query": query, "limit": 3})
            return [item["text"] for item in result.structured_content["results"]]

    return anyio.run(main)


def test_http_server_closes_idle_users_and_reopens_them_on_their_next_request(env):  # noqa: F811
    alice = add_token("alice")
    running = Server({**env, "USER_IDLE_TIMEOUT": "0.5"})
    try:
        text = "Alice's favourite editor is Helix."
        assert text in _store_and_recall(running.url, alice, text, "favourite editor")
        for _ in range(100):  # the closing pass runs every timeout/4
            if "closed the idle memory of user alice" in running.stderr():
                break
            time.sleep(0.1)
        assert "closed the idle memory of user alice" in running.stderr()
        assert text in _recall(running.url, alice, "favourite editor")
    finally:
        code, stderr = running.stop()
    assert code == 0, stderr
    assert stderr.count("opened the memory of user alice") == 2, stderr[-2000:]


def test_http_server_with_one_open_memory_serves_two_users_in_turn(env):  # noqa: F811
    tokens = {user: add_token(user) for user in ("alice", "bob")}
    running = Server({**env, "MAX_OPEN_USERS": "1"})
    try:
        for user in ("alice", "bob"):
            text = f"{user.title()} is on call this week."
            assert text in _store_and_recall(running.url, tokens[user], text, "on call")
        assert _recall(running.url, tokens["alice"], "on call") == ["Alice is on call this week."]
    finally:
        code, stderr = running.stop()
    assert code == 0, stderr
    assert "closed the idle memory of user alice" in stderr and "closed the idle memory of user bob" in stderr
