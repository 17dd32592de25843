"""The distribution builds as ``smriti-graph`` and a wheel of it runs the server from a fresh venv.

The fresh venv borrows the project's installed dependencies through a path file (this machine
has no internet to fetch them again) but not its editable install: ``smriti`` is imported from
the wheel, as ``uvx --from <wheel> smriti-mcp`` or pipx would run it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from tests.envs import offline_env
from tests.test_server_stdio import INITIALIZE

ROOT = Path(__file__).resolve().parent.parent


def pip(*args: str) -> None:
    """This interpreter's pip (the project's venv), failing the test on an error."""
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT))
    [built] = list(out.glob("*.whl"))
    return built


def test_the_wheel_is_smriti_graph_under_agpl(wheel):
    assert wheel.name.startswith("smriti_graph-")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [metadata] = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        scripts = archive.read(entry_points).decode()
    assert "Name: smriti-graph" in text
    assert "License-Expression: AGPL-3.0-or-later" in text
    assert any(n.endswith("licenses/LICENSE") for n in names)
    assert "smriti-mcp = smriti.server:main" in scripts and "smriti = smriti.cli:main" in scripts
    assert "smriti/stores/sqlite/store.py" in names
    assert not any(n.startswith(("nodes/", "stores/", "tests/", "bench/")) for n in names)


def test_a_fresh_venv_runs_the_server_from_the_wheel(wheel, tmp_path):
    fresh = tmp_path / "fresh"
    venv.EnvBuilder(with_pip=False).create(fresh)
    site = Path(
        subprocess.run(
            [fresh / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # The project's dependencies, but not its editable finder (a plain path: no .pth processing).
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # --ignore-installed: otherwise pip first removes the project's editable install (same name)
    pip("install", "--no-deps", "--ignore-installed", "-q", "--prefix", str(fresh), str(wheel))
    where = subprocess.run(
        [fresh / "bin" / "python", "-c", "import smriti; print(smriti.__file__)"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert where.startswith(str(fresh)), where  # the wheel's copy, not the repository's
    env = {**os.environ, **offline_env(tmp_path / "store")}
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE}
    reply = subprocess.run(
        [fresh / "bin" / "smriti-mcp"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert reply.stdout, reply.stderr[-3000:]
    answer = json.loads(reply.stdout.splitlines()[0])
    assert answer["result"]["serverInfo"]["name"] == "smriti", reply.stderr[-2000:]
