"""The SQLite file of one user: a writer connection, pooled readers, transactions, the lock.

Why two kinds of connection: in WAL mode readers never block the writer nor see its
uncommitted rows. Every write goes through the one writer connection inside a transaction
(``BEGIN IMMEDIATE`` takes SQLite's write lock up front, so a transaction never fails half
way on a lock upgrade); reads made outside a transaction borrow a reader connection from a small
pool for the one statement, so a recall running while a memory is being stored sees the
store before or after it, never half of it. Reads made *inside* a transaction by the thread
that holds it use the writer connection, so a pipeline sees what it has written so far.

Why a pool rather than a reader per thread: LangGraph runs recall's parallel branches on a
thread pool made anew for every run, so per-thread readers meant three new connections per
recall (~1.3 ms each: open, pragmas, schema parse, a cold page cache) that were kept until
the store closed. Each read is one autocommitted statement, fetched whole before the
connection goes back, so sharing connections between threads changes no snapshot.

One process per file by default, as with Kuzu: an exclusive ``flock`` on ``memory.sqlite.lock``
makes a second server fail fast (the in-memory caches beside the file follow this process's
commits only). ``shared=True`` (the HTTP workers of ``smriti-mcp --workers N``) takes a shared
``flock`` instead: any number of shared holders, never beside an exclusive one. Between them
SQLite's own locking orders the writes (``BEGIN IMMEDIATE`` waits up to ``busy_timeout`` for
another process's writer) and :mod:`.changes` keeps each process's caches coherent.
"""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import filelock

from smriti.stores.base import StoreError
from smriti.stores.paths import SharedLock, process_lock, try_lock
from smriti.stores.space import full_disk

DEFAULT_BUSY_TIMEOUT = 10.0  # seconds a statement waits for another connection's lock
# Idle reader connections kept for reuse; more are opened while more threads read at once,
# and closed when they come back to a full pool.
MAX_IDLE_READERS = 8
# Pages are read with pread into each connection's small page cache, not through a memory
# map: every mapped page a query touches counts in the server's RSS (the embedding BLOBs
# made it 420 MB at 10k memories against 237 MB without), while recall through MCP measured
# the same either way (p50 41-43 ms at 10k): the OS page cache serves both.
MMAP_BYTES = 0
BULK_CACHE_KIB = 256 * 1024  # the writer's page cache during a bulk import (see bulk_settings)
CHECKPOINT_BYTES = 4 << 20  # WAL size past which a commit is followed by a checkpoint (SQLite's 1,000 pages)
BULK_CHECKPOINT_BYTES = 1 << 30  # the same during a bulk import

Params = Sequence[Any] | dict[str, Any]
SQLITE_IOERR, SQLITE_FULL = 10, 13  # primary result codes (an extended code's low byte)
_EXHAUSTED_BYTES = 1 << 20  # an I/O error with less than this free is taken for a full disk


def _disk_exhausted(path: Path) -> bool:
    try:
        return shutil.disk_usage(path.parent).free < _EXHAUSTED_BYTES
    except OSError:
        return False


