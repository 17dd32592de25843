"""BACKUP_TYPE=github against real git repositories: bare repositories in tmp_path as remotes."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from smriti.runtime import BackupDisabled, close_runtime, open_runtime
from smriti.stores.backup import BackupError, RestoreRefused
from tests.backup_helpers import (
    FAST_RETRY,
    assert_same_memory,
    export_dies_half_way,
    fill,
    leftovers,
    picture,
    with_settings,
)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout.strip()


def bare_repository(remotes: Path, user: str = "alice") -> Path:
    path = remotes / f"{user}-smriti.git"
    git("init", "--quiet", "--bare", str(path))
    return path


def commits(repository: Path) -> list[str]:
    return git("--git-dir", str(repository), "rev-list", "main").splitlines()


def remote_file(repository: Path, name: str) -> str:
    return git("--git-dir", str(repository), "show", f"main:{name}")


@pytest.fixture
def remotes(tmp_path) -> Path:
    return tmp_path / "remotes"


@pytest.fixture
def git_settings(settings, remotes):
    return with_settings(settings, backup_type="github", git_base_url=str(remotes))


@pytest.fixture
def runtimes():
    """``open(settings)`` opens a Runtime with fast retries; all are closed at the end."""
    opened = []

    def open_(settings):
        runtime = open_runtime(settings)
        if runtime.backup is not None:
            runtime.backup.retry = FAST_RETRY
        opened.append(runtime)
        return runtime

    yield open_
    for runtime in opened:
        close_runtime(runtime, final_sync=False)


def test_sync_commits_only_changes_and_restore_round_trips(git_settings, remotes, tmp_path, runtimes):
    repository = bare_repository(remotes)
    runtime = runtimes(git_settings)
    fill(runtime.memory)

    first = runtime.sync()
    assert first["pushed"] is True and first["reason"] == "pushed"
    assert commits(repository) == [first["revision"]]
    assert first["counts"]["engrams"] == 6 and first["counts"]["edges"] > 0

    again = runtime.sync()
    assert again == {**again, "pushed": False, "reason": "unchanged"}
    assert len(commits(repository)) == 1  # no change, no commit

    runtime.memory.store("Carol set up Kubernetes autoscaling for the Atlas workers.")
    second = runtime.sync()
    assert second["pushed"] is True and second["revision"] != first["revision"]
    assert commits(repository) == [second["revision"], first["revision"]]
    manifest = json.loads(remote_file(repository, "manifest.json"))
    assert manifest["counts"]["engrams"] == 7 and manifest["sha256"] == second["sha256"]
    assert len(remote_file(repository, "memory.jsonl").splitlines()) > 7

    status = runtime.backup_status()
    assert status["enabled"] is True and status["last_error"] is None
    assert status["last_sync"]["revision"] == second["revision"] and status["last_success"] == second["time"]
    before = picture(runtime.memory.context.store)

    elsewhere = runtimes(with_settings(git_settings, storage_location=tmp_path / "new-machine"))
    restored = elsewhere.restore()
    assert restored["restored"] is True and restored["verified"] is True
    assert restored["revision"] == second["revision"] and restored["counts"]["engrams"] == 7
    assert_same_memory(before, picture(elsewhere.memory.context.store))
    # A restore records what it pulled, so an unchanged memory is not pushed back.
    assert elsewhere.sync()["reason"] == "unchanged"
    assert elsewhere.restore() == {**elsewhere.restore(), "restored": False, "reason": "already up to date"}
    # The restored copy is usable: vector search over the restored embeddings finds the memory
    # (and, since recall reinforces what it returns, the next sync has a change to push).
    found = elsewhere.memory.recall("Kubernetes autoscaling Atlas workers", limit=3, mode="search")
    assert "Kubernetes" in json.dumps(found)
    assert elsewhere.sync()["pushed"] is True
    assert leftovers(tmp_path / "new-machine" / "alice") == []


def test_unreachable_remote_is_retried_reported_and_never_blocks_the_store(
    git_settings, remotes, runtimes, caplog
):
    runtime = runtimes(git_settings)  # no repository at GIT_BASE_URL yet
    runtime.memory.store("Alice keeps the Atlas runbook in the wiki.")

    with caplog.at_level("WARNING", logger="smriti.backup"), pytest.raises(BackupError) as failed:
        runtime.sync()
    message = str(failed.value)
    assert "after 3 attempt(s)" in message and "alice-smriti.git" in message and "\n" not in message
    assert len([r for r in caplog.records if "attempt" in r.getMessage()]) == 2  # two retries logged
    status = runtime.backup_status()
    assert status["last_success"] is None and "git" in status["last_error"]

    # Local writes and reads are unaffected by the dead remote.
    runtime.memory.store("Bob owns the Atlas on-call rotation this week.")
    assert runtime.memory.context.store.count_engrams() == 2
    assert "on-call" in json.dumps(runtime.memory.recall("Atlas on-call rotation", limit=2))

    repository = bare_repository(remotes)  # the remote comes back
    result = runtime.sync()
    assert result["pushed"] is True and commits(repository)[0] == result["revision"]
    assert json.loads(remote_file(repository, "manifest.json"))["counts"]["engrams"] == 2
    assert runtime.backup_status()["last_error"] is None


def test_a_slow_push_does_not_hold_the_write_lock(git_settings, remotes, runtimes):
    repository = bare_repository(remotes)
    hook = repository / "hooks" / "pre-receive"
    pushing = remotes.parent / "push-started"
    hook.write_text(f"#!/bin/sh\ntouch '{pushing}'\nsleep 2\n")
    hook.chmod(0o755)
    runtime = runtimes(git_settings)
    runtime.memory.store("Alice prefers PostgreSQL for Atlas.")

    syncing = threading.Thread(target=runtime.sync)
    syncing.start()
    # Once the remote's hook runs, the snapshot is committed and the push is waiting on the hook.
    deadline = time.monotonic() + 30
    while not pushing.exists():
        assert time.monotonic() < deadline, "the push never reached the remote"
        time.sleep(0.02)
    started = time.monotonic()
    runtime.memory.store("Bob prefers cursor pagination for the orders API.")
    took = time.monotonic() - started
    assert syncing.is_alive(), "the push should still be in progress"
    syncing.join()
    assert took < 1.0, f"a store waited {took:.2f}s for the backup push"
    assert json.loads(remote_file(repository, "manifest.json"))["counts"]["engrams"] == 1


def test_interrupted_sync_keeps_the_store_and_the_last_good_backup(
    git_settings, remotes, tmp_path, runtimes, monkeypatch
):
    repository = bare_repository(remotes)
    runtime = runtimes(git_settings)
    store = runtime.memory.context.store
    fill(runtime.memory, texts=[])
    runtime.memory.store("Alice prefers PostgreSQL for Atlas.")
    good = runtime.sync()

    # 1. The export dies half way: nothing is committed or pushed, nothing half-written remains.
    runtime.memory.store("Bob prefers cursor pagination for the orders API.")
    real_export = store.export_records
    export_dies_half_way(store, monkeypatch, after=5)
    with pytest.raises(BackupError, match="disk full"):
        runtime.sync()
    monkeypatch.setattr(store, "export_records", real_export)
    assert commits(repository) == [good["revision"]]
    assert leftovers(git_settings.storage_location / "alice") == []
    assert store.count_engrams() == 2

    # 2. The push fails after the local commit (remote gone): the remote keeps the good backup.
    moved = repository.with_name("moved-away.git")
    repository.rename(moved)
    with pytest.raises(BackupError, match="after 3 attempt"):
        runtime.sync()
    moved.rename(repository)
    assert commits(repository) == [good["revision"]]
    assert json.loads(remote_file(repository, "manifest.json"))["counts"]["engrams"] == 1
    other = runtimes(with_settings(git_settings, storage_location=tmp_path / "check"))
    assert other.restore()["counts"]["engrams"] == 1  # the last good backup is readable

    # 3. The next sync pushes what failed before: nothing written locally was lost.
    recovered = runtime.sync()
    assert recovered["pushed"] is True and recovered["counts"]["engrams"] == 2
    history = commits(repository)
    assert history[0] == recovered["revision"] and history[-1] == good["revision"]


def test_restore_refuses_a_non_empty_store_unless_forced(git_settings, remotes, tmp_path, runtimes):
    bare_repository(remotes)
    source = runtimes(git_settings)
    fill(source.memory)
    source.sync()
    backup_picture = picture(source.memory.context.store)

    target = runtimes(with_settings(git_settings, storage_location=tmp_path / "busy"))
    target.memory.store("A local memory that is not in the backup.")
    with pytest.raises(RestoreRefused, match=r"not empty .*--force"):
        target.restore()
    assert target.memory.context.store.count_engrams() == 1  # untouched

    forced = target.restore(force=True)
    assert forced["forced"] is True and forced["verified"] is True
    assert_same_memory(backup_picture, picture(target.memory.context.store))
    saved = Path(forced["previous_memory_saved_to"])
    assert "A local memory that is not in the backup." in saved.read_text()


def test_empty_store_never_overwrites_a_real_backup(git_settings, remotes, tmp_path, runtimes):
    repository = bare_repository(remotes)
    source = runtimes(git_settings)
    fill(source.memory)
    pushed = source.sync()

    fresh = runtimes(with_settings(git_settings, storage_location=tmp_path / "fresh"))
    with pytest.raises(BackupError, match="not pushing an empty memory"):
        fresh.sync()
    assert commits(repository) == [pushed["revision"]]


def test_restore_on_start_fills_an_empty_store(git_settings, remotes, tmp_path, runtimes):
    bare_repository(remotes)
    nothing_yet = runtimes(
        with_settings(git_settings, storage_location=tmp_path / "a", backup_restore_on_start=True)
    )
    assert nothing_yet.memory.context.store.count_engrams() == 0  # no backup yet: starts empty

    source = runtimes(git_settings)
    fill(source.memory)
    source.sync()
    started = runtimes(
        with_settings(git_settings, storage_location=tmp_path / "b", backup_restore_on_start=True)
    )
    assert started.memory.context.store.count_engrams() == 6
    assert (
        started.backup_status()["last_restore"]["revision"] == source.backup_status()["last_sync"]["revision"]
    )


def test_sync_with_backups_disabled_raises(settings, runtimes):
    runtime = runtimes(settings)
    with pytest.raises(BackupDisabled, match="BACKUP_TYPE=none"):
        runtime.sync()
    with pytest.raises(BackupDisabled):
        runtime.restore()


def test_cli_sync_and_restore_end_to_end(remotes, tmp_path):
    repository = bare_repository(remotes)
    runner = CliRunner()

    def env(location: str) -> dict[str, str]:
        return {
            "STORAGE_LOCATION": str(tmp_path / location),
            "ACCESSING_USER": "alice",
            "EMBEDDING_DIMS": "64",
            "LLM_PROVIDER": "heuristic",
            "EMBEDDING_PROVIDER": "hashing",
            "BACKUP_TYPE": "github",
            "GIT_BASE_URL": f"file://{remotes}",
            "COLUMNS": "200",
        }

    def run(*args: str, location: str = "laptop"):
        return runner.invoke(app_module().app, list(args), env=env(location))

    stored = run("store", "Alice prefers PostgreSQL with pgvector for Atlas.")
    assert stored.exit_code == 0, stored.output
    synced = run("sync")
    assert synced.exit_code == 0, synced.output
    assert len(commits(repository)) == 1 and commits(repository)[0][:12] in synced.stdout.replace("\n", "")

    restored = run("restore", location="desktop")
    assert restored.exit_code == 0, restored.output
    listed = run("list", "--json", location="desktop")
    assert "pgvector" in listed.stdout

    run("store", "Desktop-only memory about Kubernetes.", location="desktop")
    refused = run("restore", location="desktop")
    assert refused.exit_code == 2 and "not empty" in refused.stderr
    forced = run("restore", "--force", location="desktop")
    assert forced.exit_code == 0, forced.output
    assert "Kubernetes" not in run("list", "--json", location="desktop").stdout


def app_module():
    import smriti.cli.commands

    return smriti.cli.commands


def test_a_remote_recreated_empty_is_refilled_by_the_next_sync(git_settings, remotes, runtimes):
    import shutil

    repository = bare_repository(remotes)
    runtime = runtimes(git_settings)
    fill(runtime.memory)
    assert runtime.sync()["pushed"] is True

    shutil.rmtree(repository)
    bare_repository(remotes)  # the same URL, an empty repository

    again = runtime.sync()  # the memory is unchanged, but the remote lost it
    assert again["pushed"] is True, again
    assert json.loads(remote_file(repository, "manifest.json"))["counts"]["engrams"] == 6
    assert runtime.backup_status()["last_error"] is None
    assert runtime.sync()["reason"] == "unchanged"  # and from then on nothing more to do


def test_a_remote_that_never_answers_bounds_sync_and_shutdown(settings, runtimes):
    """A git remote that accepts the connection and says nothing: a sync gives up within its
    BACKUP_SYNC_TIMEOUT (once 183 s), and the sync at shutdown within BACKUP_SHUTDOWN_TIMEOUT."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_stay_silent() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    try:
        port = listener.getsockname()[1]
        silent = with_settings(
            settings,
            backup_type="github",
            git_base_url=f"http://127.0.0.1:{port}/never",
            backup_sync_timeout=3.0,
            backup_shutdown_timeout=2.0,
        )
        runtime = open_runtime(silent)
        fill(runtime.memory)

        started = time.monotonic()
        result = runtime.backup.sync()
        assert result.reason == "failed" and "time" in result.error, result
        # Bounded by BACKUP_SYNC_TIMEOUT (3 s) where the remote never answers: generous under load.
        assert time.monotonic() - started < 30

        started = time.monotonic()
        close_runtime(runtime)  # final sync, bounded, then the database closes
        assert time.monotonic() - started < 30  # BACKUP_SHUTDOWN_TIMEOUT is 2 s; never is the bug
        assert (
            runtime.memory.context.store.closed if hasattr(runtime.memory.context.store, "closed") else True
        )
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in accepted:
            connection.close()
        listener.close()
