"""The shared server under the user's service manager: always warm (``smriti service``).

A client that finds the user's shared server running gets its first recall in a fraction of a
second; one that has to start it waits for Python to import the server and open the memory.
So the server can run as a user service, started at login and restarted if it fails: a
systemd user unit on Linux (``~/.config/systemd/user/smriti.service``), a launchd agent on
macOS (``~/Library/LaunchAgents/smriti.server.plist``). Both run :func:`service_command`: this
interpreter (the virtual environment ``smriti`` runs from) with ``-m smriti.server
--shared-daemon --service``, which never exits when idle (:mod:`smriti.server.shared.daemon`).

The service gets the settings of the shell that installed it: every Smriti setting set in the
environment (path settings made absolute), in a private env file
(``~/.config/smriti/service.env``, mode 0600, read by the unit's ``EnvironmentFile=``) or in the
plist's ``EnvironmentVariables``. Clients that set the same (or, by default, nothing) attach to
it and share its memory; ``smriti service install`` again after changing a setting.

This module writes the files and builds the manager's commands; :mod:`smriti.cli.service`
runs them and reports.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from smriti.errors import InvalidInput
from smriti.server.shared.client import PATH_SETTINGS, SharedPaths, absolute_path

UNIT_NAME = "smriti.service"
LAUNCHD_LABEL = "smriti.server"


def service_command() -> list[str]:
    """What the service runs: this interpreter, so the virtual environment ``smriti`` runs from."""
    return [sys.executable, "-m", "smriti.server", "--shared-daemon", "--service"]


def config_home(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME``, else ``~/.config`` (where systemd looks for user units too)."""
    env = os.environ if environ is None else environ
    return Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def service_environment(names: list[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Smriti settings set in ``environ``, by their upper-case names, path settings absolute.

    ``names``: the settings' environment names (:func:`smriti.config.setting_env_names`); the
    two that only say how a client attaches (``LOG_LEVEL``, ``SMRITI_SHARED``) are kept too,
    except ``SMRITI_SHARED``: the service is the shared server.

    Raises:
        InvalidInput: a value holds a line break (no env file can carry it).
    """
    env = os.environ if environ is None else environ
    wanted = set(names) | {"log_level"}
    values: dict[str, str] = {}
    for key, value in env.items():
        if key.lower() not in wanted:
            continue
        if "\n" in value or "\r" in value:
            raise InvalidInput(f"{key} holds a line break: a service's environment cannot carry it")
        name = key.upper()
        values[name] = absolute_path(value) if name in PATH_SETTINGS else value
    return dict(sorted(values.items()))


@dataclass(frozen=True)
class ServiceFiles:
    """What ``smriti service install`` writes for one platform."""

    platform: str  # "systemd" or "launchd"
    definition: Path  # the unit or the plist
    env_file: Path | None  # systemd's EnvironmentFile (launchd keeps the values in the plist)


def service_files(platform: str | None = None, environ: Mapping[str, str] | None = None) -> ServiceFiles:
    """Where the service's files go on ``platform`` (default: this machine's).

    Raises:
        InvalidInput: no user service manager Smriti knows of on this platform.
    """
    platform = platform or (
        "launchd"
        if sys.platform == "darwin"
        else "systemd"
        if sys.platform.startswith("linux")
        else sys.platform
    )
    if platform == "systemd":
        home = config_home(environ)
        return ServiceFiles("systemd", home / "systemd" / "user" / UNIT_NAME, home / "smriti" / "service.env")
    if platform == "launchd":
        agents = Path.home() / "Library" / "LaunchAgents"
        return ServiceFiles("launchd", agents / f"{LAUNCHD_LABEL}.plist", None)
    raise InvalidInput(
        f"`smriti service` knows systemd (Linux) and launchd (macOS), not {platform}: run "
        "`smriti-mcp --shared-daemon --service` at login with your system's own means"
    )


# ----------------------------------------------------------------------------- systemd
def _unit_word(word: str) -> str:
    """One ``ExecStart=`` word, quoted for systemd: ``%`` is a specifier and ``$`` a variable
    there, and a word with spaces needs quotes."""
    word = word.replace("%", "%%").replace("$", "$$")
    if any(char in word for char in " \t\"'\\"):
        return '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return word


def _unit_path(path: Path) -> str:
    """A path in a unit setting that takes one (``%`` escaped; systemd takes spaces as they are)."""
    return str(path).replace("%", "%%")


def systemd_unit(command: list[str], env_file: Path, paths: SharedPaths) -> str:
    """The user unit: the shared server, its settings from ``env_file``, its stderr in its log."""
    return "\n".join(
        [
            "# Written by `smriti service install`; `smriti service uninstall` removes it.",
            "[Unit]",
            "Description=Smriti shared memory server (every MCP client of this user attaches to it)",
            "",
            "[Service]",
            "Type=simple",
            "ExecStart=" + " ".join(_unit_word(word) for word in command),
            f"EnvironmentFile=-{_unit_path(env_file)}",
            f"WorkingDirectory={_unit_path(paths.folder)}",
            # Where a client-started server logs: `smriti status` and the relays read it there.
            f"StandardOutput=append:{_unit_path(paths.log)}",
            f"StandardError=append:{_unit_path(paths.log)}",
            "Restart=on-failure",
            "RestartSec=5",
            "",
            "[Install]",
            "WantedBy=default.target",
            "",
        ]
    )


def _env_value(value: str) -> str:
    """A value for a systemd EnvironmentFile line: double-quoted, ``\\`` and ``"`` escaped
    (systemd expands no variables there)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def env_file_text(values: Mapping[str, str]) -> str:
    lines = ["# The settings of the shell that ran `smriti service install` (run it again to change them)."]
    lines += [f"{name}={_env_value(value)}" for name, value in values.items()]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- launchd
def launchd_plist(command: list[str], values: Mapping[str, str], paths: SharedPaths) -> bytes:
    """The launch agent: started at login, started again when it exits other than cleanly."""
    agent = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": command,
        "EnvironmentVariables": dict(values),
        "WorkingDirectory": str(paths.folder),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": str(paths.log),
        "StandardErrorPath": str(paths.log),
        "ProcessType": "Background",
    }
    return plistlib.dumps(agent, fmt=plistlib.FMT_XML, sort_keys=True)


