"""Run the store conformance and isolation suites on LadybugDB, in a child pytest process.

LadybugDB is the maintained fork of Kuzu; both ship native modules that clash in one
process, so the main test process uses Kuzu and this test starts a child that uses only
the fork. Its outcome (counts of passed and failed tests) is asserted here, so a failure
on LadybugDB fails the main run.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("SMRITI_TEST_LADYBUG") == "1", reason="already inside the child run")
@pytest.mark.skipif(importlib.util.find_spec("ladybug") is None, reason="pip install 'smriti-graph[ladybug]'")
def test_store_suites_pass_on_the_kuzu_fork_in_a_child_process(tmp_path):
    env = {**os.environ, "SMRITI_TEST_LADYBUG": "1"}
    command = [
        sys.executable, "-m", "pytest", "tests/stores", "-k", "ladybug", "-q", "-p", "no:cacheprovider",
        "--basetemp", str(tmp_path / "child"),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 40, summary  # the whole conformance + isolation suite, not a handful
    assert "failed" not in summary and "error" not in summary, summary
