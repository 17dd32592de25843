"""A local OpenAI-compatible HTTP endpoint for tests: /v1/chat/completions and /v1/embeddings.

The real ``langchain-openai`` clients talk to it over HTTP, so the request/response path
users take with OpenAI, Ollama or vLLM is exercised; only the model's answers are scripted.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from smriti.providers.hashing import HashingEmbeddings

ChatReply = Callable[[str], str]


class OpenAIStub:
    """Serve scripted chat answers and hashing embeddings; records every request."""

    def __init__(self, chat_reply: ChatReply, dims: int = 64, delay: float = 0.0) -> None:
        self.chat_reply = chat_reply
        self.embedder = HashingEmbeddings(dims)
        self.delay = delay
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def _answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = self.embedder.embed_documents([str(text) for text in inputs])
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            return {"object": "list", "data": data, "model": body.get("model"), "usage": _usage()}
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        message = {"role": "assistant", "content": self.chat_reply(prompt)}
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": _usage(),
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append((self.path, body))
                if stub.delay:
                    time.sleep(stub.delay)
                payload = json.dumps(stub._answer(self.path, body)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    pass

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

        return Handler


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
