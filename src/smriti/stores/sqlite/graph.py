"""Cues and edges of the SQLite store: :class:`Graph`, the reads and batch writes.

Semantics are the protocol's (see :mod:`smriti.stores.base`): cues unique by normalised
name, symmetric CoOccurs and AssociatedWith stored as one row per unordered pair (an
existing row in either direction is the one updated), self-edges ignored, a missing end a
no-op. Each batch write is a few ``executemany`` statements in one transaction; ends are
found by their unique ``id``/``name`` indexes inside the statement, so no name -> id map
has to live in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from smriti.stores.base import (
    SPENT_STRENGTH,
    Association,
    Cue,
    CueHit,
    Relation,
    check_dims,
    distinct_cues,
    merge_associations,
    merge_cooccurrences,
    merge_relations,
    new_id,
    normalise_cue_name,
)
from smriti.stores.sqlite import schema
from smriti.stores.sqlite.connection import Database, written
from smriti.stores.sqlite.cuecache import CueCache
from smriti.stores.sqlite.engrams import IDS, id_list
from smriti.stores.sqlite.schema import CUE_SELECT, from_db, to_blob, to_db

if TYPE_CHECKING:
    from smriti.stores.sqlite.changes import ChangeFeed

CUE_ROWID = "(SELECT rowid FROM cue WHERE name = ?)"  # a cue's rowid by name, inside a statement

# Each batch write first maps its ids and names to rowids in one read per table (an index range
# over a JSON list), then writes integer rows: a text lookup per row and edge end cost ~3x more
# (a bulk import writes ~20 edges per memory).
_ROWIDS = {
    ("engram", "id"): f"SELECT id, rowid FROM engram WHERE id IN {IDS}",
    ("cue", "id"): f"SELECT id, rowid FROM cue WHERE id IN {IDS}",
    ("cue", "name"): f"SELECT name, rowid FROM cue WHERE name IN {IDS}",
}


# Up to this many pairs, which are stored is found by probing each (see Graph._stored_pairs).
PROBE_PAIRS = 256


class Graph:
    """Cue, relation and association reads and writes.

    Args:
        db: the store's database.
        dims: the embedding dimension of cue embeddings.
    """

    def __init__(self, db: Database, dims: int) -> None:
        self.db, self.dims = db, dims
        self.cue_cache = CueCache()  # what read_with_cues reads; cleared by every cue delete
        # Set when other processes write the file too: their cue deletes clear the cache first.
        self.feed: ChangeFeed | None = None

    def rowids(self, table: str, column: str, keys: Iterable[str]) -> dict[str, int]:
        """Rowid of each existing row of ``table`` whose unique ``column`` is one of ``keys``."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}
        return dict(self.db.read(_ROWIDS[table, column], (json.dumps(wanted),)))

    # -- cues ------------------------------------------------------------------------------------
    def _cues_by_name(self, names: Iterable[str]) -> dict[str, Cue]:
        rows = self.db.read(
            f"SELECT {CUE_SELECT} FROM cue c WHERE c.name IN {IDS}", (json.dumps(list(names)),)
        )
        return {row[1]: schema.cue_from_row(row) for row in rows}

    def _ensure_cues(self, names: Iterable[str], cue_type: str = "keyword") -> None:
        """Create the cues of these (normalised) names that do not exist yet."""
        self.db.write_many(
            "INSERT INTO cue (id, name, cue_type) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            [(new_id(), name, cue_type) for name in sorted(set(names))],
        )

    @written
    def upsert_cues(self, cues: Sequence[Cue]) -> list[Cue]:
        """Insert by normalised name, or take the stored cue of that name unchanged.

        Raises:
            ValueError: an empty cue name. EmbeddingMismatchError: a cue embedding of another size.
        """
        names, wanted = distinct_cues(
            cues, lambda cue, name: check_dims(cue.embedding, self.dims, f"the embedding of cue {name!r}")
        )
        if not wanted:
            return []
        self.db.write_many(
            "INSERT INTO cue (id, name, cue_type, embedding) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            [(c.id, name, c.cue_type, to_blob(c.embedding)) for name, c in wanted.items()],
        )
        stored = self._cues_by_name(wanted)
        missing = [name for name in wanted if name not in stored]
        if missing:  # the given id belongs to a cue of another name: take a fresh one
            self.db.write_many(
                "INSERT INTO cue (id, name, cue_type, embedding) VALUES (?, ?, ?, ?)",
                [(new_id(), n, wanted[n].cue_type, to_blob(wanted[n].embedding)) for n in missing],
            )
            stored |= self._cues_by_name(missing)
        return [stored[name] for name in names]

    @written
    def link_cue_ids(self, engram_id: str, cue_ids: Sequence[str]) -> None:
        """EncodedBy edges, idempotent; a missing engram or cue is skipped."""
        self.link_many({engram_id: cue_ids})

    @written
    def link_many(self, links: Mapping[str, Sequence[str]]) -> None:
        """EncodedBy edges of many engrams (engram id -> cue ids), idempotent; missing ends skipped."""
        engrams = self.rowids("engram", "id", links)
        cues = self.rowids("cue", "id", (cue_id for cue_ids in links.values() for cue_id in cue_ids))
        pairs = {
            (engram, cue)
            for engram_id, cue_ids in links.items()
            if (engram := engrams.get(engram_id)) is not None
            for cue_id in cue_ids
            if (cue := cues.get(cue_id)) is not None
        }
        # in key order: the rows land in the primary key's order, page after page
        self.db.write_many("INSERT OR IGNORE INTO encoded_by (engram, cue) VALUES (?, ?)", sorted(pairs))

    def cues_of(self, engram_ids: Sequence[str]) -> dict[str, list[Cue]]:
        result: dict[str, list[Cue]] = {engram_id: [] for engram_id in engram_ids}
        if not engram_ids:
            return result
        rows = self.db.read(
            f"SELECT e.id, {CUE_SELECT} FROM engram e JOIN encoded_by x ON x.engram = e.rowid "
            f"JOIN cue c ON c.rowid = x.cue WHERE e.id IN {IDS} ORDER BY e.id, c.name",
            (id_list(engram_ids),),
        )
        for engram_id, *cue in rows:
            result[engram_id].append(schema.cue_from_row(cue))
        return result

    def read_with_cues(self, sql: str, params: Sequence[Any]) -> tuple[list[Any], list[list[Cue]]]:
        """The rows of ``sql``, whose last column is the comma-separated rowids of a row's cues
        (``group_concat(encoded_by.cue)``), and each row's cues (no embeddings) in that order:
        what recall reads of an engram's cues, in the same statement as the engram.

        The cues come from :attr:`cue_cache` (shared: read-only); those not cached yet are read
        in the same snapshot as the rows."""
        if self.feed is not None:
            self.feed.catch_up()
        generation = self.cue_cache.generation
        with self.db.snapshot() as read:
            rows = read(sql, params)
            lists = [list(map(int, row[-1].split(","))) if row[-1] else [] for row in rows]
            wanted = (cue for rowids in lists for cue in rowids)
            if self.feed is not None and not self.feed.caught_up(read):
                # Another process committed since the catch-up (a cue deleted, its rowid reused?):
                # this snapshot is newer than the cache, so the cache is neither read nor filled.
                cues: dict[int, Cue] = {}
                missing, generation = list(dict.fromkeys(wanted)), -1
            else:
                cues, missing = self.cue_cache.known(wanted)
            if missing:
                found = read(
                    f"SELECT rowid, id, name, cue_type FROM cue WHERE rowid IN {IDS}", (json.dumps(missing),)
                )
                read_now = {
                    rowid: Cue(id=id_, name=name, cue_type=cue_type or "keyword")
                    for rowid, id_, name, cue_type in found
                }
                self.cue_cache.store(read_now, generation)
                cues.update(read_now)
        return rows, [[cues[cue] for cue in rowids] for rowids in lists]

    def engrams_by_cues(self, cue_names: Sequence[str], limit: int) -> list[CueHit]:
        """Most matched cues first, then by creation time and content (the same in every store of
        the same content, where random ids made each build's shortlist differ at the cut); each
        hit's cues in the order they were asked."""
        order = {name: i for i, name in enumerate(dict.fromkeys(normalise_cue_name(n) for n in cue_names))}
        if not order or limit <= 0:
            return []
        # A hub cue (a speaker's name) encodes thousands of engrams: ordering them all by
        # (count, id) read each one's id from the engram table. The counts are grouped once by
        # rowid, and only the engrams matching at least as many cues as the limit-th best are
        # joined for their ids (as _top_bm25_sql in search.py): the same rows in the same order,
        # 2.4 -> 1.3 ms p50 over 200 bench questions at 10k.
        rows = self.db.read(
            "WITH h AS MATERIALIZED (SELECT x.engram AS engram, count(*) AS n, "
            "json_group_array(c.name) AS names FROM cue c JOIN encoded_by x ON x.cue = c.rowid "
            f"WHERE c.name IN {IDS} GROUP BY x.engram) "
            "SELECT e.id, h.names FROM h JOIN engram e ON e.rowid = h.engram "
            "WHERE h.n >= IFNULL((SELECT n FROM h ORDER BY n DESC LIMIT 1 OFFSET ? - 1), h.n) "
            "ORDER BY h.n DESC, e.created_at, e.content, e.id LIMIT ?",
            (json.dumps(list(order)), limit, limit),
        )
        return [CueHit(id_, tuple(sorted(json.loads(names), key=order.__getitem__))) for id_, names in rows]

    def cue_engram_counts(self, cue_names: Sequence[str]) -> dict[str, int]:
        """Keyed by the names as asked (matched normalised); cues that do not exist are left out."""
        normalised = {name: normalise_cue_name(name) for name in cue_names}
        if not normalised:
            return {}
        rows = self.db.read(
            f"SELECT c.name, c.engram_count FROM cue c WHERE c.name IN {IDS}",
            (json.dumps(sorted(set(normalised.values()))),),
        )
        counts = {name: int(n) for name, n in rows}
        return {name: counts[n] for name, n in normalised.items() if n in counts}

    def _drop_cached_cues(self) -> None:
        """Before a write that changes cached cues: clear the cue cache now (readers that started
        before keep nothing they read) and again once the write is visible."""
        self.cue_cache.clear()
        self.db.after_commit(self.cue_cache.clear)

    @written
    def set_cue_types(self, types: Mapping[str, str]) -> None:
        """The type of each cue, by name (normalised here); an unknown name is a no-op."""
        rows = sorted(
            {normalise_cue_name(name): cue_type for name, cue_type in types.items() if cue_type}.items()
        )
        if rows:
            self._drop_cached_cues()  # cached cues carry their type
            self.db.write_many("UPDATE cue SET cue_type = ? WHERE name = ?", [(t, n) for n, t in rows if n])

    @written
    def delete_orphan_cues(self, names: Sequence[str] | None = None) -> int:
        """Delete cues that encode no engram (only among ``names`` when given); their
        CoOccurs/RelatesTo rows go by cascade."""
        self._drop_cached_cues()  # a deleted cue's rowid may go to the next new cue
        orphan = "NOT EXISTS (SELECT 1 FROM encoded_by x WHERE x.cue = cue.rowid)"
        if names is None:
            return self.db.write(f"DELETE FROM cue WHERE {orphan}").rowcount
        wanted = sorted({normalise_cue_name(name) for name in names})
        if not wanted:
            return 0
        return self.db.write(
            f"DELETE FROM cue WHERE name IN {IDS} AND {orphan}", (json.dumps(wanted),)
        ).rowcount

    # -- co-occurrences and relations --------------------------------------------------------------
    @written
    def add_cooccurrences(self, pairs: Sequence[tuple[str, str, float]], replace: bool = False) -> None:
        merged = merge_cooccurrences(pairs, replace)
        if not merged:
            return
        self._ensure_cues(name for pair in merged for name in pair)
        cues = self.rowids("cue", "name", (name for pair in merged for name in pair))
        wanted = {(cues[a], cues[b]): w for (a, b), w in merged.items()}
        stored = self._stored_pairs("co_occurs", wanted)
        strength = "?" if replace else "strength + ?"
        self.db.write_many(
            f"UPDATE co_occurs SET strength = {strength} WHERE a = ? AND b = ?",
            [(w, *stored[pair]) for pair, w in wanted.items() if pair in stored],
        )
        self.db.write_many(
            "INSERT INTO co_occurs (a, b, strength) VALUES (?, ?, ?)",
            sorted((*pair, w) for pair, w in wanted.items() if pair not in stored),
        )

    def _stored_pairs(
        self, table: str, pairs: Iterable[tuple[int, int]]
    ) -> dict[tuple[int, int], tuple[int, int]]:
        """Which of these unordered rowid pairs ``table`` (co_occurs or associated_with) holds,
        each mapped to the direction it is stored in; one read.

        Few pairs (a store): a primary-key probe per pair and direction. Many (an import): a
        key range per end, filtered in SQLite ("+b": a filter, not a probe per combination of
        ends), which costs what the ends' rows cost and ~3x less than probing each pair.
        """
        pairs = list(pairs)
        if not pairs:
            return {}
        if len(pairs) <= PROBE_PAIRS:
            both = json.dumps([[x, y] for x, y in pairs] + [[y, x] for x, y in pairs])
            query = (
                f"SELECT t.a, t.b FROM {table} t JOIN json_each(?) j "
                "ON t.a = json_extract(j.value, '$[0]') AND t.b = json_extract(j.value, '$[1]')"
            )
            rows = self.db.read(query, (both,))
        else:
            ends = json.dumps(sorted({end for pair in pairs for end in pair}))
            query = f"SELECT a, b FROM {table} WHERE a IN {IDS} AND +b IN {IDS}"
            rows = self.db.read(query, (ends, ends))
        found = set(map(tuple, rows))
        stored = {}
        for x, y in pairs:
            if (x, y) in found:
                stored[x, y] = (x, y)
            elif (y, x) in found:
                stored[x, y] = (y, x)
        return stored

    @written
    def weaken_cooccurrences(self, pairs: Sequence[tuple[str, str, float]]) -> None:
        """Take each delta off the pair's row (either direction); rows at or below zero go."""
        merged = merge_cooccurrences(pairs)
        if not merged:
            return
        either = f"(a = {CUE_ROWID} AND b = {CUE_ROWID}) OR (a = {CUE_ROWID} AND b = {CUE_ROWID})"
        self.db.write_many(
            f"UPDATE co_occurs SET strength = strength - ? WHERE {either}",
            [(w, a, b, b, a) for (a, b), w in merged.items()],
        )
        self.db.write_many(
            f"DELETE FROM co_occurs WHERE strength <= {SPENT_STRENGTH} AND ({either})",
            [(a, b, b, a) for a, b in merged],
        )

    @written
    def add_relations(self, relations: Sequence[Relation], cue_type: str = "keyword") -> None:
        """RelatesTo rows by cue name, idempotent; cues created here get ``cue_type``."""
        wanted = merge_relations(relations)
        if not wanted:
            return
        self._ensure_cues({n for key in wanted for n in (key[0], key[2])}, cue_type)
        self.db.write_many(
            "INSERT OR IGNORE INTO relates_to (source, relation, target, engram_id, created_at) "
            "SELECT s.rowid, ?, t.rowid, ?, ? FROM cue s, cue t WHERE s.name = ? AND t.name = ?",
            [(rel, engram, to_db(r.created_at), s, t) for (s, rel, t, engram), r in wanted.items()],
        )

    def relations_of(self, engram_ids: Sequence[str]) -> list[Relation]:
        if not engram_ids:
            return []
        rows = self.db.read(
            "SELECT s.name, r.relation, t.name, r.engram_id, r.created_at FROM relates_to r "
            "JOIN cue s ON s.rowid = r.source JOIN cue t ON t.rowid = r.target "
            f"WHERE r.engram_id IN {IDS} ORDER BY r.created_at, s.name, r.relation, t.name",
            (id_list(engram_ids),),
        )
        return [Relation(s, rel, t, e or "", from_db(at)) for s, rel, t, e, at in rows]

    def related_entities(self, cue_names: Sequence[str], limit: int) -> list[Relation]:
        """Edges from or to these cues, newest first (see the protocol), at most ``limit``."""
        names = id_list(sorted({normalise_cue_name(n) for n in cue_names} - {""}))
        if limit <= 0 or names == "[]":
            return []
        ends = f"(SELECT rowid FROM cue WHERE name IN {IDS})"
        rows = self.db.read(
            # Two index ranges (the primary key leads with source; relates_to_target) joined by
            # UNION, rather than one OR over the whole table.
            "SELECT s.name, r.relation, t.name, r.engram_id, r.created_at FROM ("
            f"SELECT * FROM relates_to WHERE source IN {ends} UNION "
            f"SELECT * FROM relates_to WHERE target IN {ends}) r "
            "JOIN cue s ON s.rowid = r.source JOIN cue t ON t.rowid = r.target "
            "ORDER BY r.created_at DESC, s.name, r.relation, t.name, r.engram_id LIMIT ?",
            (names, names, int(limit)),
        )
        return [Relation(s, rel, t, e or "", from_db(at)) for s, rel, t, e, at in rows]

    # -- associations ------------------------------------------------------------------------------
    @written
    def associate_many(self, associations: Sequence[Association]) -> None:
        """Create or strengthen (keep the max) symmetric AssociatedWith rows."""
        merged = merge_associations(associations)
        if not merged:
            return
        engrams = self.rowids("engram", "id", (i for a in merged for i in (a.source_id, a.target_id)))
        wanted = {
            (x, y): a
            for a in merged
            if (x := engrams.get(a.source_id)) is not None and (y := engrams.get(a.target_id)) is not None
        }
        stored = self._stored_pairs("associated_with", wanted)
        self.db.write_many(
            "UPDATE associated_with SET strength = max(strength, ?) WHERE a = ? AND b = ?",
            [(float(a.strength), *stored[pair]) for pair, a in wanted.items() if pair in stored],
        )
        self.db.write_many(
            "INSERT INTO associated_with (a, b, strength, relation_type, created_at) VALUES (?, ?, ?, ?, ?)",
            sorted(
                (*pair, float(a.strength), a.relation_type, to_db(a.created_at))
                for pair, a in wanted.items()
                if pair not in stored
            ),
        )

    _EDGE = (
        "SELECT x.id, y.id, w.strength, w.relation_type, w.created_at FROM associated_with w "
        "JOIN engram x ON x.rowid = w.a JOIN engram y ON y.rowid = w.b "
    )

    def neighbours(self, engram_ids: Sequence[str]) -> list[Association]:
        """Edges touching these engrams, either direction, ordered by (source, target) id."""
        if not engram_ids:
            return []
        ids = id_list(engram_ids)
        rows = self.db.read(
            # A UNION of two index ranges (a = ..., b = ...) rather than one OR over the table.
            f"{self._EDGE} WHERE w.a IN (SELECT rowid FROM engram WHERE id IN {IDS}) UNION "
            f"{self._EDGE} WHERE w.b IN (SELECT rowid FROM engram WHERE id IN {IDS}) ORDER BY 1, 2",
            (ids, ids),
        )
        return [schema.association_from_row(row) for row in rows]

    def association_weights(self) -> list[tuple[str, str, float]]:
        return self.db.read(
            "SELECT x.id, y.id, w.strength FROM associated_with w "
            "JOIN engram x ON x.rowid = w.a JOIN engram y ON y.rowid = w.b"
        )

    def all_associations(self) -> list[Association]:
        return [schema.association_from_row(row) for row in self.db.read(f"{self._EDGE} ORDER BY x.id, y.id")]
