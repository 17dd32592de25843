"""Smoke test of the benchmarks: each main() on a tiny slice, into a temporary RESULTS file.

Checks the sections and tables are written and the numbers are sane, not what they are.
The LoCoMo and HotpotQA slices need the shared benchmark data (../shared/bench or SMRITI_BENCH_DATA).
"""

from __future__ import annotations

import math

import pytest

from bench.common import data_dir, write_section


def _has_locomo() -> bool:
    try:
        return (data_dir() / "locomo_public.json").is_file()
    except SystemExit:
        return False


def _has_hotpotqa() -> bool:
    try:
        return (data_dir() / "hotpotqa_500.jsonl").is_file()
    except SystemExit:
        return False


def test_write_section_replaces_only_its_own(tmp_path):
    results = tmp_path / "RESULTS.md"
    write_section("a", "A", "first", results)
    write_section("b", "B", "other", results)
    write_section("a", "A", "second", results)
    text = results.read_text()
    assert "second" in text and "first" not in text and "other" in text
    assert text.count("<!-- bench:a:start -->") == 1


@pytest.mark.skipif(not _has_locomo(), reason="LoCoMo data not found (set SMRITI_BENCH_DATA)")
def test_locomo_slice(tmp_path):
    from bench import locomo

    results = tmp_path / "RESULTS.md"
    out = locomo.main(
        ["--conversations", "1", "--max-turns", "50", "--questions", "5", "--results", str(results)]
    )
    text = results.read_text()
    assert "## LoCoMo evidence retrieval" in text and "### Recall (per question" in text
    scores = out["scores"]
    assert scores.count(locomo.SMRITI_RECALL, locomo.SCORED) >= 1
    for system in out["systems"]:
        for metric in ("R@5", "R@10", "H@5", "H@10"):
            value = scores.mean(system, locomo.SCORED, metric)
            assert 0.0 <= value <= 1.0, (system, metric, value)
        assert scores.mean(system, locomo.SCORED, "R@5") <= scores.mean(system, locomo.SCORED, "R@10")
    bm25 = "BM25 (keyword)"
    assert scores.mean(bm25, locomo.SCORED, "H@10") > 0, "BM25 should find some evidence"
    assert all(v > 0 for v in out["timing"]["store:smriti"])


@pytest.mark.skipif(not _has_locomo(), reason="LoCoMo data not found (set SMRITI_BENCH_DATA)")
def test_locomo_through_mcp_slice(tmp_path):
    """The headline benchmark's path: a real smriti-mcp over stdio, a store per turn with
    occurred_at, consolidate, a recall per question; and the embedding endpoint it can use."""
    from bench import locomo, locomo_mcp
    from bench.embedding_server import EmbeddingServer
    from smriti.providers.hashing import HashingEmbeddings

    results = tmp_path / "RESULTS.md"
    argv = ["--split", "tune", "--conversations", "1", "--max-turns", "40", "--questions", "4"]
    out = locomo_mcp.main([*argv, "--results", str(results)])
    assert "## LoCoMo through MCP, tune conversations" in results.read_text()
    scores = out["scores"]
    assert scores.count(locomo_mcp.SMRITI_MCP, locomo.SCORED) >= 1
    assert 0.0 <= scores.mean(locomo_mcp.SMRITI_MCP, locomo.SCORED, "R@10") <= 1.0
    assert len(out["timing"]["mcp:store"]) == 40 and all(v > 0 for v in out["timing"]["mcp:recall"])

    import httpx

    with EmbeddingServer(HashingEmbeddings(32)) as endpoint:
        answer = httpx.post(
            f"{endpoint.base_url}/embeddings", json={"input": ["a", "b"], "model": "m"}
        ).json()
    assert [len(d["embedding"]) for d in answer["data"]] == [32, 32]


