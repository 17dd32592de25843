"""The embedded store: Kuzu (``DB_TYPE=kuzu``) and its fork LadybugDB (``DB_TYPE=ladybug``).

Kuzu's query text lives only in this package. :class:`KuzuStore` (:mod:`.store`) owns its
collaborators and delegates the protocol to them:

* :mod:`.connection`: :class:`~.connection.Connection`, the file, queries, transactions, the lock;
* :mod:`.engrams`: :class:`~.engrams.EngramTable` over :mod:`.rows` (the Engram row cache);
* :mod:`.search`: :class:`~.search.SearchIndex`, extensions, HNSW/FTS indexes and the
  in-memory :mod:`smriti.stores.search` caches;
* :mod:`.graph`: the cue map, the fresh-edge memo and the cue and edge reads;
  :mod:`.batch`: the cue and edge writes;
* :mod:`.schema`: files, DDL, migrations, row conversion; :mod:`.export`: the record export.
"""

from smriti.stores.kuzu.store import KuzuStore, open_kuzu, open_ladybug

__all__ = ["KuzuStore", "open_kuzu", "open_ladybug"]