# ----------------------------------------------------------------------------- the manager
def write_private(path: Path, data: bytes) -> None:
    """``data`` in ``path`` (mode 0600: it may hold a key), created with its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.replace(temporary, path)


def manager_commands(files: ServiceFiles) -> dict[str, list[list[str]]]:
    """The manager's commands for ``install``, ``uninstall``, ``state`` (what a person would type)."""
    if files.platform == "systemd":
        unit = UNIT_NAME
        return {
            "install": [
                ["systemctl", "--user", "daemon-reload"],
                ["systemctl", "--user", "enable", "--now", unit],
            ],
            "restart": [["systemctl", "--user", "restart", unit]],
            "uninstall": [
                ["systemctl", "--user", "disable", "--now", unit],
                ["systemctl", "--user", "daemon-reload"],
            ],
            "state": [
                ["systemctl", "--user", "is-active", unit],
                ["systemctl", "--user", "is-enabled", unit],
            ],
        }
    domain = f"gui/{os.getuid()}"
    return {
        "install": [["launchctl", "bootstrap", domain, str(files.definition)]],
        "restart": [["launchctl", "kickstart", "-k", f"{domain}/{LAUNCHD_LABEL}"]],
        "uninstall": [["launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"]],
        "state": [["launchctl", "print", f"{domain}/{LAUNCHD_LABEL}"]],
    }


def manager_missing(files: ServiceFiles) -> str | None:
    """Why the user's service manager cannot be asked here, or None when it can.

    systemd: ``systemctl`` absent, or no user instance to talk to (a container, a session
    without ``loginctl enable-linger`` over ssh): ``systemctl --user`` says which.
    """
    import subprocess

    tool = "systemctl" if files.platform == "systemd" else "launchctl"
    if shutil.which(tool) is None:
        return f"{tool} is not installed"
    if files.platform != "systemd":
        return None
    probe = subprocess.run(
        ["systemctl", "--user", "show-environment"], capture_output=True, text=True, timeout=30, check=False
    )
    if probe.returncode == 0:
        return None
    reason = (probe.stderr.strip().splitlines() or ["no answer"])[-1]
    return f"no systemd user instance here (systemctl --user: {reason})"
