"""The migration runner every embedded backend uses (stores/migrations.py), on its own."""

from __future__ import annotations

import json

import pytest

from smriti.errors import StoreError
from smriti.stores.migrations import Migration, parse_applied, run_migrations


def _recorder():
    meta: dict[str, str] = {}
    return meta, lambda key, value: meta.__setitem__(key, value)


def test_only_what_is_not_recorded_runs_in_order_and_is_recorded():
    ran: list[str] = []
    steps = [Migration(n, lambda n=n: ran.append(n) or [f"did {n}"]) for n in ("0001_a", "0002_b", "0003_c")]
    meta, record = _recorder()
    changes = run_migrations(steps, ["0001_a"], record, "file")
    assert ran == ["0002_b", "0003_c"] and changes == ["0002_b: did 0002_b", "0003_c: did 0003_c"]
    assert json.loads(meta["migrations"]) == ["0001_a", "0002_b", "0003_c"] and meta["schema_version"] == "3"
    meta2, record2 = _recorder()
    assert run_migrations(steps, parse_applied(meta["migrations"]), record2, "file") == [] and not meta2


def test_a_repeatable_step_runs_every_time_and_is_recorded_once():
    ran: list[str] = []
    steps = [Migration("0001_columns", lambda: ran.append("x") or [], repeatable=True)]
    meta, record = _recorder()
    run_migrations(steps, ["0001_columns"], record, "file")
    assert ran == ["x"] and not meta  # nothing new to record


def test_a_file_from_a_newer_version_is_refused_and_a_bad_record_named():
    steps = [Migration("0001_a", lambda: [])]
    with pytest.raises(StoreError, match="newer Smriti"):
        run_migrations(steps, ["0001_a", "0002_future"], lambda *_: None, "memory.sqlite")
    with pytest.raises(StoreError, match="not a JSON list"):
        parse_applied("{oops")
    assert parse_applied(None) == [] and parse_applied('["0001_a"]') == ["0001_a"]
