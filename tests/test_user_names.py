"""User names become folder names: what is accepted, what is refused, and where files land."""

from __future__ import annotations

from pathlib import Path

import pytest

from smriti.stores.base import UnsafeUserError, validate_user_name
from smriti.stores.paths import store_path

REFUSED = [
    "",
    "   ",
    "/abs",
    "a/b",
    "..",
    "../x",
    "a\\b",
    "~root",
    "x" * 65,
    "with space",
    "quote'",
    ".hidden",
    "-dash",
    "tab\there",
    "nul\x00",
    "émile",
    "alice\n",  # "$" matched before a final newline: a folder named "alice\n"
    "alice\r\n",
]
ACCEPTED = ["alice", "Bob-2", "a.b_c", "x" * 64, "0"]


@pytest.mark.parametrize("name", REFUSED)
def test_refused(name: str) -> None:
    with pytest.raises(UnsafeUserError):
        validate_user_name(name)


@pytest.mark.parametrize("name", ACCEPTED)
def test_accepted(name: str) -> None:
    assert validate_user_name(name) == name


@pytest.mark.parametrize("name", ACCEPTED)
def test_store_path_is_a_file_in_the_users_own_folder(tmp_path: Path, name: str) -> None:
    path = store_path(tmp_path / "root", name, "memory.kuzu")
    assert path == (tmp_path / "root").resolve() / name / "memory.kuzu"
    assert path.parent.is_dir() and not path.exists()  # the folder is made, the database is not


@pytest.mark.parametrize("name", REFUSED)
def test_store_path_refuses_before_creating_anything(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnsafeUserError):
        store_path(tmp_path / "root", name, "memory.kuzu")
    assert not (tmp_path / "root").exists()


@pytest.mark.parametrize("padded", [" bob", "bob ", "bob\n", "\tbob"])
def test_padded_accessing_user_is_a_settings_error_not_another_users_memory(padded, tmp_path) -> None:
    from smriti.config import load_settings
    from smriti.errors import SettingsError

    with pytest.raises(SettingsError, match="ACCESSING_USER"):
        load_settings(accessing_user=padded, storage_location=tmp_path)
