"""The embedded store (stores/kuzu/) on real Kuzu and LadybugDB files under tmp_path.

Kuzu and LadybugDB cannot share a process (clashing native modules), and this process
loads Kuzu. The tests that run on both backends are therefore written as *scenarios*
(plain functions taking an ``open_store`` callable): Kuzu runs them in-process, LadybugDB
runs all of them once in a child interpreter (the ``ladybug_results`` fixture), and each
parametrised test asserts its own scenario's outcome. Nothing at module level may import
``kuzu`` or ``ladybug``, because the child executes this file too.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import subprocess
import sys
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from smriti.config import Settings
from smriti.stores.base import (
    Association,
    Cue,
    EmbeddingMismatchError,
    Engram,
    Relation,
    StoreError,
    UnsafeUserError,
)
from smriti.stores.kuzu import KuzuStore, open_kuzu, open_ladybug
from smriti.stores.records import import_into

DIMS = 64  # the settings fixture's EMBEDDING_DIMS
T0 = datetime(2026, 1, 15, 12, 0, tzinfo=UTC)
Opener = Callable[..., KuzuStore]


def unit_vectors(count: int, seed: int) -> np.ndarray:
    """Seeded random unit vectors, rounded to float32 so they read back exactly."""
    vectors = np.random.default_rng(seed).normal(size=(count, DIMS)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def exact_top(query: np.ndarray, matrix: np.ndarray, ids: list[str], k: int) -> list[str]:
    scores = matrix @ (query / np.linalg.norm(query))
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


# -- scenarios (run on Kuzu in-process and on LadybugDB in a child process) ---------------------
def scenario_round_trip(open_store: Opener, backend: str) -> None:
    store = open_store()
    full = Engram(
        id="full",
        content="Alice prefers 'cursor' pagination; \"offset\" is slow \\ ✓",
        summary="pagination preference",
        memory_type="semantic",
        importance=0.75,
        access_count=3,
        created_at=datetime(2025, 3, 4, 10, 11, 12, 345678, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        last_accessed_at=datetime(2025, 6, 7, 8, 9, 10, 111213, tzinfo=UTC),
        decay_factor=0.625,
        embedding=unit_vectors(1, seed=1)[0].tolist(),
        source="chat:42",
        tags="api,db",
        cluster_id=7,
    )
    bare = Engram(id="bare", content="nothing to embed", created_at=T0, last_accessed_at=T0)
    store.create_engram(full)
    store.create_engram(bare)
    got = store.get_engram("full")
    assert got == full  # every field; datetimes compare as instants
    assert got.created_at.tzinfo is UTC and got.created_at.hour == 4  # 10:11 at +05:30 is 04:41 UTC
    assert store.get_engram("bare").embedding is None
    assert store.get_engram("missing") is None
    assert [e.id for e in store.get_engrams(["bare", "missing", "full"])] == ["bare", "full"]
    with pytest.raises(StoreError):
        store.create_engram(Engram(id="full", content="duplicate"))
    with pytest.raises(EmbeddingMismatchError):
        store.create_engram(Engram(content="short", embedding=[1.0, 0.0]))

    later = datetime(2026, 2, 1, tzinfo=UTC)
    assert store.update_engram("full", importance=0.9, tags="x", cluster_id=3, last_accessed_at=later)
    assert store.update_engram("missing", importance=1.0) is False
    with pytest.raises(ValueError, match="embedding"):
        store.update_engram("full", embedding=[0.0] * DIMS)
    changed = store.update_engrams(
        {
            "full": {"decay_factor": 0.5},
            "bare": {"decay_factor": 0.25, "access_count": 2},
            "gone": {"importance": 0.1},
        }
    )
    assert changed == 2
    got = store.get_engram("full")
    assert (got.importance, got.tags, got.cluster_id, got.decay_factor) == (0.9, "x", 3, 0.5)
    assert got.last_accessed_at == later and got.content == full.content
    assert [e.id for e in store.list_recent(10)] == ["full", "bare"]
    assert [e.id for e in store.list_recent(10, memory_type="episodic")] == ["bare"]
    states = {s.id: s for s in store.engram_states()}
    assert (states["bare"].decay_factor, states["bare"].access_count) == (0.25, 2)
    assert store.count_engrams() == 2
    store.close()

    reopened = open_store()  # persisted, not cached
    assert reopened.get_engram("full").decay_factor == 0.5
    assert reopened.delete_engram("bare") is True
    assert reopened.delete_engram("bare") is False
    assert reopened.count_engrams() == 1
    assert reopened.stats().backend == backend
    reopened.close()


def scenario_vector_search(open_store: Opener, backend: str) -> None:
    store = open_store()
    matrix = unit_vectors(200, seed=7)
    ids = [f"e{i:03d}" for i in range(200)]
    types = ["episodic", "semantic", "procedural"]
    for i, vector in enumerate(matrix):
        store.create_engram(
            Engram(id=ids[i], content=f"memory {i}", memory_type=types[i % 3], embedding=vector.tolist())
        )
    noise = np.random.default_rng(8).normal(scale=0.05, size=(5, DIMS)).astype(np.float32)
    for q, query in enumerate(matrix[[3, 50, 99, 150, 199]] + noise):
        hits = store.vector_search(query.tolist(), 5)
        assert [h.id for h in hits] == exact_top(query, matrix, ids, 5), q
        expected_best = float(matrix[ids.index(hits[0].id)] @ (query / np.linalg.norm(query)))
        assert hits[0].score == pytest.approx(expected_best, abs=1e-5)
        assert all(a.score >= b.score for a, b in itertools.pairwise(hits))
        semantic = [i for i in range(200) if i % 3 == 1]
        filtered = store.vector_search(query.tolist(), 4, memory_type="semantic")
        assert [h.id for h in filtered] == exact_top(query, matrix[semantic], [ids[i] for i in semantic], 4)
    assert store.vector_search(matrix[0].tolist(), 0) == []
    assert store.vector_search([0.0] * DIMS, 3) == []
    with pytest.raises(EmbeddingMismatchError):
        store.vector_search([1.0, 2.0], 3)
    # The cache follows writes: a deleted best hit disappears, a new exact match comes first.
    assert store.delete_engram("e003")
    assert "e003" not in [h.id for h in store.vector_search(matrix[3].tolist(), 5)]
    store.create_engram(Engram(id="twin", content="twin", embedding=matrix[3].tolist()))
    assert store.vector_search(matrix[3].tolist(), 1)[0].id == "twin"
    store.update_engram("twin", memory_type="procedural")
    assert store.vector_search(matrix[3].tolist(), 1, memory_type="procedural")[0].id == "twin"
    store.close()


def scenario_fallback(open_store: Opener, backend: str) -> None:
    """No extensions (forced on Kuzu, offline on LadybugDB): brute force and a keyword scan."""
    from smriti.stores.kuzu import search as kuzu_search

    kuzu_search._warned.clear()
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("smriti.stores").addHandler(handler)
    options = {"use_extensions": False} if backend == "kuzu" else {}
    first, second = open_store(**options), open_store("bob", **options)
    try:
        texts = [
            "postgres index tuning for large tables",
            "the dog barked at the postman",
            "postgres vacuum settings",
            "cooking pasta with garlic",
        ]
        for store in (first, second):
            for i, text in enumerate(texts * 3):
                memory_type = "semantic" if i % 2 else "episodic"
                store.create_engram(Engram(id=f"t{i}", content=text, memory_type=memory_type))
        states = [first.ensure_indexes(5), second.ensure_indexes(5)]
        if first.capabilities.vector_index:  # LadybugDB could download its extensions here
            assert states[0] == {"vector_index": True, "fulltext_index": True}
            return
        assert states == [{"vector_index": False, "fulltext_index": False}] * 2
        assert first.stats().vector_index is False and first.get_meta("vector_index") == "false"
        warnings = [r for r in records if "extension" in r.getMessage()]
        assert len(warnings) == (1 if backend == "ladybug" else 0)  # one, for two stores
        hits = first.fulltext_search("postgres index", 3)
        assert hits[0].id in {"t0", "t4", "t8"} and hits[0].score == 1.0
        assert all(0 < h.score <= 1 for h in hits)
        assert first.fulltext_search("the", 5) == []  # stopwords only
        garlic = first.fulltext_search("garlic", 10, memory_type="semantic")
        assert {h.id for h in garlic} == {"t3", "t7", "t11"}
        first.update_engram("t1", content="a quokka smiled")
        assert [h.id for h in first.fulltext_search("quokka", 5)] == ["t1"]
        first.delete_engram("t1")
        assert first.fulltext_search("quokka", 5) == []
        assert len(first.vector_search([1.0] + [0.0] * (DIMS - 1), 3)) == 0  # no embeddings stored
    finally:
        logging.getLogger("smriti.stores").removeHandler(handler)
        first.close()
        second.close()


SCENARIOS = {
    "round_trip": scenario_round_trip,
    "vector_search": scenario_vector_search,
    "fallback": scenario_fallback,
}


def _settings_at(root: Path) -> Settings:
    return Settings(
        storage_location=root,
        accessing_user="alice",
        llm_provider="heuristic",
        embedding_provider="hashing",
        embedding_dims=DIMS,
    )


def _run_ladybug_scenarios(root: str) -> dict[str, str]:
    """Child-process entry point: every scenario on LadybugDB, "ok" or the traceback."""
    results = {}
    for name, scenario in SCENARIOS.items():
        cfg = _settings_at(Path(root) / name)
        try:
            scenario(lambda user="alice", _cfg=cfg, **kw: open_ladybug(_cfg, user, **kw), "ladybug")
            results[name] = "ok"
        except BaseException:  # report everything, including pytest's own failures
            results[name] = traceback.format_exc()
    return results


_CHILD = (
    "import json, runpy, sys; ns = runpy.run_path(sys.argv[1]); "
    "print(json.dumps(ns['_run_ladybug_scenarios'](sys.argv[2])))"
)


@pytest.fixture(scope="module")
def ladybug_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if importlib.util.find_spec("ladybug") is None:
        pytest.skip("ladybug is not installed (pip install 'smriti-graph[ladybug]')")
    root = tmp_path_factory.mktemp("ladybug")
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, __file__, str(root)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 0, child.stderr[-4000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["kuzu", "ladybug"])
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario(scenario: str, backend: str, settings: Settings, request: pytest.FixtureRequest) -> None:
    if backend == "ladybug":
        outcome = request.getfixturevalue("ladybug_results")[scenario]
        assert outcome == "ok", outcome
        return
    SCENARIOS[scenario](lambda user="alice", **kw: open_kuzu(settings, user, **kw), backend)


# -- Kuzu only ---------------------------------------------------------------------------------
@pytest.fixture
def store(settings: Settings):
    opened = open_kuzu(settings, "alice")
    yield opened
    opened.close()


def cooccurrences(store: KuzuStore) -> dict[tuple[str, str], float]:
    records = [r for r in store.export_records() if r["kind"] == "co_occurs"]
    return {(r["source"], r["target"]): r["strength"] for r in records}


def _engram(eid: str, **fields) -> Engram:
    return Engram(id=eid, content=f"memory {eid}", created_at=T0, last_accessed_at=T0, **fields)


def test_cues_links_cooccurrence_relations_and_associations(store: KuzuStore) -> None:
    for eid in ("e1", "e2", "e3"):
        store.create_engram(_engram(eid))
    a = store.upsert_cue(Cue(name="Cursor Pagination", cue_type="concept", embedding=[0.5] * DIMS))
    same = store.upsert_cue(Cue(name="  cursor   PAGINATION ", cue_type="keyword"))
    assert (same.id, same.name, same.cue_type) == (a.id, "cursor-pagination", "concept")
    assert same.embedding == [0.5] * DIMS
    with pytest.raises(ValueError):
        store.upsert_cue(Cue(name="   "))
    b, c = store.upsert_cue(Cue(name="postgres")), store.upsert_cue(Cue(name="api"))
    for eid, cues in {"e1": (a, b, c), "e2": (a, b), "e3": (a,)}.items():
        for cue in cues:
            store.link_cue(eid, cue.id)
    store.link_cue("e1", a.id)  # idempotent
    store.link_cue("missing", a.id)  # ignored
    assert store.stats().cue_links == 6
    hits = store.engrams_by_cues(["api", "Postgres", "cursor pagination", "unknown"], 10)
    assert [(h.engram_id, h.cues) for h in hits] == [
        ("e1", ("api", "postgres", "cursor-pagination")),
        ("e2", ("postgres", "cursor-pagination")),
        ("e3", ("cursor-pagination",)),
    ]
    assert len(store.engrams_by_cues(["cursor-pagination"], 2)) == 2
    assert store.cue_engram_counts(["cursor-pagination", "api", "nope"]) == {"cursor-pagination": 3, "api": 1}
    assert [x.name for x in store.cues_of(["e2", "e9"])["e2"]] == ["cursor-pagination", "postgres"]

    store.add_cooccurrence("postgres", "api")
    store.add_cooccurrence("api", "postgres", 0.5)  # same pair the other way round: one edge
    store.add_cooccurrence("new one", "api", 2.0)  # creates the missing cue
    assert cooccurrences(store) == {("postgres", "api"): 1.5, ("new-one", "api"): 2.0}
    store.add_cooccurrence("api", "postgres", 7.0, replace=True)
    assert cooccurrences(store)[("postgres", "api")] == 7.0

    fact = Relation("Database Engineer", "recommends", "cursor-pagination", engram_id="e2", created_at=T0)
    store.add_relation(fact)
    store.add_relation(fact)  # idempotent
    expected = Relation("database-engineer", "recommends", "cursor-pagination", "e2", T0)
    assert store.relations_of(["e2"]) == [expected]
    assert store.relations_of(["e1"]) == []

    store.associate(Association("e1", "e2", 0.4, created_at=T0))
    store.associate(Association("e2", "e1", 0.9))  # either direction: strengthen, not duplicate
    store.associate(Association("e1", "e2", 0.2))  # weaker: kept at the max
    store.associate(Association("e3", "e1", 0.3, relation_type="same_source", created_at=T0))
    store.associate(Association("e1", "e1", 1.0))
    store.associate(Association("e1", "ghost", 1.0))
    assert [(x.source_id, x.target_id, x.strength) for x in store.all_associations()] == [
        ("e1", "e2", 0.9),
        ("e3", "e1", 0.3),
    ]
    assert {(x.source_id, x.target_id) for x in store.neighbours(["e1"])} == {("e1", "e2"), ("e3", "e1")}
    assert store.neighbours(["e2"])[0].created_at == T0

    assert store.delete_engram("e2")
    assert [(x.source_id, x.target_id) for x in store.neighbours(["e1"])] == [("e3", "e1")]
    assert store.relations_of(["e2"]) == []  # the facts a forgotten memory recorded go with it
    assert store.stats().cue_links == 4
    assert store.cue_engram_counts(["new one"]) == {"new one": 0}
    assert store.delete_orphan_cues() == 2  # new-one and database-engineer encode nothing
    assert store.stats().cues == 3
    assert store.cue_engram_counts(["new one", "api"]) == {"api": 1}  # the name map forgot it


def test_opens_an_old_schema_file_and_migrates_it_once(settings: Settings, caplog) -> None:
    import kuzu

    path = settings.storage_location / "alice" / "memory.kuzu"
    path.parent.mkdir(parents=True)
    db = kuzu.Database(str(path))
    conn = kuzu.Connection(db)
    conn.execute(
        "CREATE NODE TABLE Engram(id STRING, content STRING, summary STRING, memory_type STRING, "
        "importance DOUBLE, access_count INT64, created_at TIMESTAMP, last_accessed_at TIMESTAMP, "
        f"decay_factor DOUBLE, embedding FLOAT[{DIMS}], source STRING, tags STRING, PRIMARY KEY (id))"
    )
    conn.execute(
        f"CREATE NODE TABLE Cue(id STRING, name STRING, cue_type STRING, embedding FLOAT[{DIMS}], "
        "PRIMARY KEY (id))"
    )
    conn.execute("CREATE REL TABLE EncodedBy(FROM Engram TO Cue)")
    conn.execute(
        "CREATE REL TABLE AssociatedWith(FROM Engram TO Engram, strength DOUBLE, relation_type STRING)"
    )
    for eid in ("old-1", "old-2"):
        conn.execute(
            "CREATE (:Engram {id: $id, content: 'from the Go server', summary: '', memory_type: 'semantic', "
            "importance: 0.6, access_count: 2, created_at: $t, last_accessed_at: $t, decay_factor: 0.8, "
            "embedding: $v, source: 'go', tags: 'legacy'})",
            {"id": eid, "t": datetime(2024, 5, 6, 7, 8, 9), "v": [0.25] * DIMS},
        )
    conn.execute(
        "MATCH (a:Engram {id: 'old-1'}), (b:Engram {id: 'old-2'}) "
        "CREATE (a)-[:AssociatedWith {strength: 0.7, relation_type: 'similar'}]->(b)"
    )
    conn.close()
    db.close()

    with caplog.at_level(logging.INFO, logger="smriti.stores.kuzu"):
        store = open_kuzu(settings, "alice")
    migrated = [r.getMessage() for r in caplog.records if "migration" in r.getMessage()]
    assert any("Engram.cluster_id" in m for m in migrated) and any("Meta" in m for m in migrated)
    old = store.get_engram("old-1")
    assert (old.cluster_id, old.importance, old.tags) == (-1, 0.6, "legacy")
    assert old.content == "from the Go server"
    assert old.created_at == datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert store.get_meta("schema_version") == "2" and store.get_meta("embedding_dims") == str(DIMS)
    assert store.all_associations()[0].created_at.year == 1970  # the added column had no value
    store.update_engram("old-1", cluster_id=4)
    store.add_cooccurrence("legacy", "go")  # tables added by the migration work
    store.close()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="smriti.stores.kuzu"):
        again = open_kuzu(settings, "alice")
    assert not [r for r in caplog.records if "migration" in r.getMessage()]
    assert again.get_engram("old-1").cluster_id == 4  # a second open did not reset anything
    assert again.stats().engrams == 2
    again.close()


def test_indexes_are_built_lazily_and_agree_with_brute_force(settings: Settings) -> None:
    indexed = open_kuzu(settings, "alice", exact_search_limit=0)  # always query the HNSW index
    plain = open_kuzu(settings, "bob", use_extensions=False)
    try:
        matrix = unit_vectors(200, seed=11)
        types = ["episodic", "semantic", "procedural"]
        fruit = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape"]

        def add(i: int) -> None:
            for store in (indexed, plain):
                store.create_engram(
                    Engram(
                        id=f"v{i:03d}",
                        content=f"note {i} on {fruit[i % 7]}",
                        memory_type=types[i % 3],
                        embedding=matrix[i].tolist(),
                    )
                )

        for i in range(10):
            add(i)
        assert indexed.ensure_indexes(10) == {"vector_index": False, "fulltext_index": False}
        add(10)
        assert indexed.ensure_indexes(10) == {"vector_index": True, "fulltext_index": True}
        assert indexed.ensure_indexes(10) == {"vector_index": True, "fulltext_index": True}  # idempotent
        assert indexed.get_meta("vector_index") == "true" and indexed.stats().fulltext_index
        for i in range(11, 200):
            add(i)
        queries = unit_vectors(10, seed=12)
        for query in queries:
            want = plain.vector_search(query.tolist(), 5)
            got = indexed.vector_search(query.tolist(), 5)
            assert [h.id for h in got] == [h.id for h in want]
            assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-4)
            for memory_type in ("semantic", "unknown-type"):
                assert [h.id for h in indexed.vector_search(query.tolist(), 3, memory_type)] == [
                    h.id for h in plain.vector_search(query.tolist(), 3, memory_type)
                ]
        # The FTS index follows inserts, content updates and deletes.
        from_index = indexed.fulltext_search("damson", 50)
        assert {h.id for h in from_index} == {h.id for h in plain.fulltext_search("damson", 50)}
        assert len(from_index) == 29 and from_index[0].score == 1.0
        indexed.create_engram(Engram(id="z", content="zanzibar spice trade", embedding=matrix[0].tolist()))
        assert [h.id for h in indexed.fulltext_search("zanzibar", 5)] == ["z"]
        indexed.update_engram("v001", content="a quokka on rottnest")
        assert [h.id for h in indexed.fulltext_search("quokka", 5)] == ["v001"]
        indexed.delete_engram("z")
        assert indexed.fulltext_search("zanzibar", 5) == []
        assert indexed.vector_search(matrix[0].tolist(), 1)[0].id == "v000"  # HNSW dropped the twin
    finally:
        indexed.close()
        plain.close()
    reopened = open_kuzu(settings, "alice", exact_search_limit=0)
    assert reopened.stats().vector_index is True  # read back from the file, not rebuilt
    reopened.close()


def test_users_are_isolated(settings: Settings) -> None:
    alice, bob = open_kuzu(settings, "alice"), open_kuzu(settings, "bob")
    try:
        alice.create_engram(Engram(id="secret", content="alice's secret plan", embedding=[1.0] * DIMS))
        assert alice.path != bob.path and alice.path.parent.name == "alice"
        assert bob.get_engram("secret") is None and bob.count_engrams() == 0
        assert bob.vector_search([1.0] * DIMS, 5) == [] and bob.fulltext_search("secret", 5) == []
        assert [h.id for h in alice.vector_search([1.0] * DIMS, 5)] == ["secret"]
    finally:
        alice.close()
        bob.close()


@pytest.mark.parametrize("name", ["", "/abs", "a/b", "..", "../x", "a\\b", "x" * 65, "with space", "quote'"])
def test_refuses_unsafe_user_names_before_touching_disk(settings: Settings, name: str) -> None:
    with pytest.raises(UnsafeUserError):
        open_kuzu(settings, name)
    assert not settings.storage_location.exists()


def test_refuses_a_user_folder_that_links_outside(settings: Settings, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    settings.storage_location.mkdir(parents=True)
    (settings.storage_location / "mallory").symlink_to(outside)
    with pytest.raises(UnsafeUserError, match="outside"):
        open_kuzu(settings, "mallory")
    assert list(outside.iterdir()) == []


def test_a_file_held_by_another_process_is_a_clear_error(settings: Settings) -> None:
    path = settings.storage_location / "alice" / "memory.kuzu"
    path.parent.mkdir(parents=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import kuzu, sys, time; db = kuzu.Database(sys.argv[1]); "
            "c = kuzu.Connection(db); print('ready', flush=True); time.sleep(60)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreError, match=r"memory\.kuzu is locked by another process .*'alice'"):
            open_kuzu(settings, "alice")
    finally:
        holder.kill()
        holder.wait()
    open_kuzu(settings, "alice").close()  # free again once the holder is gone


def test_another_embedding_dimension_is_refused_with_a_way_out(settings: Settings) -> None:
    store = open_kuzu(settings, "alice")
    with pytest.raises(EmbeddingMismatchError):
        store.set_meta("embedding_dims", "1536")  # e.g. an import from a 1536-dim store
    store.close()
    with pytest.raises(EmbeddingMismatchError) as caught:
        open_kuzu(settings.model_copy(update={"embedding_dims": 32}), "alice")
    message = str(caught.value)
    assert "64" in message and "32" in message and "export" in message and "store" in message
    assert "import copies" in message
    open_kuzu(settings, "alice").close()  # the failed open released the file


def test_export_then_import_gives_identical_records(settings: Settings) -> None:
    source, target = open_kuzu(settings, "alice"), open_kuzu(settings, "bob")
    try:
        vectors = unit_vectors(3, seed=3)
        source.create_engram(
            Engram(
                id="a",
                content="alpha",
                embedding=vectors[0].tolist(),
                cluster_id=1,
                created_at=T0,
                last_accessed_at=T0,
                tags="t1",
            )
        )
        source.create_engram(Engram(id="b", content="beta", memory_type="procedural", created_at=T0))
        cue = source.upsert_cue(Cue(name="Alpha Cue", cue_type="concept", embedding=vectors[1].tolist()))
        source.link_cue("a", cue.id)
        source.link_cue("b", source.upsert_cue(Cue(name="beta")).id)
        source.associate(Association("a", "b", 0.8, created_at=T0))
        source.add_cooccurrence("alpha-cue", "beta", 3.0)
        source.add_relation(Relation("alpha-cue", "precedes", "beta", engram_id="a", created_at=T0))
        source.set_meta("leiden_resolution", "0.75")
        exported = list(source.export_records())
        assert [r["kind"] for r in exported] == sorted(
            (r["kind"] for r in exported),
            key=["meta", "engram", "cue", "encoded_by", "associated_with", "co_occurs", "relates_to"].index,
        )
        assert import_into(target, exported) == len(exported)
        assert list(target.export_records()) == exported
        import_into(target, exported)  # idempotent
        assert list(target.export_records()) == exported
        json.dumps(exported)  # JSON-ready
    finally:
        source.close()
        target.close()


def test_close_is_idempotent_and_final(settings: Settings) -> None:
    store = open_kuzu(settings, "alice")
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.get_engram("x")


def test_kuzu_and_ladybug_never_share_a_process(store: KuzuStore, settings: Settings) -> None:
    with pytest.raises(StoreError, match="clash"):
        open_ladybug(settings, "alice")
    assert "ladybug._lbug" not in sys.modules
