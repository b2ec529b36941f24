"""A small OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a script.

The tests and benchmarks drive the real `openai` client against it over HTTP; nothing is
monkeypatched. A *responder* maps each request body to a `Reply`: text (as a model would send it,
malformed or not), an HTTP status for failures, a delay for latency, or a raw body.

    with ScriptedServer(lambda request: Reply("<command>ls</command>")) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test")

`serial=True` computes one reply at a time, as transformers serve, Ollama and llama.cpp do with
their default slots: a reply's delay starts when the previous one is done. `/v1/models` answers
with `listed` (names or whole entries); without it, 404, as servers that do not list models.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: str = ""
    status: int = 200
    delay: float = 0.0
    reasoning: str = ""
    finish_reason: str = "stop"
    body: dict[str, Any] | None = None  # sent as-is instead of a completion
    headers: dict[str, str] = field(default_factory=dict)


Responder = Callable[[dict[str, Any]], "Reply | str"]


class ScriptedResponder:
    """What the scripted models share: their behaviours per task seed, and `calls`, the requests
    counted per (seed, prompt). Thread-safe."""

    def __init__(self, behaviours: dict[int, set[str]] | None, every: set[str] | None = None):
        self.behaviours = behaviours or {}
        self.every = every or set()
        self.calls: Counter[tuple[int, str]] = Counter()
        self._lock = threading.Lock()

    def count(self, request: dict[str, Any], kind: str) -> tuple[int, int, set[str]]:
        """The request's task seed, which call of its kind this is, and the task's flags."""
        seed = int(request.get("seed", 0))
        with self._lock:
            self.calls[(seed, kind)] += 1
            call = self.calls[(seed, kind)]
        return seed, call, self.behaviours.get(seed, set()) | self.every

    @staticmethod
    def unknown() -> Reply:
        return Reply(status=400, body={"error": {"message": "the script has no such prompt"}})


class _Server(ThreadingHTTPServer):
    # The default listen backlog (5) refuses connections when 32+ clients start at once.
    request_queue_size = 256


def approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class ScriptedServer:
    def __init__(
        self,
        responder: Responder,
        *,
        model: str = "scripted-model",
        serial: bool = False,
        listed: Sequence[str | dict[str, Any]] | None = None,
    ) -> None:
        self.responder = responder
        self.model = model
        self.listed = listed
        self._compute = threading.Lock() if serial else None
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _answer(self, request: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str], float]:
        with self._lock:
            self.requests.append(request)
        reply = self.responder(request)
        if isinstance(reply, str):
            reply = Reply(reply)
        if reply.body is not None or reply.status != 200:
            body = (
                reply.body
                if reply.body is not None
                else {
                    "error": {"message": f"scripted failure {reply.status}", "type": "server_error"}
                }
            )
            return reply.status, body, reply.headers, reply.delay
        prompt = json.dumps(request.get("messages", []))
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        tokens_in, tokens_out = (
            approx_tokens(prompt),
            approx_tokens(reply.content + reply.reasoning),
        )
        body = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": {
                "prompt_tokens": tokens_in,
                "completion_tokens": tokens_out,
                "total_tokens": tokens_in + tokens_out,
            },
        }
        return 200, body, reply.headers, reply.delay

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without TCP_NODELAY every reply waits
            # ~40 ms for the client's delayed ACK, which real servers do not make it pay.
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
                data = json.dumps(body).encode()
                # A client that gave up on the request (its timeout) has closed the connection.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models") and server.listed is not None:
                    data = [
                        {"id": m, "object": "model"} if isinstance(m, str) else m
                        for m in server.listed
                    ]
                    self._send(200, {"object": "list", "data": data}, {})
                else:
                    self._send(404, {"error": {"message": "not found"}}, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                    return
                try:
                    request = json.loads(raw or b"{}")
                except ValueError:
                    self._send(400, {"error": {"message": "invalid JSON"}}, {})
                    return
                with server._lock:
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    with server._compute or contextlib.nullcontext():
                        status, body, headers, delay = server._answer(request)
                        if delay:
                            time.sleep(delay)  # simulated model latency, not synchronisation
                    self._send(status, body, headers)
                finally:
                    with server._lock:
                        server.in_flight -= 1

        return Handler
