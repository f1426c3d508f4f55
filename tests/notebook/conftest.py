"""Fixtures of the notebook tests: a real IPython shell with gatecell loaded, and a fault server.

The fault server is a plain HTTP server on loopback that answers the way real gateways
fail: an error status with the gateway's message (echoing the key, as some do), a stream
cut mid-way, a slow endless stream to interrupt. It counts the requests it gets, so a
test can prove that a bad option sent nothing.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

FAULT_KEY = "sk-fault-" + "k3y" * 8


class FaultServer(ThreadingHTTPServer):
    daemon_threads = True
    mode = "error429"
    key = FAULT_KEY  # what its errors echo back, as some gateways do
    requests: list[tuple[str, str, dict[str, Any]]]
    models: list[dict[str, Any]] = [{"id": "fault-chat", "object": "model", "owned_by": "faults"}]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: FaultServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, body: Any, **headers: str) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.server.requests.append(("GET", self.path, {}))
        self._json(200, {"object": "list", "data": self.server.models})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.requests.append(("POST", self.path, body))
        mode = self.server.mode
        if mode == "error429":
            message = f"rate limit reached for key {FAULT_KEY}; try again later"
            self._json(
                429,
                {"error": {"message": message, "type": "rate_limit", "code": "429"}},
                **{"Retry-After": "0"},
            )
        elif mode == "error400":
            self._json(
                400,
                {"error": {"message": "context too long for this model", "type": "invalid_request_error"}},
            )
        elif mode == "text_only":  # a model that refuses pictures, worded as providers word it
            message = "Invalid content type. image_url is only supported by certain models."
            self._json(400, {"error": {"message": message, "type": "invalid_request_error", "code": None}})
        elif mode == "unknown_model":
            self._json(
                404, {"error": {"message": f"model {body.get('model')!r} not found", "type": "not_found"}}
            )
        elif mode == "stars_in_words":  # a typed answer with a number written in words, every time
            value = {"sentiment": "positive", "product": "Acme kettle", "stars": "five"}
            message = {"role": "assistant", "content": json.dumps(value)}
            self._json(
                200, {"id": "c1", "model": "fault-chat", "choices": [{"index": 0, "message": message}]}
            )
        elif mode in ("cut", "slow"):
            self._stream(cut_after=5 if mode == "cut" else None)

    def _stream(self, cut_after: int | None) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        deadline = time.monotonic() + 60
        i = 0
        while time.monotonic() < deadline:
            chunk = {
                "id": "c1",
                "object": "chat.completion.chunk",
                "model": "fault-chat",
                "choices": [{"index": 0, "delta": {"content": f"word{i} "}}],
            }
            event = f"data: {json.dumps(chunk)}\n\n".encode()
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            except OSError:
                return
            i += 1
            if cut_after is not None and i >= cut_after:
                self.connection.shutdown(socket.SHUT_RDWR)  # no [DONE], no final chunk: a cut
                return
            time.sleep(0.02)


@pytest.fixture(scope="session")
def fault_server():
    server = FaultServer(("127.0.0.1", 0), _Handler)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


class Recorder:
    """An ASGI wrapper that keeps the body of every request its app answers, in order."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, bytes]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        chunks: list[bytes] = []
        kept = False

        async def receive_and_keep() -> Any:
            # Kept once the body is whole, before the app can answer: a test that reads
            # `requests` as soon as its answer came finds the request there.
            nonlocal kept
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body") and not kept:
                kept = True
                self.requests.append((scope["method"], scope["path"], b"".join(chunks)))
            return message

        try:
            await self.app(scope, receive_and_keep, send)
        finally:
            if not kept:  # an app that never read the body
                self.requests.append((scope["method"], scope["path"], b"".join(chunks)))

    def prompts(self) -> list[str]:
        """The last user message of every conversation request, oldest first."""
        found = []
        for _, path, body in self.requests:
            if path.endswith(("/chat/completions", "/responses")):
                sent = json.loads(body)
                messages = sent.get("messages") or [{"content": sent.get("input")}]
                found.append(messages[-1]["content"])
        return found


@pytest.fixture(scope="session")
def recording_gateway():
    """A local gateway of its own that records what it is sent (``.recorder``): what left a
    notebook is checked where it arrives."""
    from types import SimpleNamespace

    from gatecell.local.app import create_app
    from gatecell.local.config import Config
    from gatecell.local.embedded import run_in_thread

    config = Config.create(pace=0)
    recorder = Recorder(create_app(config))
    base_url, stop = run_in_thread(recorder)
    yield SimpleNamespace(base_url=base_url, api_key=config.api_keys[0], recorder=recorder)
    stop()


@pytest.fixture
def gc(ipshell, local_gateway, monkeypatch, tmp_path):
    """The loaded extension pointed at the local gateway, with fresh memory and rich output."""
    from gatecell.notebook import _STATE

    magics = _STATE[id(ipshell)]["magics"]
    config = magics.session.config
    monkeypatch.setenv("GATECELL_API_KEY", local_gateway.api_key.reveal())
    monkeypatch.chdir(tmp_path)
    config.base_url = local_gateway.base_url
    config.output = "rich"
    config.footer = False
    config.debug = False
    magics.session.memory.reset()
    magics.session.disconnect()
    yield magics
    config.base_url = ""
    magics.session.disconnect()


@pytest.fixture
def run(gc, cell_runner):
    """``run(code)`` runs a cell in the shell pointed at the local gateway."""
    return cell_runner