def written[F: Callable[..., Any]](method: F) -> F:
    """Run a method in a write transaction of ``self.db`` (joining the caller's if any)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.db.transaction():
            return method(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class Database:
    """One user's ``memory.sqlite``.

    Args:
        path: the database file.
        user: whose file this is (for messages).
        busy_timeout: seconds to wait on a lock held by another connection.
        shared: other processes opened with ``shared`` may write the file too (see the module doc).

    Raises:
        StoreError: the file is held by another process, or cannot be opened.
    """

    def __init__(
        self, path: Path, *, user: str, busy_timeout: float = DEFAULT_BUSY_TIMEOUT, shared: bool = False
    ) -> None:
        self.path, self.user, self.busy_timeout, self.shared = path, user, busy_timeout, shared
        self.lock = threading.RLock()  # held for a whole transaction by its thread
        self._closed = True
        self._depth = 0
        self._owner: int | None = None
        self._after_commit: list[Callable[[], None]] = []
        self.checkpoint_bytes = CHECKPOINT_BYTES
        self._readers: list[sqlite3.Connection] = []  # every open reader, idle or not
        self._idle: list[sqlite3.Connection] = []  # readers free to borrow
        self._readers_lock = threading.Lock()  # not self.lock: a reader must never wait for a writer
        self._lock_file: filelock.BaseFileLock | SharedLock | None = self._take_file_lock()
        try:
            self._writer = self._connect()
            # WAL is a property of the file (kept once set); NORMAL syncs at checkpoints only:
            # a committed transaction survives a process crash, the last ones may not survive
            # a power cut.
            self._writer.execute("PRAGMA journal_mode=WAL")
            # Checkpoints run after commits, outside the lock (see _checkpoint_if_due); the WAL
            # file is cut back when it restarts, so its size tells what awaits a checkpoint.
            self._writer.execute("PRAGMA wal_autocheckpoint=0")
            self._writer.execute("PRAGMA journal_size_limit=0")
        except sqlite3.Error as error:
            self._release_file_lock()
            raise StoreError(f"cannot open {path}: {error}") from error
        self._closed = False

    # -- files and connections -----------------------------------------------------------------
    def _take_file_lock(self) -> filelock.BaseFileLock | SharedLock:
        path = Path(f"{self.path}.lock")
        if self.shared:
            shared = SharedLock(path)
            if not shared.acquire():
                raise StoreError(
                    f"{self.path.name} is held by a process that must be its only user (a stdio or "
                    f"shared smriti server, or the CLI, for user {self.user!r}): stop it to serve "
                    f"this memory from several workers: {self.path}"
                )
            return shared
        lock = process_lock(path)
        if not try_lock(lock):
            raise StoreError(
                f"{self.path.name} is locked by another process (is another smriti server running "
                f"for user {self.user!r}?): {self.path}"
            )
        return lock

    def _release_file_lock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: the sqlite3 module never opens transactions behind our back;
        # check_same_thread=False: the writer serves whichever thread holds the lock, and
        # close() may close a reader made by another thread.
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(self.busy_timeout * 1000)}")
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")  # see MMAP_BYTES
        return conn

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the sqlite store of {self.user!r} is closed")

    def _borrow(self) -> sqlite3.Connection:
        """An idle reader connection, or a new one when every reader is busy."""
        with self._readers_lock:
            self._check_open()
            if self._idle:
                return self._idle.pop()
        conn = self._connect()
        with self._readers_lock:
            self._readers.append(conn)
        return conn

    def _give_back(self, conn: sqlite3.Connection) -> None:
        with self._readers_lock:
            if not self._closed and len(self._idle) < MAX_IDLE_READERS:
                self._idle.append(conn)
                return
            if conn in self._readers:
                self._readers.remove(conn)
        with suppress(sqlite3.Error):
            conn.close()

    # -- statements ----------------------------------------------------------------------------
    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        """A reader from the pool, given back afterwards."""
        try:
            conn = self._borrow()
        except sqlite3.Error as error:
            raise StoreError(f"cannot open a reader on {self.path}: {error}") from error
        try:
            yield conn
        finally:
            self._give_back(conn)

    def read_committed(self, sql: str, params: Params = ()) -> list[Any]:
        """All rows of one query from the newest committed snapshot, even inside this thread's
        write transaction (what the caches may follow: never a write that may roll back)."""
        self._check_open()
        with self._reader() as conn:
            return _fetch_all(conn, sql, params)

    def read(self, sql: str, params: Params = ()) -> list[Any]:
        """All rows of one parameterised query, from a committed snapshot (or, inside a
        transaction, from the writer's own view)."""
        self._check_open()
        if self._depth and self._owner == threading.get_ident():
            return _fetch_all(self._writer, sql, params)
        with self._reader() as conn:
            return _fetch_all(conn, sql, params)

    @contextmanager
    def snapshot(self) -> Iterator[Callable[[str, Params], list[Any]]]:
        """A ``read`` whose queries all see one committed snapshot (a read transaction on one
        reader), for a read that takes two queries; inside this thread's write transaction,
        the writer's own view."""
        self._check_open()
        if self._depth and self._owner == threading.get_ident():
            yield self.read
            return
        with self.committed_snapshot() as read:
            yield read

    @contextmanager
    def committed_snapshot(self) -> Iterator[Callable[[str, Params], list[Any]]]:
        """A ``read`` whose queries all see one committed snapshot, on a reader even inside this
        thread's write transaction."""
        self._check_open()
        with self._reader() as conn:
            try:
                conn.execute("BEGIN")
            except sqlite3.Error as error:
                raise StoreError(f"cannot start a read on {self.path}: {error}") from error
            try:
                yield functools.partial(_fetch_all, conn)
            finally:
                with suppress(sqlite3.Error):
                    conn.execute("COMMIT")

    def read_batches(self, sql: str, params: Params = (), size: int = 2_000) -> Iterator[list[Any]]:
        """The rows of one query in lists of ``size``, from one snapshot: for reads too large
        to hold as one list (every embedding at 100k is 614 MB of BLOBs)."""
        self._check_open()
        with self._reader() as conn:
            try:
                cursor = conn.execute(sql, params)
                while batch := cursor.fetchmany(size):
                    yield batch
            except sqlite3.Error as error:
                raise StoreError(f"sqlite query failed: {error}") from error

    def write(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        """One statement on the writer; must run inside :meth:`transaction`."""
        self._in_transaction()
        try:
            return self._writer.execute(sql, params)
        except sqlite3.Error as error:
            raise self._failure("sqlite write failed", error) from error

    def write_many(self, sql: str, rows: Iterable[Params]) -> int:
        """``executemany`` on the writer inside :meth:`transaction`; returns the rows changed."""
        self._in_transaction()
        try:
            return self._writer.executemany(sql, rows).rowcount
        except sqlite3.Error as error:
            raise self._failure("sqlite write failed", error) from error

    def _failure(self, what: str, error: sqlite3.Error) -> StoreError:
        """A StoreFull for a full disk (SQLITE_FULL, or an I/O error with the disk out of space:
        SQLite reports some ENOSPC paths, such as growing the WAL index, as SQLITE_IOERR), else a
        StoreError naming ``what``."""
        code = getattr(error, "sqlite_errorcode", 0) & 0xFF
        if code == SQLITE_FULL or (code == SQLITE_IOERR and _disk_exhausted(self.path)):
            return full_disk(self.path, str(error))
        return StoreError(f"{what}: {error}")

    def _in_transaction(self) -> None:
        self._check_open()
        if not self._depth or self._owner != threading.get_ident():
            raise StoreError("internal error: a write outside Database.transaction()")

    def after_commit(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once the current transaction commits (dropped if it rolls back).

        The in-memory caches follow committed data only: a search running in another
        thread never finds a memory whose store may still fail.
        """
        self._in_transaction()
        self._after_commit.append(hook)

    # -- transactions --------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any exception); nested uses join
        the outermost one. The lock is held throughout, so other threads' writes wait."""
        with self.lock:
            self._check_open()
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            try:
                self._writer.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise self._failure(f"cannot start a transaction on {self.path}", error) from error
            self._depth, self._owner = 1, threading.get_ident()
            try:
                yield
                self._writer.execute("COMMIT")
            except BaseException as error:
                # SQLite may already have rolled back by itself (a full disk, say).
                with suppress(sqlite3.Error):
                    if self._writer.in_transaction:
                        self._writer.execute("ROLLBACK")
                self._after_commit.clear()
                if isinstance(error, sqlite3.Error):
                    raise self._failure("sqlite commit failed", error) from error
                raise
            finally:
                self._depth, self._owner = 0, None
            hooks, self._after_commit = self._after_commit, []
            for hook in hooks:
                hook()
        self._checkpoint_if_due()

    def _checkpoint_if_due(self) -> None:
        """Copy the WAL into the file once it exceeds ``checkpoint_bytes``, after the commit and
        outside the lock, on a reader connection (PASSIVE: it waits for no one).

        Why not SQLite's automatic checkpoint: it runs inside the COMMIT that crosses the
        threshold, so that commit (and the write lock, and a recall's reinforcement waiting
        for it) took 70-100 ms instead of 10-20 ms, every other chunk of a consolidation.
        """
        if self._closed or self.in_transaction:
            return
        try:
            if os.path.getsize(f"{self.path}-wal") < self.checkpoint_bytes:
                return
        except OSError:
            return
        with suppress(sqlite3.Error, StoreError):
            conn = self._borrow()
            try:
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
            finally:
                self._give_back(conn)

    @contextmanager
    def bulk_settings(self) -> Iterator[None]:
        """A larger page cache and rarer checkpoints on the writer while inside (a bulk import).

        Why: a batch of 1,000 imported memories dirties tens of MB of pages; with the default
        2 MB cache they spill to the WAL before the commit, and the default checkpoint (every
        1,000 pages) copies each batch into the file again at once. The WAL is checkpointed
        once at the end instead. Commits stay durable as before (WAL, synchronous=NORMAL).
        """
        with self.lock:
            self._check_open()
            writer = self._writer
            cache = writer.execute("PRAGMA cache_size").fetchone()[0]
            checkpoint, self.checkpoint_bytes = self.checkpoint_bytes, BULK_CHECKPOINT_BYTES
            writer.execute(f"PRAGMA cache_size={-BULK_CACHE_KIB}")
            try:
                yield
            finally:
                self.checkpoint_bytes = checkpoint
                with suppress(sqlite3.Error):
                    writer.execute(f"PRAGMA cache_size={int(cache)}")
                    writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    @property
    def in_transaction(self) -> bool:
        """True when the calling thread is inside :meth:`transaction`."""
        return bool(self._depth) and self._owner == threading.get_ident()

    def close(self) -> None:
        """Close every connection and release the file; calling it again does nothing."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            with self._readers_lock:
                for conn in self._readers:
                    with suppress(sqlite3.Error):
                        conn.close()
                self._readers.clear()
                self._idle.clear()
            with suppress(sqlite3.Error):
                # A clean close checkpoints the WAL into the main file and removes it.
                self._writer.close()
            self._release_file_lock()


def _fetch_all(conn: sqlite3.Connection, sql: str, params: Params = ()) -> list[Any]:
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.Error as error:
        raise StoreError(f"sqlite query failed: {error}") from error
