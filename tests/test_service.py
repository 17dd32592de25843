"""``smriti service``: the unit and the launch agent it writes, checked by the platform's own
checker (``systemd-analyze verify``; the plist parsed with plistlib, as ``plutil -lint`` is
macOS only), and the exact command the unit starts, run as a real process that then serves a
real MCP client through a relay and never exits idle.
"""

from __future__ import annotations

import plistlib
import shlex
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import stdio_client

from smriti.server.shared.client import server_status
from tests.test_shared_server import Shared, listed, run, store

SERVICE_COMMAND = [sys.executable, "-m", "smriti.server", "--shared-daemon", "--service"]


@pytest.fixture
def one(tmp_path):
    made = Shared(tmp_path / "store", SHARED_IDLE_TIMEOUT="1", XDG_CONFIG_HOME=str(tmp_path / "config"))
    made.env["HOME"] = str(tmp_path / "home")
    yield made
    made.kill()


def unit_setting(unit: str, key: str) -> str:
    values = [line.partition("=")[2] for line in unit.splitlines() if line.startswith(f"{key}=")]
    assert len(values) == 1, unit
    return values[0]


def env_file_values(path: Path) -> dict[str, str]:
    """The env file as systemd reads it (every value is written double-quoted)."""
    values = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, quoted = line.partition("=")
            values[name] = shlex.split(quoted)[0]
    return values


