"""A local OpenAI-compatible HTTP endpoint for tests: /v1/chat/completions and /v1/embeddings.

The real ``langchain-openai`` clients talk to it over HTTP, so the request/response path
users take with OpenAI, Ollama or vLLM is exercised; only the model's answers are scripted.

A chat reply is a string (200, that text as the assistant's message) or a :class:`Reply`,
which can answer slowly, hang (until the stub closes), fail with any status (a 500, a 429
with ``Retry-After``) or send a body that is not JSON. ``python -m tests.openai_stub`` serves
one from the command line for a server in another process (the benchmark, the kill -9 test).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from smriti.providers.hashing import HashingEmbeddings


@dataclass
class Reply:
    """A scripted chat answer: ``content`` as the message (status 200), or an HTTP error."""

    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering
    hang: bool = False  # never answer (until the stub closes)
    raw: bytes | None = None  # a body sent as is (not JSON)


ChatReply = Callable[[str], "str | Reply"]


class OpenAIStub:
    """Serve scripted chat answers and hashing embeddings; records every request."""

    def __init__(self, chat_reply: ChatReply, dims: int = 64, delay: float = 0.0) -> None:
        self.chat_reply = chat_reply
        self.embedder = HashingEmbeddings(dims)
        self.delay = delay
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.chat_times: list[float] = []  # time.monotonic() of each chat request
        self.closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> OpenAIStub:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()  # hanging handlers return
        self._server.shutdown()
        self._server.server_close()

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def _answer(self, path: str, body: dict[str, Any], reply: Reply | None = None) -> dict[str, Any]:
        if path.endswith("/embeddings"):
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = self.embedder.embed_documents([str(text) for text in inputs])
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
            return {"object": "list", "data": data, "model": body.get("model"), "usage": _usage()}
        message = {"role": "assistant", "content": reply.content if reply is not None else ""}
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
                reply: Reply | None = None
                if self.path.endswith("/chat/completions"):
                    stub.chat_times.append(time.monotonic())
                    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                    answer = stub.chat_reply(prompt)
                    reply = answer if isinstance(answer, Reply) else Reply(answer)
                    if reply.hang:
                        stub.closing.wait()
                        return
                    if reply.delay:
                        stub.closing.wait(reply.delay)
                status, headers = 200, {}
                if reply is not None and reply.raw is not None:
                    payload = reply.raw
                elif reply is not None and reply.status != 200:
                    status, headers = reply.status, reply.headers
                    error = {"message": reply.content or "scripted failure", "type": "stub_error"}
                    payload = json.dumps({"error": error}).encode()
                else:
                    payload = json.dumps(stub._answer(self.path, body, reply)).encode()
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client timed out first
                    pass

            def log_message(self, *args: object) -> None:  # keep test output quiet
                pass

        return Handler


def queued_llm_settings(settings: Any, stub: OpenAIStub, **extra: Any) -> Any:
    """``settings`` with the stub as the chat model and a queue fast enough for tests."""
    return settings.model_copy(
        update={
            "llm_provider": "openai",
            "llm_base_url": stub.base_url,
            "llm_api_key": "sk-test",
            "llm_timeout": 5.0,
            "analysis_backoff_seconds": 0.05,
            "analysis_backoff_max_seconds": 0.2,
            "analysis_rate_per_minute": 0,
            **extra,
        }
    )


def _usage() -> dict[str, int]:
    return {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}


def main() -> None:
    """Serve a stub until killed: ``python -m tests.openai_stub --delay 2 --dims 64``; prints its
    base URL on the first line of stdout. Chat answers are ANALYSIS JSON naming the heuristic cues."""
    import argparse
    import sys

    from smriti.providers import heuristic

    parser = argparse.ArgumentParser()
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each chat answer")
    parser.add_argument("--hang", action="store_true", help="never answer chat requests")
    parser.add_argument("--dims", type=int, default=64)
    args = parser.parse_args()

    def reply(prompt: str) -> Reply:
        memory = prompt.split("Memory:\n", 1)[-1].split("\n\nEarlier memories", 1)[0]
        analysis = heuristic.analyze_offline(memory).model_dump()
        analysis["summary"] = "LLM: " + analysis["summary"]
        return Reply(json.dumps(analysis), delay=args.delay, hang=args.hang)

    with OpenAIStub(reply, dims=args.dims) as stub:
        print(stub.base_url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            sys.exit(0)


if __name__ == "__main__":
    main()
