"""SQLite's WAL is checkpointed after commits, outside the write lock (not inside the commit
that crosses the threshold), so it stays bounded while no commit pays for a checkpoint."""

from __future__ import annotations

import os

from smriti.config import Settings
from smriti.stores.base import Engram
from smriti.stores.sqlite import connection, open_sqlite

DIMS = 256


def test_the_wal_stays_bounded_and_commits_do_not_checkpoint(tmp_path, monkeypatch):
    settings = Settings(
        storage_location=tmp_path, accessing_user="alice", embedding_dims=DIMS, db_type="sqlite"
    )
    store = open_sqlite(settings, "alice")
    wal = f"{store.path}-wal"
    monkeypatch.setattr(store.db, "checkpoint_bytes", 256 << 10)
    try:
        assert store.db._writer.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        checkpoints: list[bool] = []
        real = connection.Database._checkpoint_if_due

        def watched(self):
            checkpoints.append(self.lock._is_owned())  # the lock is free when it runs
            real(self)

        monkeypatch.setattr(connection.Database, "_checkpoint_if_due", watched)
        for batch in range(30):  # ~30 x 100 KB of engrams, each batch its own transaction
            engrams = [
                Engram(content=f"memory {batch}-{i}", id=f"m{batch}-{i}", embedding=[float(i)] * DIMS)
                for i in range(100)
            ]
            store.create_engrams(engrams)
            assert os.path.getsize(wal) < 2 * (256 << 10) + (200 << 10)
        assert checkpoints and not any(checkpoints)
        assert store.count_engrams() == 3000
    finally:
        store.close()