@pytest.mark.skipif(not _has_hotpotqa(), reason="HotpotQA data not found (set SMRITI_BENCH_DATA)")
def test_hotpotqa_slice(tmp_path):
    from bench import hotpotqa

    results = tmp_path / "RESULTS.md"
    out = hotpotqa.main(["--questions", "4", "--results", str(results)])
    text = results.read_text()
    assert "## HotpotQA supporting-passage retrieval" in text and "### Recall (per question" in text
    scores = out["scores"]
    assert scores.count(hotpotqa.SMRITI_RECALL, hotpotqa.TYPES) == 4
    for system in out["systems"]:
        for k in hotpotqa.KS:
            for metric in (f"R@{k}", f"both@{k}"):
                value = scores.mean(system, hotpotqa.TYPES, metric)
                assert 0.0 <= value <= 1.0, (system, metric, value)
        assert scores.mean(system, hotpotqa.TYPES, "R@2") <= scores.mean(system, hotpotqa.TYPES, "R@10")
    assert scores.mean("BM25 (keyword)", hotpotqa.TYPES, "R@10") > 0, "BM25 should find some gold passages"
    assert all(v > 0 for v in out["timing"]["store:smriti"])


def test_normalise_evidence():
    from bench.locomo import normalise_evidence

    assert normalise_evidence(["D8:6; D9:17", "D:11:26", "D30:05", "D"]) == [
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
    ]


def test_scaling_slice(tmp_path):
    from bench import scaling

    results = tmp_path / "RESULTS.md"
    out = scaling.main(["--sizes", "100", "--stores", "2", "--queries", "2", "--results", str(results)])
    text = results.read_text()
    assert "## Scaling" in text and "numpy brute force" in text and "HNSW forced" in text
    assert out["infos"][0]["indexes"] == {"vector_index": True, "fulltext_index": True}
    for key, samples in out["timing"].items():
        assert samples and all(s > 0 and math.isfinite(s) for s in samples), key


def test_leiden_slice(tmp_path):
    from bench import leiden_bench

    results = tmp_path / "RESULTS.md"
    assert leiden_bench.main(["--sizes", "60", "--db-sizes", "60", "--results", str(results)]) == 0
    text = results.read_text()
    assert "## Leiden clustering" in text and "| 60 |" in text


@pytest.mark.skipif(
    not _has_locomo() or not _has_hotpotqa(), reason="benchmark data not found (set SMRITI_BENCH_DATA)"
)
def test_leiden_engines_slice(tmp_path):
    """Both engines on a small scale-corpus graph: timed, compared, written as a section."""
    from bench import leiden_engines

    results = tmp_path / "RESULTS.md"
    argv = ["--sizes", "400", "--repeats", "1", "--graph-cache", str(tmp_path), "--results", str(results)]
    assert leiden_engines.main(argv) == 0
    text = results.read_text()
    assert "## Leiden engines" in text and "| 400 |" in text
    assert "| leidenalg |" in text and "| igraph |" in text and "NMI between their tuned partitions" in text
    assert list(tmp_path.glob("leiden_graph_n400_*.pkl"))  # the graph is kept for the next run


def test_latency_ab_raw_client_talks_to_a_real_server(tmp_path):
    """``bench.latency_ab --client raw``: bare JSON-RPC lines to a real ``smriti-mcp``; a tool
    error comes back as ``is_error``, a protocol error raises."""
    import os
    import sys
    from pathlib import Path

    from bench.latency_ab import RawClient

    env = {
        **os.environ,
        "STORAGE_LOCATION": str(tmp_path),
        "ACCESSING_USER": "raw",
        "EMBEDDING_PROVIDER": "hashing",
        "EMBEDDING_DIMS": "64",
        "LLM_PROVIDER": "heuristic",
        "SMRITI_SHARED": "false",
        "CONSOLIDATION_INTERVAL": "0",
        "BACKUP_TYPE": "none",
    }
    with (tmp_path / "server.log").open("a") as errlog:
        client = RawClient([sys.executable, "-m", "smriti.server"], env, Path.cwd(), errlog)
        try:
            client.start()

            async def calls():
                tools = await client.list_tools()
                stored = await client.call_tool(
                    "smriti_store", {"content": "Priya moved billing to Postgres."}
                )
                found = await client.call_tool("smriti_recall", {"query": "billing Postgres", "limit": 3})
                empty = await client.call_tool("smriti_store", {"content": "   "})
                return tools, stored, found, empty

            import anyio

            tools, stored, found, empty = anyio.run(calls)
            assert {tool["name"] for tool in tools["tools"]} >= {"smriti_store", "smriti_recall"}
            assert not stored.is_error and not found.is_error
            assert "Postgres" in found.content[0]["text"]
            assert empty.is_error  # bad input: a tool error, not a broken session
            with pytest.raises(RuntimeError, match="no/such"):
                client.request("no/such", {})
        finally:
            client.close()
    assert client.process.returncode == 0
