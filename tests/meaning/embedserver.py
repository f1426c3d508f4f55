"""`EmbedServer`: an embeddings gateway on loopback for the meaning tests, which counts what
it sees and misbehaves on request (a module of its own, so tests and benchmarks import it).

Vectors are made from the words of each input: every word (lower case, letters and digits)
adds 1 to the coordinate its hash picks, and the vector is L2-normalised. So texts that share
words are near, texts that share none are orthogonal, and a test can compute every score
itself (`vector`)."""

from __future__ import annotations

import base64
import collections
import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

KEY = "sk-meaning-test-0123456789abcdef"
DIMENSIONS = 64
_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def vector(text: str, dimensions: int = DIMENSIONS) -> np.ndarray:
    """The server's vector of ``text``."""
    out = np.zeros(dimensions, dtype=np.float32)
    for word in words(text):
        out[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little") % dimensions] += 1.0
    norm = float(np.linalg.norm(out))
    return out / norm if norm else out


@dataclass(eq=False)
class EmbedServer:
    """``/v1/embeddings`` (base64 when asked, unless ``floats_only``; ``data`` in reverse order,
    so a client must read ``index``), ``/v1/rerank`` (unless ``rerank=False``: 404), and
    ``/v1/chat/completions`` answering a theme as JSON (``{"name", "description"}``: the most
    common word of the lines starting with ``- `` in the prompt).

    Faults: ``max_inputs``: a request with more inputs answers 413; ``rate_limited``: that many
    first requests answer 429 with ``Retry-After: 0``; ``reject_dimensions``: a request naming
    ``dimensions`` answers 400; ``refuse``: a request holding one of these texts answers 400.
    Counts: ``requests`` (embedding requests), ``inputs`` (every
    input received, in order), ``statuses``, ``chats`` (chat prompts), ``reranks``."""

    floats_only: bool = False
    max_inputs: int | None = None
    rate_limited: int = 0
    reject_dimensions: bool = False
    rerank: bool = True
    cost: float | None = None
    refuse: frozenset[str] = frozenset()
    delay: float = 0.0  # seconds each embedding request is held before its answer
    requests: int = 0
    inputs: list[str] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)  # inputs per embedding request, in order
    statuses: list[int] = field(default_factory=list)
    chats: list[str] = field(default_factory=list)
    reranks: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                status, payload, headers = server.answer(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            if path == "/v1/embeddings":
                status, payload, headers = self._embeddings(body)
            elif path == "/v1/rerank" and self.rerank:
                self.reranks += 1
                status, payload, headers = 200, self._rerank(body), {}
            elif path == "/v1/chat/completions":
                status, payload, headers = 200, self._theme(body), {}
            else:
                status, payload, headers = 404, {"error": {"message": "Not Found", "type": "not_found"}}, {}
            self.statuses.append(status)
            return status, payload, headers

    def _embeddings(self, body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
        self.requests += 1
        time.sleep(self.delay)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        if self.rate_limited > 0:
            self.rate_limited -= 1
            return (
                429,
                {"error": {"message": "Rate limit reached", "type": "rate_limit"}},
                {"retry-after": "0"},
            )
        if self.max_inputs is not None and len(texts) > self.max_inputs:
            return 413, {"error": {"message": f"at most {self.max_inputs} inputs a request"}}, {}
        if self.refuse & set(texts):
            return 400, {"error": {"message": "refused by the content policy"}}, {}
        dims = body.get("dimensions")
        if dims is not None and self.reject_dimensions:
            return 400, {"error": {"message": "This model does not support specifying dimensions."}}, {}
        self.inputs.extend(texts)
        self.batches.append(len(texts))
        data = []
        for index, text in enumerate(texts):
            vec = vector(text, dims or DIMENSIONS)
            if body.get("encoding_format") == "base64" and not self.floats_only:
                embedding: Any = base64.b64encode(vec.astype("<f4").tobytes()).decode()
            else:
                embedding = [float(x) for x in vec]
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        tokens = sum(len(words(t)) for t in texts)
        headers = {"x-request-id": f"req-{self.requests}"}
        if self.cost is not None:
            headers["x-litellm-response-cost"] = str(self.cost)
        payload = {
            "object": "list",
            "data": data[::-1],
            "model": body["model"],
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return 200, payload, headers

    def _rerank(self, body: dict[str, Any]) -> Any:
        query = set(words(body["query"]))
        scores = [len(query & set(words(d))) / (len(query) or 1) for d in body["documents"]]
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: body.get("top_n") or len(scores)]
        return {
            "results": [{"index": i, "relevance_score": scores[i]} for i in order],
            "model": body["model"],
        }

    def _theme(self, body: dict[str, Any]) -> Any:
        prompt = "\n".join(
            m["content"] if isinstance(m["content"], str) else "" for m in body.get("messages", [])
        )
        self.chats.append(prompt)
        listed = [w for line in prompt.splitlines() if line.startswith("- ") for w in words(line)]
        common = collections.Counter(listed).most_common()
        name = min((w for w, c in common if c == common[0][1]), default="none") if common else "none"
        text = json.dumps({"name": name, "description": f"texts about {name}"})
        return {
            "id": "chatcmpl-theme",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", ""),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
