"""The one connection of an embedded store: queries, transactions, timing and the lock.

Every query of :class:`~smriti.stores.kuzu.KuzuStore` and its collaborators goes through
:meth:`Connection.run`, under one re-entrant lock: a Kuzu ``Connection`` is not safe for
concurrent use, and the in-memory caches beside the file must change together with it.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from smriti.stores.base import StoreError
from smriti.stores.space import full_disk

# How Kuzu words a write that found the disk full (its IO exceptions carry strerror's text).
_NO_SPACE = re.compile(r"No space left on device|ENOSPC|disk (?:is )?full", re.IGNORECASE)


def locked[F: Callable[..., Any]](method: F) -> F:
    """Serialise a method on ``self.db.lock`` (the object's :class:`Connection`)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.db.lock:
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Connection:
    """An open Kuzu or LadybugDB database file and its one connection.

    Args:
        path: the database file.
        module: the ``kuzu`` or ``ladybug`` module.
        backend: ``"kuzu"`` or ``"ladybug"`` (for messages).
        user: whose file this is (for messages).
        buffer_pool_size, max_db_size: passed to the database.

    Attributes:
        lock: held by every query and by the store methods that keep caches in step.
        queries, seconds: how many queries ran and how long they took in total.

    Raises:
        StoreError: the file is locked by another process, or cannot be opened.
    """

    def __init__(
        self,
        path: Path,
        *,
        module: ModuleType,
        backend: str,
        user: str,
        buffer_pool_size: int,
        max_db_size: int,
    ) -> None:
        self.path, self.backend, self.user = path, backend, user
        self.lock = threading.RLock()
        self.queries = 0
        self.seconds = 0.0
        self._module = module
        self._prepared: dict[str, Any] = {}
        self._closed = True
        self._depth = 0  # nesting of transaction()
        try:
            self._db = module.Database(str(path), buffer_pool_size=buffer_pool_size, max_db_size=max_db_size)
        except RuntimeError as error:
            if "lock" in str(error).lower():
                raise StoreError(
                    f"{path.name} is locked by another process (is another smriti server running "
                    f"for user {user!r}?): {path}"
                ) from error
            raise StoreError(f"cannot open {path}: {error}") from error
        self._conn = module.Connection(self._db)
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        """Execute one parameterised query and fetch all rows (prepared once per query text).

        Raises:
            StoreError: the store is closed, or the query failed.
        """
        with self.lock:
            if self._closed:
                raise StoreError(f"the {self.backend} store of {self.user!r} is closed")
            start = time.perf_counter()
            try:
                if not params:
                    return self._conn.execute(query).get_all()
                if query.startswith("COPY "):  # an Arrow table: Kuzu binds it by its type, at execute
                    return self._conn.execute(query, params).get_all()
                statement = self._prepared.get(query)
                if statement is None:
                    statement = self._module.PreparedStatement(self._conn, query)
                    if not statement.is_success():
                        raise RuntimeError(statement.get_error_message())
                    self._prepared[query] = statement
                return self._conn.execute(statement, params).get_all()
            except RuntimeError as error:
                if _NO_SPACE.search(str(error)):
                    raise full_disk(self.path, str(error)) from error
                raise StoreError(f"{self.backend} query failed: {error}") from error
            finally:
                self.queries += 1
                self.seconds += time.perf_counter() - start

    def ddl(self, query: str) -> None:
        """Run a schema change; plans prepared before it may point at dropped catalog entries."""
        self.run(query)
        self.forget_plans()

    def forget_plans(self) -> None:
        self._prepared.clear()

    def command(self, command: str) -> None:
        """Run a statement as is (LOAD, INSTALL); the engine's RuntimeError passes through."""
        with self.lock:
            self._conn.execute(command)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the enclosed queries as one transaction (committed at the end, rolled back on
        error). Nested uses join the outermost one. Holds the lock throughout."""
        with self.lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self.run("BEGIN TRANSACTION")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._depth = 0
                self.run("ROLLBACK")
                raise
            self._depth = 0
            self.run("COMMIT")

    def rows_by_ids(self, single: str, many: str, ids: Sequence[str], per_id_up_to: int) -> list[list[Any]]:
        """Rows for the given ids: a primary-key query per id for short lists, one IN scan else.

        Kuzu plans ``UNWIND $ids ... {id: x}`` as a hash join over the whole table, while an
        equality on a parameter is an index lookup: at 10k engrams ~0.4-1 ms per lookup
        against ~4-5 ms for one ``IN`` scan. ``single`` takes ``$id``, ``many`` takes ``$ids``.
        """
        unique = list(dict.fromkeys(ids))
        if not unique:
            return []
        if len(unique) > per_id_up_to:
            return self.run(many, {"ids": unique})
        rows: list[list[Any]] = []
        for id_ in unique:
            rows.extend(self.run(single, {"id": id_}))
        return rows

    def close(self) -> None:
        """Release the file (and its lock); calling it again does nothing."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            self._prepared.clear()
            try:
                self._conn.close()
            finally:
                self._db.close()