def test_the_systemd_unit_verifies_and_its_exact_command_serves_a_client_without_idle_exit(one, tmp_path):
    installed = one.cli("service", "install", "--platform", "systemd")
    assert installed.returncode == 0, installed.stderr
    unit_path = tmp_path / "config" / "systemd" / "user" / "smriti.service"
    env_path = tmp_path / "config" / "smriti" / "service.env"
    unit = unit_path.read_text()
    assert stat.S_IMODE(env_path.stat().st_mode) == 0o600  # it may hold a key
    assert unit_setting(unit, "EnvironmentFile") == f"-{env_path}"
    assert unit_setting(unit, "StandardError") == f"append:{one.paths.log}"
    assert "systemctl --user" in installed.stderr  # what to run to start it

    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze (Debian's systemd) is needed: .ci/run installs it"
    verified = subprocess.run(
        [analyze, "verify", "--man=no", str(unit_path)], capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stderr
    assert "smriti.service" not in verified.stderr, verified.stderr  # no warning about the unit

    command = shlex.split(unit_setting(unit, "ExecStart"))
    assert command == SERVICE_COMMAND
    settings = env_file_values(env_path)
    assert settings["STORAGE_LOCATION"] == str(one.location) and settings["SHARED_IDLE_TIMEOUT"] == "1"
    assert "SMRITI_SHARED" not in settings
    # As the manager runs it: the unit's command, in its working directory, with its settings
    # and the manager's own bare environment.
    bare = {key: one.env[key] for key in ("HOME", "PATH", "LANG", "PYTHONPATH") if key in one.env}
    log = one.paths.log.open("ab")
    server = subprocess.Popen(
        command, cwd=unit_setting(unit, "WorkingDirectory"), env={**bare, **settings}, stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 90
        while (status := server_status(one.paths)) is None:
            assert server.poll() is None and time.monotonic() < deadline, one.log()
            time.sleep(0.1)
        assert status["pid"] == server.pid and status["service"] is True and status["idle_timeout_s"] is None

        async def main() -> None:
            async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
                await store(session, "Dana runs the nightly backups on the NAS.")
                assert len(await listed(session)) == 1

        run(main, 120)
        # Unmanaged, it would exit after 1 s idle (test_shared_server); run by the service, never.
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < 4:
            assert server.poll() is None, one.log()
            time.sleep(0.2)
        assert one.status()["pid"] == server.pid and one.status()["sessions"] == 0
        assert "idle for" not in one.log()
        shown = one.cli("service", "status", "--platform", "systemd", "--json")
        assert shown.returncode == 0 and f"pid {server.pid}, the service's" in shown.stdout, shown.stdout
        stopped = one.cli("stop")  # before an import, say: the manager does not restart a clean exit
        assert stopped.returncode == 0, stopped.stderr
        assert "stays stopped until: systemctl --user restart smriti.service" in stopped.stderr
        assert server.wait(30) == 0
    finally:
        server.terminate()
        server.wait(30)
        log.close()
    assert server.returncode == 0, one.log()


def test_the_launchd_agent_is_a_valid_plist_with_the_service_command(one, tmp_path):
    installed = one.cli("service", "install", "--platform", "launchd")
    assert installed.returncode == 0, installed.stderr
    path = tmp_path / "home" / "Library" / "LaunchAgents" / "smriti.server.plist"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    agent = plistlib.loads(path.read_bytes())
    assert agent["Label"] == "smriti.server"
    assert agent["ProgramArguments"] == SERVICE_COMMAND
    assert agent["EnvironmentVariables"]["STORAGE_LOCATION"] == str(one.location)
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["StandardErrorPath"] == str(one.paths.log)
    assert agent["WorkingDirectory"] == str(one.paths.folder)
    assert "launchctl bootstrap" in installed.stderr
    removed = one.cli("service", "uninstall", "--platform", "launchd")
    assert removed.returncode == 0 and not path.exists(), removed.stderr


def test_install_without_a_user_service_manager_says_what_to_run(one, tmp_path):
    """Here (a container) there is no systemd user instance; where there is one, the test hides
    systemctl instead: either way the files are written, nothing is started, and the message
    names the manager's commands and the command to run by hand."""
    probe = (
        subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True, check=False)
        if shutil.which("systemctl")
        else None
    )
    env = one.env
    if probe is not None and probe.returncode == 0:
        env = {**one.env, "PATH": str(Path(sys.executable).parent)}
    done = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "service", "install"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    message = " ".join(done.stderr.split())
    assert "written but not started" in message
    assert "systemctl --user enable --now smriti.service" in message
    assert shlex.join(SERVICE_COMMAND) in message
    assert (tmp_path / "config" / "systemd" / "user" / "smriti.service").exists()
    assert server_status(one.paths) is None
    shown = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "service", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0 and '"server": "none running"' in shown.stdout, shown.stdout
    removed = subprocess.run(
        [sys.executable, "-m", "smriti.cli", "service", "uninstall"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert removed.returncode == 0, removed.stderr
    assert not (tmp_path / "config" / "systemd" / "user" / "smriti.service").exists()
    assert not (tmp_path / "config" / "smriti" / "service.env").exists()


def test_a_service_server_waits_for_a_client_started_one_and_takes_over(tmp_path):
    """A server a client started holds the memory: the service's waits (no failure, no restart
    loop), and serves once that one has stopped."""
    one = Shared(tmp_path / "store")  # the default test idle timeout (60 s): it outlives its client
    try:
        waits_and_takes_over(one)
    finally:
        one.kill()


def waits_and_takes_over(one: Shared) -> None:

    async def main() -> None:
        async with Client(stdio_client(one.params(), errlog=sys.stderr)) as session:
            await store(session, "Eve moved the wiki to the new host.")

    run(main, 120)
    first = one.status()
    assert first["service"] is False
    log = one.paths.log.open("ab")
    server = subprocess.Popen(SERVICE_COMMAND, env=one.env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 90
        while "the service takes over when it exits" not in one.log():
            assert server.poll() is None and time.monotonic() < deadline, one.log()
            time.sleep(0.1)
        assert one.cli("stop").returncode == 0
        while (status := server_status(one.paths)) is None or status["pid"] != server.pid:
            assert server.poll() is None and time.monotonic() < deadline + 60, one.log()
            time.sleep(0.1)
        assert status["service"] is True
    finally:
        server.terminate()
        server.wait(30)
        log.close()
