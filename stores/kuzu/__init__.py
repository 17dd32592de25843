"""The embedded store: Kuzu (``DB_TYPE=kuzu``) and its fork LadybugDB (``DB_TYPE=ladybug``).

Kuzu's query text lives only in this package:

* :mod:`.store`: :class:`KuzuStore`, the factories, engrams, stats (see its docstring for the
  one-process, one-file policy and the search policy);
* :mod:`.schema`: files, DDL, migrations, row conversion and export;
* :mod:`.graph`: the cue and edge reads; :mod:`.batch`: the cue and edge writes;
* :mod:`.search`: extensions, HNSW/FTS indexes and the choice between them and the
  in-memory :mod:`smriti.stores.search` index;
* :mod:`.rows`: the in-memory Engram rows beside the exact-search caches.
"""

from smriti.stores.kuzu.store import KuzuStore, open_kuzu, open_ladybug

__all__ = ["KuzuStore", "open_kuzu", "open_ladybug"]
