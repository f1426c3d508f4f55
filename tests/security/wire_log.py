"""A chat gateway on loopback that keeps every request body as it arrived, for the round-three
tests (tests/security/test_round3_*.py): what left the client, byte for byte.

It answers ``/v1/chat/completions`` with ``reply`` (a text, or a function of the request
body), lists one model, and has no ``/model/info`` (so typed answers go by instruction).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import pytest
from PIL import Image
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gatecell.local.embedded import run_in_thread

KEY = "3f2a9c4b7d1e4f60a8b5c2d9e7f1a3b4"  # a hex key: only "it is this process's key" masks it


class WireLog:
    """The gateway; ``raw`` holds each request body's bytes, ``bodies`` the same decoded."""

    def __init__(self, reply: str | Callable[[dict[str, Any]], str] = "Noted.") -> None:
        self.reply = reply
        self.raw: list[bytes] = []
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )
        self.base_url, self.stop = run_in_thread(app)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.raw]

    def texts(self, index: int = -1) -> list[str]:
        """Every text the request at ``index`` carried in its messages."""
        out = []
        for message in self.bodies[index]["messages"]:
            content = message["content"]
            for part in [content] if isinstance(content, str) else content:
                if isinstance(part, str):
                    out.append(part)
                elif part.get("type") == "text":
                    out.append(part["text"])
        return out

    def parts(self, index: int = -1) -> list[str]:
        """The types of the parts of the last message of the request at ``index``."""
        content = self.bodies[index]["messages"][-1]["content"]
        return ["text"] if isinstance(content, str) else [part["type"] for part in content]

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "t"}]})

    async def _chat(self, request: Request) -> JSONResponse:
        raw = await request.body()
        self.raw.append(raw)
        body = json.loads(raw)
        text = self.reply(body) if callable(self.reply) else self.reply
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.raw)}",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "m"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
            }
        )


@pytest.fixture(name="wire")
def wire_fixture() -> Any:
    """A `WireLog` answering "Noted.", for the test (its module imports this fixture)."""
    server = WireLog()
    yield server
    server.stop()


def png_file(path: Any, size: tuple[int, int] = (40, 30), colour: str = "red") -> Any:
    """A real PNG made with Pillow at ``path``; the path."""
    Image.new("RGB", size, colour).save(path, "PNG")
    return path


def picture_bytes(fmt: str, size: tuple[int, int], colour: str = "red") -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, fmt)
    return buffer.getvalue()
