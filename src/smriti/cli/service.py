"""``smriti service install | uninstall | status``: the shared server as a user service.

``install`` writes the unit (or launch agent) and its settings for this interpreter
(:mod:`smriti.server.shared.service`), then has the user's service manager enable and start it;
where there is no manager to ask (no user systemd in a container, say), it says so and prints
what to run instead. ``status`` shows the files, the manager's state and the server that serves.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Annotated, Any

import typer

from smriti.cli.render import error_line, mapping_table, notice, out, print_json
from smriti.config import load_settings, setting_env_names
from smriti.errors import SmritiError
from smriti.server.shared.client import prepare_folders, server_status, shared_paths
from smriti.server.shared.service import (
    ServiceFiles,
    env_file_text,
    launchd_plist,
    manager_commands,
    manager_missing,
    service_command,
    service_environment,
    service_files,
    systemd_unit,
    write_private,
)

service_app = typer.Typer(
    help="Keep the shared server running as a user service (systemd or launchd): every client starts warm.",
    no_args_is_help=True,
)
Platform = Annotated[
    str | None,
    typer.Option(
        "--platform", help="systemd or launchd (default: this machine's); files only, for another machine."
    ),
]


def _files(platform: str | None) -> ServiceFiles:
    try:
        return service_files(platform)
    except SmritiError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None


def _run(commands: list[list[str]]) -> str | None:
    """Run the manager's commands in order; the failing one's message, or None."""
    for command in commands:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            return f"`{shlex.join(command)}` failed: {(done.stderr or done.stdout).strip()}"
    return None


def _by_hand(files: ServiceFiles, action: str) -> str:
    return "; ".join(shlex.join(command) for command in manager_commands(files)[action])


def restart_command() -> str:
    """What starts the service's server again after ``smriti stop`` (a clean exit is not
    restarted: the commands that need the database itself run in between)."""
    try:
        return _by_hand(service_files(), "restart")
    except SmritiError:
        return "smriti-mcp --shared-daemon --service"


@service_app.command("install")
def install(
    platform: Platform = None,
    no_start: Annotated[bool, typer.Option("--no-start", help="Write the files only.")] = False,
) -> None:
    """Write the service for this Python and these settings, then enable and start it."""
    files = _files(platform)
    try:
        settings = load_settings()
        paths = shared_paths(settings)
        prepare_folders(paths)  # the unit appends to the log there
        values = service_environment(setting_env_names())
    except SmritiError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None
    command = service_command()
    if files.platform == "systemd":
        assert files.env_file is not None
        write_private(files.env_file, env_file_text(values).encode())
        write_private(files.definition, systemd_unit(command, files.env_file, paths).encode())
        notice(f"wrote {files.definition} and its settings, {files.env_file} ({len(values)} set)")
    else:
        write_private(files.definition, launchd_plist(command, values, paths))
        notice(f"wrote {files.definition} ({len(values)} settings)")
    if no_start or platform is not None:
        notice(f"to start it: {_by_hand(files, 'install')}")
        return
    missing = manager_missing(files)
    if missing is not None:
        error_line(
            f"{missing}: the service is written but not started. Where the manager runs: "
            f"{_by_hand(files, 'install')}. Here, run the server yourself (at login, say): "
            f"{shlex.join(command)}"
        )
        raise typer.Exit(1)
    failed = _run(manager_commands(files)["install"]) or _run(manager_commands(files)["restart"])
    if failed is not None:
        error_line(failed)
        raise typer.Exit(1)
    running = server_status(paths)
    if running is not None and not running.get("service"):
        notice(
            f"a shared server a client started (pid {running.get('pid')}) serves now; the service "
            "takes over when it exits idle (`smriti stop` hands over at once)"
        )
    notice(f"started: {_by_hand(files, 'state')} shows it; the server logs to {paths.log}")


@service_app.command("uninstall")
def uninstall(platform: Platform = None) -> None:
    """Stop and disable the service, and remove its files."""
    files = _files(platform)
    missing = manager_missing(files) if platform is None else "files only"
    if missing is None:
        failed = _run(manager_commands(files)["uninstall"][:1])
        if failed is not None:
            notice(failed)
    removed = [path for path in (files.definition, files.env_file) if path is not None and path.exists()]
    for path in removed:
        path.unlink()
    if missing is None:
        _run(manager_commands(files)["uninstall"][1:])
    notice("removed " + ", ".join(map(str, removed)) if removed else "no service was installed")


@service_app.command("status")
def status(
    platform: Platform = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The service's files, the manager's state and the shared server; exit 1 when not installed."""
    files = _files(platform)
    try:
        paths = shared_paths(load_settings())
    except SmritiError as error:
        error_line(str(error))
        raise typer.Exit(error.exit_code) from None
    report: dict[str, Any] = {
        "installed": files.definition.exists(),
        "definition": str(files.definition),
        "command": shlex.join(service_command()),
    }
    missing = manager_missing(files)
    if missing is not None:
        report["manager"] = missing
    else:
        for command in manager_commands(files)["state"]:
            done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
            answer = (done.stdout or done.stderr).strip().splitlines()
            report[" ".join(command[-2:])] = answer[0] if answer else f"exit {done.returncode}"
    running = server_status(paths)
    report["server"] = (
        "none running"
        if running is None
        else f"pid {running.get('pid')}, "
        + ("the service's" if running.get("service") else "started by a client")
    )
    if as_json:
        print_json(report)
    else:
        out().print(mapping_table("smriti service", report))
    if not report["installed"]:
        raise typer.Exit(1)
