"""A purpose-built upstream gateway for the forwarder's tests (an ASGI app to serve with
`gatecell.local.embedded.run_in_thread`)."""

from __future__ import annotations

import asyncio
import json
import threading

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

UPSTREAM_KEY = "sk-upstream-secret-0123456789"


class Neutral:
    """A purpose-built upstream: one remote chat model whose stream waits at a gate."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.seen_auth: list[str] = []
        self.bodies: list[bytes] = []  # as they arrived
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.chat, methods=["POST"]),
                Route("/v1/models", self.models, methods=["GET"]),
                Route("/v1/videos/{id}", self.video, methods=["GET"]),
                Route("/v1/embeddings", self.embeddings, methods=["POST"]),
                Route("/v1/rerank", self.rerank, methods=["POST"]),
            ]
        )

    async def _arrived(self, request: Request) -> bytes:
        """The body, kept as it arrived with the key it came with."""
        self.seen_auth.append(request.headers.get("authorization", ""))
        self.bodies.append(await request.body())
        return self.bodies[-1]

    async def chat(self, request: Request):
        await self._arrived(request)
        if request.headers.get("authorization") != f"Bearer {UPSTREAM_KEY}":
            return JSONResponse({"error": {"message": "bad upstream key"}}, status_code=401)
        body = await request.json()
        if body["model"] == "remote-busy":
            return JSONResponse(
                {"error": {"message": "slow down", "type": "rate_limit"}}, 429, headers={"retry-after": "3"}
            )
        if not body.get("stream"):
            message = {"role": "assistant", "content": f"remote says {body['messages'][-1]['content']}"}
            return JSONResponse(
                {
                    "id": "r1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4},
                }
            )

        async def events():
            for i, word in enumerate(["first", " second", " third"]):
                if i == 1:  # hold the rest until the test has seen the first piece
                    for _ in range(1000):
                        if self.gate.is_set():
                            break
                        await asyncio.sleep(0.01)
                chunk = {
                    "id": "r2",
                    "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": None}],
                }
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    async def models(self, request: Request):
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": "remote-chat", "object": "model", "created": 1, "owned_by": "neutral"}],
            }
        )

    async def embeddings(self, request: Request):
        """One fixed vector per input: [number of the input's characters, 1]."""
        body = json.loads(await self._arrived(request))
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        data = [{"object": "embedding", "index": i, "embedding": [len(t), 1.0]} for i, t in enumerate(texts)]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return JSONResponse({"object": "list", "data": data, "model": body["model"], "usage": usage})

    async def rerank(self, request: Request):
        """The documents in reverse order, scores falling from 1."""
        n = len(json.loads(await self._arrived(request))["documents"])
        results = [{"index": n - 1 - i, "relevance_score": 1 - i / n} for i in range(n)]
        return JSONResponse({"results": results})

    async def video(self, request: Request):
        return JSONResponse(
            {"id": request.path_params["id"], "object": "video", "status": "in_progress", "progress": 50}
        )
