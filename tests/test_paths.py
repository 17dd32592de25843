"""Path settings are made absolute where they are read, so the relay, the shared server it
starts (in the user folder) and the CLI open the same store."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.config import Settings, env_names
from smriti.server.shared.client import PATH_SETTINGS, path_environment
from tests.test_shared_server import Shared, listed, run, script, store


def test_relative_path_settings_become_absolute_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings(storage_location="data/../store", smriti_tokens_file="keys/tokens.json")
    assert settings.storage_location == tmp_path / "store"
    assert settings.tokens_file == tmp_path / "keys" / "tokens.json"
    assert settings.user_dir.is_absolute()
    assert Settings(storage_location="~/x").storage_location == Path.home() / "x"


def test_a_started_process_gets_the_absolute_paths_whatever_the_case_of_the_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = Settings(storage_location="store", smriti_tokens_file="keys/../tokens.json")
    environ = {"storage_location": "store", "Smriti_Tokens_File": "keys/../tokens.json", "PATH": "/bin"}
    child = path_environment(environ, settings.storage_location)
    assert child == {
        "PATH": "/bin",
        "STORAGE_LOCATION": str(tmp_path / "store"),
        "SMRITI_TOKENS_FILE": str(settings.tokens_file),
    }
    assert path_environment({"PATH": "/bin"}, settings.storage_location) == {
        "PATH": "/bin",
        "STORAGE_LOCATION": str(tmp_path / "store"),
    }


def test_the_relay_knows_every_path_setting():
    """The relay reads no settings: its list of path settings must be every Path field's."""
    fields = Settings.model_fields
    paths = {env_names(name)[0] for name, info in fields.items() if "Path" in str(info.annotation)}
    assert set(PATH_SETTINGS) == paths


def test_a_relative_storage_location_through_the_relay_serves_one_store(tmp_path):
    """Default shared mode, STORAGE_LOCATION=store relative to the client's folder: the call is
    answered at once (it used to fail after ~3 min: the shared server, started in the user
    folder, read the relative path again and waited on a nested socket), the store is where the
    client's folder says, and the CLI from that folder sees the memory."""
    client_dir = tmp_path / "project"
    client_dir.mkdir()
    shared = Shared(client_dir / "store")  # its paths (absolute) are what the test checks and kills
    env = {**shared.env, "STORAGE_LOCATION": "store"}
    command = script("smriti-mcp")
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=client_dir)
    found: dict[str, set[str]] = {}

    async def main() -> None:
        with (tmp_path / "relay.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as session:
                found["id"] = {await store(session, "Ravi keeps his notes in a relative folder.")}
                found["listed"] = await listed(session)

    try:
        run(main, 60)
        assert found["listed"] == found["id"]
        assert (client_dir / "store" / "alice" / "memory.sqlite").exists()
        assert not (client_dir / "store" / "alice" / "store").exists()  # no nested store
        assert shared.status()["pid"] > 0
        done = subprocess.run(
            [*script("smriti"), "list", "--json"],
            env=env,
            cwd=client_dir,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert {item["id"] for item in json.loads(done.stdout)["results"]} == found["id"]
    finally:
        shared.kill()
