"""A memory folder this process cannot write: one line on stderr and an answer to ``initialize``.

Docker creates a missing volume folder as root's, which the image's user cannot write; a home
folder copied with the wrong owner does the same outside a container. A real ``smriti-mcp`` is
started on such a folder, in-process (``SMRITI_SHARED=false``, the container's way) and as the
usual relay to a shared server, and spoken to in raw JSON-RPC lines as a client would.

The folder is read-only (0555). Root writes one anyway, so a test run as root starts the
server without the capability that lets it (setpriv drops CAP_DAC_OVERRIDE from the bounding
set): it is then refused like any other user.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from smriti.errors import FolderNotWritable, make_folder
from tests.envs import offline_env
from tests.raw_stdio import INITIALIZE, rpc, smriti_mcp


def _as_a_user_who_cannot_write() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("running as root, this test needs setpriv (util-linux) to drop CAP_DAC_OVERRIDE")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", "--"]


@pytest.fixture
def read_only_memory(tmp_path):
    folder = tmp_path / "memory"
    folder.mkdir()
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)


def _start(env: dict[str, str], lines: bytes) -> subprocess.CompletedProcess[bytes]:
    command = [*_as_a_user_who_cannot_write(), *smriti_mcp()]
    return subprocess.run(
        command, input=lines, capture_output=True, env={**os.environ, **env}, timeout=120, check=False
    )


@pytest.mark.parametrize("shared", ["false", "true"], ids=["in-process", "relay"])
def test_an_unwritable_memory_folder_is_one_line_and_initialize_is_answered(read_only_memory, shared):
    env = offline_env(read_only_memory, SMRITI_SHARED=shared)
    done = _start(env, rpc(1, "initialize", INITIALIZE) + rpc(2, "tools/list"))
    stderr = done.stderr.decode()
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [1, 2], (replies, stderr)
    for reply in replies:
        message = reply["error"]["message"]
        assert "cannot write the memory folder" in message and str(read_only_memory) in message, reply
    assert "Traceback" not in stderr, stderr
    said = [line for line in stderr.splitlines() if "cannot write the memory folder" in line]
    assert said and all("uid" in line and "STORAGE_LOCATION" in line for line in said), stderr
    if shared == "false":  # the relay's exit is the client's close, whatever the server did
        assert done.returncode == 1, stderr
    assert list(read_only_memory.iterdir()) == []  # nothing was written


def test_the_http_server_refuses_in_one_line_too(read_only_memory):
    env = offline_env(read_only_memory)
    command = [*_as_a_user_who_cannot_write(), *smriti_mcp(), "--transport", "streamable-http", "--no-auth"]
    command += ["--port", "0"]
    done = subprocess.run(command, capture_output=True, env={**os.environ, **env}, timeout=120, check=False)
    stderr = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in stderr, stderr
    assert "smriti-mcp: cannot write the memory folder" in stderr


def test_make_folder_creates_a_writable_folder_and_names_a_file_in_the_way(tmp_path):
    assert make_folder(tmp_path / "a" / "b").is_dir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(FolderNotWritable, match="is a file"):
        make_folder(tmp_path / "file")
