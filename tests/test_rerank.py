"""The optional reranker: a real HTTP rerank endpoint (Cohere and TEI shapes), its failure path,
and the cross-encoder's loading path (no model can be loaded here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from smriti.errors import ProviderError
from smriti.pipelines.recall import recall_graph
from smriti.pipelines.store import store_graph
from smriti.providers.rerank import HttpReranker, build_reranker, squash
from tests.test_server_stdio import server_command, server_env

# The reranker's "model": a document mentioning this word is what the question is about.
ANSWER_WORD = "kestrel"


class RerankStub:
    """A rerank endpoint over real HTTP: Cohere/Jina at /v1/rerank, TEI at /rerank, 500 at /broken."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body))
                if self.path == "/broken":
                    self.send_response(500)
                    self.end_headers()
                    return
                documents = body.get("documents") or body.get("texts") or []
                # logits, as cross-encoders give: high for the answer, low for the rest
                scores = [4.0 if ANSWER_WORD in doc else -4.0 for doc in documents]
                if self.path == "/rerank":
                    payload: Any = [{"index": i, "score": s} for i, s in enumerate(scores)]
                else:
                    payload = {"results": [{"index": i, "relevance_score": s} for i, s in enumerate(scores)]}
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@pytest.fixture
def stub() -> Iterator[RerankStub]:
    server = RerankStub()
    yield server
    server.server.shutdown()
    server.server.server_close()


MEMORIES = [
    "The bird on the balcony every morning is a pigeon, a bird of the city",
    "A bird of prey hovers over the motorway verge: a kestrel",
    "Bird feeders need cleaning every two weeks",
]
QUERY = "which bird of prey hovers over the motorway verge"
LOCAL_QUERY = "which bird is it every morning in the city"


def _fill(context) -> list[str]:
    return [store_graph.invoke({"content": text}, context=context)["id"] for text in MEMORIES]


def _recall(context) -> tuple[list[dict[str, Any]], dict[str, str]]:
    # The words favour the pigeon; the reranker knows better.
    out = recall_graph.invoke({"query": LOCAL_QUERY, "limit": 3, "explain": True}, context=context)
    return out["result"]["results"], {t["node"]: t["notes"] for t in out["trace"]}


@pytest.mark.parametrize(("path", "api"), [("/v1/rerank", "cohere"), ("/rerank", "tei")])
def test_the_reranker_reorders_the_top_candidates(make_context, stub, path, api):
    context = make_context()
    ids = _fill(context)
    plain, notes = _recall(context)
    assert notes["rerank"] == "no reranker"
    assert "rerank_score" not in plain[0]["components"]
    assert plain[0]["id"] != ids[1]

    settings = context.settings.model_copy(
        update={"reranker": "http", "rerank_url": stub.url(path), "rerank_api": api, "rerank_weight": 0.7}
    )
    context.settings, context.reranker = settings, build_reranker(settings)
    results, notes = _recall(context)
    assert results[0]["id"] == ids[1]  # the kestrel, whatever the pipeline's order was
    assert results[0]["components"]["rerank_score"] == pytest.approx(squash(4.0))
    assert f"http:{api} reranked 3 candidate(s)" == notes["rerank"]
    sent_path, body = stub.requests[-1]
    assert sent_path == path and body["query"] == LOCAL_QUERY
    assert sorted(body["documents" if api == "cohere" else "texts"]) == sorted(MEMORIES)


def test_a_failing_reranker_keeps_the_pipeline_order(make_context, stub):
    context = make_context()
    _fill(context)
    plain, _ = _recall(context)
    settings = context.settings.model_copy(update={"reranker": "http", "rerank_url": stub.url("/broken")})
    context.settings, context.reranker = settings, build_reranker(settings)
    results, notes = _recall(context)
    assert [r["id"] for r in results] == [r["id"] for r in plain]
    assert notes["rerank"].startswith("reranker failed, pipeline order kept")
    assert stub.requests and stub.requests[-1][0] == "/broken"


def test_unreachable_endpoint_is_a_provider_error():
    reranker = HttpReranker("http://127.0.0.1:9/rerank", "cohere", "m", None, timeout=1.0)
    with pytest.raises(ProviderError, match="rerank endpoint"):
        reranker.score("q", ["a"])


def test_reranker_settings_fail_clearly(settings):
    assert build_reranker(settings) is None  # off by default
    with pytest.raises(ProviderError, match="RERANK_URL"):
        build_reranker(settings.model_copy(update={"reranker": "http"}))
    # No cross-encoder can be loaded here: sentence-transformers is missing, or the model is not
    # in the local cache (never downloaded at run time). Either way: one clear error.
    with pytest.raises(ProviderError, match="RERANKER=cross-encoder"):
        build_reranker(settings.model_copy(update={"reranker": "cross-encoder"}))


def test_squash_keeps_probabilities_and_maps_logits():
    assert squash(0.3) == 0.3
    assert squash(4.0) == pytest.approx(0.982, abs=1e-3)
    assert squash(-4.0) == pytest.approx(0.018, abs=1e-3)
    assert squash(1e9) == pytest.approx(1.0)


def test_reranker_through_mcp(tmp_path, stub):
    command = server_command()
    env = {**server_env(tmp_path), "RERANKER": "http", "RERANK_URL": stub.url("/v1/rerank")}
    params = StdioServerParameters(command=command[0], args=command[1:], env=env)

    async def main() -> None:
        async with Client(stdio_client(params)) as client:
            ids = []
            for text in MEMORIES:
                stored = await client.call_tool("smriti_store", {"content": text})
                ids.append(stored.structured_content["id"])
            result = await client.call_tool("smriti_recall", {"query": QUERY, "explain": True})
            top = result.structured_content["results"][0]
            assert top["id"] == ids[1] and top["components"]["rerank_score"] > 0.9

    anyio.run(main)
    assert any(path == "/v1/rerank" for path, _ in stub.requests)
