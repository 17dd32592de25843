"""Where a user's store lives, the same for every embedded backend.

``STORAGE_LOCATION/{user}/{file}``: ``memory.sqlite`` (SQLite), ``memory.kuzu`` (Kuzu) or
``memory.lbug`` (LadybugDB, the Go original's files). Kept apart from the backends so opening
one never imports another's modules.
"""

from __future__ import annotations

from pathlib import Path

from smriti.errors import UnsafeUserError
from smriti.stores.base import validate_user_name

SQLITE_FILE = "memory.sqlite"
KUZU_FILE = "memory.kuzu"
LADYBUG_FILE = "memory.lbug"


def user_folder(storage_location: Path | str, user: str) -> Path:
    """The folder of ``user``'s files (not checked or created: see :func:`store_path`)."""
    return Path(storage_location).expanduser() / user


def store_path(storage_location: Path | str, user: str, file_name: str) -> Path:
    """The store file of ``user``, after checking it cannot leave ``storage_location``.

    Creates the user folder (only after the checks).

    Raises:
        UnsafeUserError: the name is refused, or the user folder resolves elsewhere (a symlink).
    """
    validate_user_name(user)
    root = Path(storage_location).expanduser().resolve()
    path = (root / user / file_name).resolve()
    if not path.is_relative_to(root) or path.parent.name != user or path.parent.parent != root:
        raise UnsafeUserError(f"the store of user {user!r} would resolve outside {root}: {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
