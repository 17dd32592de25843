"""The embedded default store: SQLite (``DB_TYPE=sqlite``, the standard library's ``sqlite3``).

SQL text lives only in this package. :class:`SqliteStore` (:mod:`.store`) owns its
collaborators and delegates the protocol to them:

* :mod:`.connection`: :class:`~.connection.Database`, the file, writer/reader connections,
  transactions, the single-process file lock;
* :mod:`.engrams`: :class:`~.engrams.EngramTable`, engram rows and their FTS5 rows;
* :mod:`.graph`: :class:`~.graph.Graph`, cues and edges;
* :mod:`.search`: :class:`~.search.SearchIndex`, the vector cache and FTS5 queries;
* :mod:`.schema`: tables, migrations, conversions; :mod:`.export`: the record export.
"""

from smriti.stores.sqlite.store import SqliteStore, open_sqlite, sqlite_path

__all__ = ["SqliteStore", "open_sqlite", "sqlite_path"]
