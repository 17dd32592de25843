"""A local OpenAI-compatible ``/v1/embeddings`` endpoint over any LangChain embedder (bench only).

The MCP benchmarks run ``smriti-mcp`` as users do, with ``EMBEDDING_PROVIDER=openai`` pointed
here, so the server's real embedding client (``langchain-openai`` over HTTP) is on the measured
path while the vectors are all-MiniLM-L6-v2's (``providers/minilm.py``), which no package can serve
on these machines.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class EmbeddingServer:
    """Serve ``embedder`` at ``base_url + "/embeddings"`` from a background thread."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.lock = threading.Lock()  # the numpy model and its cache are not thread-safe
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                with server.lock:
                    vectors = server.embedder.embed_documents([str(text) for text in inputs])
                data = [
                    {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
                    for i, v in enumerate(vectors)
                ]
                usage = {"prompt_tokens": 0, "total_tokens": 0}
                payload = {"object": "list", "data": data, "model": body.get("model"), "usage": usage}
                answer = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()
