"""Named schema migrations, recorded in the store, run the same way on every embedded backend.

A backend lists its migrations in order (``Migration(name, apply)``); :func:`run_migrations`
applies those its file has not recorded, then records the names under the ``migrations``
metadata key (and ``schema_version``, their count). Each ``apply`` is idempotent and returns what
it changed, for the log: a file made before migrations were recorded runs them all once, and
each finds what is already there. A file that names a migration this code does not know was
written by a newer Smriti and is refused, rather than half understood. The model is
sqlite-utils' ``Migrations`` and LangGraph's ``MIGRATIONS`` list: the list is the schema's
history, the record says how far a file has come.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from smriti.errors import StoreError

MIGRATIONS_KEY = "migrations"


@dataclass(frozen=True)
class Migration:
    """One named, idempotent change; ``apply()`` returns what it changed (empty: nothing to do).

    ``repeatable`` runs at every open though recorded (Flyway's repeatable migrations): for a
    step derived from the code, such as Kuzu's columns taken from the dataclasses, which a field
    added later must reach in files that recorded the step already.
    """

    name: str
    apply: Callable[[], list[str]]
    repeatable: bool = False


def parse_applied(value: str | None) -> list[str]:
    """The recorded names (none recorded: an empty list)."""
    if not value:
        return []
    try:
        names = json.loads(value)
    except ValueError:
        raise StoreError(f"the store's {MIGRATIONS_KEY} record is not a JSON list: {value[:80]!r}") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise StoreError(f"the store's {MIGRATIONS_KEY} record is not a list of names: {value[:80]!r}")
    return names


def run_migrations(
    migrations: Sequence[Migration],
    applied: Sequence[str],
    record: Callable[[str, str], None],
    where: str,
) -> list[str]:
    """Apply the migrations not in ``applied``, in order; record them with ``record(key, value)``.

    Returns each change as ``"name: what"`` for the log.

    Raises:
        StoreError: ``applied`` names a migration this code does not have (a newer Smriti's file).
    """
    known = [m.name for m in migrations]
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise StoreError(
            f"{where} was migrated by a newer Smriti ({', '.join(unknown)}): upgrade smriti-graph to open it"
        )
    done = list(applied)
    changes: list[str] = []
    for migration in migrations:
        if migration.name in done and not migration.repeatable:
            continue
        changes += [f"{migration.name}: {change}" for change in migration.apply()]
        if migration.name not in done:
            done.append(migration.name)
    if done != list(applied):
        record(MIGRATIONS_KEY, json.dumps(done))
        record("schema_version", str(len(done)))
    return changes
