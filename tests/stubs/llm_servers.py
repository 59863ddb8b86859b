"""Local HTTP stub servers that speak the LLM vendors' chat APIs, for tests with the real SDKs.

Each :class:`LLMStubServer` listens on 127.0.0.1 (a free port, stdlib ``http.server`` in a
thread) and answers one vendor's route:

* ``anthropic`` — ``POST /v1/messages`` (``x-api-key`` or ``Authorization: Bearer``);
* ``openai`` — ``POST /v1/chat/completions`` (``Authorization: Bearer``);
* ``azure`` — ``POST /openai/deployments/{deployment}/chat/completions?api-version=...`` (``api-key``);
* ``gemini`` — ``POST /v1beta/openai/chat/completions`` (``Authorization: Bearer``).

Replies are scripted: queued :class:`StubResponse` objects are served first (status, raw or JSON
body, headers, delay), then the ``reply`` callable decides (text or a StubResponse). Every request
is recorded (path, query, headers, parsed JSON body) for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["LLMStubServer", "RecordedRequest", "StubResponse", "is_formula_request", "success_body"]

VENDORS = ("anthropic", "openai", "azure", "gemini")


@dataclass
class StubResponse:
    """One scripted reply. ``text`` builds a vendor-shaped success; ``body`` is sent as is."""

    status: int = 200
    text: str | None = None
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class RecordedRequest:
    """What the stub received."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    raw_body: bytes
    json: Any


def is_formula_request(request: RecordedRequest) -> bool:
    """True when the request asks for schema-locked JSON (the formula translation)."""
    body = request.json if isinstance(request.json, dict) else {}
    return "response_format" in body or "output_config" in body


def success_body(vendor: str, text: str, model: str) -> dict[str, Any]:
    """A minimal successful response body in the vendor's shape."""
    if vendor == "anthropic":
        return {
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def error_body(vendor: str, status: int) -> dict[str, Any]:
    """An error body in the vendor's shape."""
    kind = {429: "rate_limit_error", 401: "authentication_error"}.get(status, "api_error")
    if vendor == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": f"stub error {status}"}}
    return {"error": {"message": f"stub error {status}", "type": kind, "code": str(status)}}


class LLMStubServer:
    """A scriptable vendor API on 127.0.0.1; use as a context manager."""

    def __init__(
        self,
        vendor: str,
        *,
        reply: Callable[[RecordedRequest], str | StubResponse] | None = None,
        api_key: str | None = None,
        deployment: str = "stub-deployment",
    ) -> None:
        if vendor not in VENDORS:
            raise ValueError(f"unknown vendor {vendor!r}")
        self.vendor = vendor
        self.reply = reply or (lambda request: "1. Stub reasoning step")
        self.api_key = api_key
        self.deployment = deployment
        self.requests: list[RecordedRequest] = []
        self._queue: deque[StubResponse] = deque()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # Lifecycle --------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The base URL to give the vendor's SDK (or the env variable)."""
        return {
            "anthropic": self.origin,
            "openai": f"{self.origin}/v1",
            "azure": self.origin,
            "gemini": f"{self.origin}/v1beta/openai/",
        }[self.vendor]

    def start(self) -> LLMStubServer:
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LLMStubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # Scripting --------------------------------------------------------------------------------

    def enqueue(self, *responses: StubResponse | str) -> None:
        """Serve these replies (in order) before falling back to ``reply``."""
        with self._lock:
            for response in responses:
                self._queue.append(StubResponse(text=response) if isinstance(response, str) else response)

    def _next(self, request: RecordedRequest) -> StubResponse:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        answer = self.reply(request)
        return StubResponse(text=answer) if isinstance(answer, str) else answer

    def _route_ok(self, request: RecordedRequest) -> bool:
        path = request.path
        if self.vendor == "anthropic":
            return path == "/v1/messages"
        if self.vendor == "openai":
            return path == "/v1/chat/completions"
        if self.vendor == "gemini":
            return path == "/v1beta/openai/chat/completions"
        return path.startswith("/openai/deployments/") and path.endswith("/chat/completions")

    def _auth_ok(self, request: RecordedRequest) -> bool:
        headers = request.headers
        bearer = headers.get("authorization", "")
        supplied = bearer.removeprefix("Bearer ") if bearer.startswith("Bearer ") else None
        if self.vendor == "anthropic":
            supplied = headers.get("x-api-key") or supplied  # the 2.x SDK sends a Bearer token
        elif self.vendor == "azure":
            supplied = headers.get("api-key")
        if not supplied:
            return False
        return self.api_key is None or supplied == self.api_key

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # silence stderr
                return

            def do_POST(self) -> None:
                split = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    parsed = json.loads(raw) if raw else None
                except ValueError:
                    parsed = None
                request = RecordedRequest(
                    method="POST",
                    path=split.path,
                    query=parse_qs(split.query),
                    headers={k.lower(): v for k, v in self.headers.items()},
                    raw_body=raw,
                    json=parsed,
                )
                with stub._lock:
                    stub.requests.append(request)
                if not stub._route_ok(request):
                    self._send(404, error_body(stub.vendor, 404), {})
                    return
                if stub.vendor == "azure" and "api-version" not in request.query:
                    self._send(400, error_body(stub.vendor, 400), {})
                    return
                if not stub._auth_ok(request):
                    self._send(401, error_body(stub.vendor, 401), {})
                    return
                scripted = stub._next(request)
                if scripted.delay:
                    time.sleep(scripted.delay)
                model = str((parsed or {}).get("model", "stub-model")) if isinstance(parsed, dict) else "stub"
                if scripted.body is not None:
                    body: Any = scripted.body
                elif scripted.text is not None and scripted.status < 400:
                    body = success_body(stub.vendor, scripted.text, model)
                else:
                    body = error_body(stub.vendor, scripted.status)
                self._send(scripted.status, body, scripted.headers)

            def _send(self, status: int, body: Any, headers: dict[str, str]) -> None:
                headers = dict(headers)
                if isinstance(body, bytes):
                    payload = body
                elif isinstance(body, str):
                    payload = body.encode("utf-8")
                else:
                    payload = json.dumps(body).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("content-type", headers.pop("content-type", "application/json"))
                    self.send_header("content-length", str(len(payload)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (timeout tests)

        return Handler
