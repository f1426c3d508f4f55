"""A hostile gateway on loopback, for the client's tests.

A raw asyncio HTTP/1.1 server in a background thread, so every byte is under control:
it can cut a connection mid-stream, send keep-alives for ever, split events anywhere,
or echo the key. Each request names its scenario in the path prefix,
``/s/<scenario>/<token>/...``, so a test points a client at ``base_url=/s/<scenario>/<token>``
and gets its own counters (for "fail twice, then succeed").
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from email.utils import formatdate
from typing import Any

from gatecell.wire.transport._sse import comment, encode

KEY = "sk-test-Wk3yS3cretValue0123456789abcd"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 24
MP3 = b"ID3\x03\x00\x00\x00\x00\x00\x00" + b"\xff\xfb" + b"\x00" * 30
MP4 = b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 32


@dataclass
class Request:
    method: str
    path: str  # after /s/<scenario>/<token>
    headers: dict[str, str]
    body: bytes
    scenario: str
    token: str
    count: int = 0  # how many requests this (scenario, token) has seen, this one included
    host: str = ""

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    @property
    def base(self) -> str:
        return f"http://{self.host}/s/{self.scenario}/{self.token}"


class Response:
    """Writes an HTTP/1.1 answer by hand; always ``Connection: close``."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.w = writer

    async def head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} X"] + [
            f"{k}: {v}" for k, v in {**headers, "connection": "close"}.items()
        ]
        self.w.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.w.drain()

    async def raw(
        self,
        status: int,
        body: bytes,
        content_type: str | None = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        h = {"content-length": str(len(body)), **(headers or {})}
        if content_type:
            h["content-type"] = content_type
        await self.head(status, h)
        self.w.write(body)
        await self.w.drain()

    async def json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        await self.raw(status, json.dumps(obj).encode(), headers=headers)

    async def start_sse(self, headers: dict[str, str] | None = None) -> None:
        await self.head(
            200, {"content-type": "text/event-stream", "transfer-encoding": "chunked", **(headers or {})}
        )

    async def send(self, data: bytes) -> None:
        self.w.write(b"%x\r\n%s\r\n" % (len(data), data))
        await self.w.drain()

    async def end(self) -> None:
        self.w.write(b"0\r\n\r\n")
        await self.w.drain()

    async def events(self, payloads: list[Any], done: bool = True) -> None:
        await self.start_sse()
        for p in payloads:
            await self.send(p if isinstance(p, bytes) else encode(p))
        if done:
            await self.send(b"data: [DONE]\n\n")
        await self.end()

    def abort(self) -> None:
        self.w.transport.abort()


Handler = Callable[["FaultServer", Request, Response], Awaitable[None]]


# -- a well-behaved gateway (WIRE-NOTES shapes); the hostile scenarios fall back to it --


def chunk(
    text: str | None = None, finish: str | None = None, role: bool = False, usage: dict | None = None
) -> dict:
    delta: dict[str, Any] = (
        {"role": "assistant", "content": ""} if role else ({"content": text} if text is not None else {})
    )
    choices = [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]
    c: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": choices,
    }
    if usage:
        c["usage"] = usage
    return c


USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
CHAT_STREAM = [chunk(role=True), chunk("Hello"), chunk(" world"), chunk(finish="stop"), chunk(usage=USAGE)]


def completion(model: str, text: str = "Hello world") -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "system_fingerprint": "fp_1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": "stop",
            }
        ],
        "usage": USAGE,
    }


RESPONSES_REPLY = {
    "id": "resp_1",
    "object": "response",
    "created_at": 2,
    "status": "completed",
    "model": "deep-thinker",
    "error": None,
    "output": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Thought briefly."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Forty-two."}]},
    ],
    "usage": {
        "input_tokens": 4,
        "output_tokens": 6,
        "output_tokens_details": {"reasoning_tokens": 3},
        "total_tokens": 10,
    },
}


async def ok(srv: FaultServer, req: Request, resp: Response) -> None:
    body = req.json() or {}
    path = req.path.split("?")[0]
    rid = {"x-request-id": f"req-{req.count}"}
    if path.startswith("/v1beta/") and (
        req.headers.get("x-goog-api-key") != KEY or "authorization" in req.headers
    ):
        return await resp.json(
            401, {"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}}
        )
    if (
        not path.startswith(("/v1beta/", "/files/open"))
        and req.headers.get("authorization") != f"Bearer {KEY}"
    ):
        return await resp.json(
            401, {"error": {"message": "missing or bad key", "type": "invalid_request_error"}}
        )
    if path == "/v1/chat/completions":
        if body.get("stream"):
            return await resp.events(CHAT_STREAM)
        return await resp.json(200, completion(body["model"]), rid)
    if path == "/v1/messages":
        if body.get("stream"):
            return await resp.events(
                [
                    encode(
                        {
                            "type": "message_start",
                            "message": {"id": "msg_1", "model": body["model"], "usage": {"input_tokens": 3}},
                        },
                        event="message_start",
                    ),
                    encode(
                        {
                            "type": "content_block_start",
                            "index": 0,
                            "content_block": {"type": "text", "text": ""},
                        },
                        event="content_block_start",
                    ),
                    b'event: ping\ndata: {"type": "ping"}\n\n',
                    encode(
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": "Hi"},
                        },
                        event="content_block_delta",
                    ),
                    encode(
                        {
                            "type": "content_block_delta",
                            "index": 0,
                            "delta": {"type": "text_delta", "text": " there"},
                        },
                        event="content_block_delta",
                    ),
                    encode(
                        {
                            "type": "message_delta",
                            "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": 2},
                        },
                        event="message_delta",
                    ),
                    encode({"type": "message_stop"}, event="message_stop"),
                ],
                done=False,
            )
        return await resp.json(
            200,
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "Hi there"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 3, "output_tokens": 2},
            },
        )
    if path.startswith("/v1beta/models/"):

        def gc(t: str, fin: str | None = None) -> dict:
            return {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": t}]},
                        **({"finishReason": fin} if fin else {}),
                        "index": 0,
                    }
                ],
                "modelVersion": "g-1",
            }

        if ":streamGenerateContent" in req.path:
            return await resp.events([gc("Bon"), gc("jour", "STOP")], done=False)
        return await resp.json(
            200,
            {
                **gc("Bonjour", "STOP"),
                "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 3},
            },
        )
    if path == "/v1/responses":
        if body.get("stream"):
            return await resp.events(
                [
                    encode(
                        {
                            "type": "response.created",
                            "response": {"id": "resp_1", "model": body["model"], "status": "in_progress"},
                        },
                        event="response.created",
                    ),
                    *(
                        []
                        if req.scenario == "summary-at-end"  # the summary only in the completed response
                        else [
                            encode(
                                {"type": "response.reasoning_summary_text.delta", "delta": "Thought."},
                                event="response.reasoning_summary_text.delta",
                            )
                        ]
                    ),
                    encode(
                        {"type": "response.output_text.delta", "delta": "Forty"},
                        event="response.output_text.delta",
                    ),
                    encode(
                        {"type": "response.output_text.delta", "delta": "-two."},
                        event="response.output_text.delta",
                    ),
                    encode(
                        {
                            "type": "response.completed",
                            "response": {**RESPONSES_REPLY, "model": body["model"]},
                        },
                        event="response.completed",
                    ),
                ],
                done=False,
            )
        return await resp.json(200, {**RESPONSES_REPLY, "model": body["model"]})
    if path == "/v1/images/generations":
        return await resp.json(
            200,
            {
                "created": 1,
                "data": [
                    {"b64_json": base64.b64encode(PNG).decode()},
                    {"url": f"{req.base}/files/img.png"},
                    {"url": f"http://localhost:{srv.port}/s/ok/{req.token}/files/open.png"},
                ],
            },
        )
    if path.startswith("/files/"):
        return await resp.raw(200, PNG, "application/octet-stream")
    if path == "/v1/audio/speech":
        if body.get("response_format") == "mp3":
            return await resp.raw(200, MP3, "audio/mpeg")
        return await resp.raw(200, WAV, "application/octet-stream")
    if path == "/v1/models":
        return await resp.json(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": "local-chat",
                        "object": "model",
                        "created": 1,
                        "owned_by": "me",
                        "supported_endpoints": ["/v1/chat/completions", "/v1/messages"],
                    },
                    {
                        "id": "deep-thinker",
                        "object": "model",
                        "created": 1,
                        "owned_by": "me",
                        "supported_endpoints": ["/v1/responses"],
                    },
                    {
                        "id": "typed-reasoner",
                        "object": "model",
                        "created": 1,
                        "owned_by": "me",
                        "supported_endpoint_types": ["openai-response"],
                    },
                    {"id": "plain", "object": "model", "created": 1, "owned_by": "me"},
                ],
            },
        )
    return await jobs(srv, req, resp, path, body)


async def jobs(srv: FaultServer, req: Request, resp: Response, path: str, body: dict) -> None:
    polls = srv.bump(req, path)
    if path == "/imgjob/submit/imagine":
        if body["prompt"] == "full":
            return await resp.json(200, {"code": 23, "description": "queue full", "result": None})
        return await resp.json(
            200,
            {
                "code": 1,
                "description": "submitted",
                "result": "fail-1" if body["prompt"] == "fail" else "task-1",
                "properties": {},
            },
        )
    if path.startswith("/imgjob/task/"):
        if "fail-1" in path:
            return await resp.json(
                200, {"id": "fail-1", "status": "FAILURE", "progress": "0%", "failReason": "banned prompt"}
            )
        if polls < 2:
            return await resp.json(
                200, {"id": "task-1", "status": "IN_PROGRESS", "progress": "40%", "imageUrl": ""}
            )
        return await resp.json(
            200,
            {
                "id": "task-1",
                "status": "SUCCESS",
                "progress": "100%",
                "imageUrl": f"{req.base}/files/job.png",
            },
        )
    if path == "/musicjob/submit/music":
        return await resp.json(200, {"code": "success", "message": "", "data": "m-1"})
    if path.startswith("/musicjob/fetch/"):
        if polls < 2:
            return await resp.json(
                200,
                {
                    "code": "success",
                    "data": {"task_id": "m-1", "status": "IN_PROGRESS", "progress": "50%", "data": []},
                },
            )
        return await resp.json(
            200,
            {
                "code": "success",
                "data": {
                    "task_id": "m-1",
                    "status": "SUCCESS",
                    "progress": "100%",
                    "data": [{"id": "c1", "audio_url": f"{req.base}/files/song.mp3", "title": "t"}],
                },
            },
        )
    if path == "/v1/videos" and req.method == "POST":
        return await resp.json(
            200,
            {"id": "video_1", "object": "video", "status": "queued", "progress": 0, "model": body["model"]},
        )
    if path == "/v1/videos/video_1/content":
        return await resp.raw(200, MP4, "video/mp4")
    if path == "/v1/videos/video_1":
        done = polls >= 2
        return await resp.json(
            200,
            {
                "id": "video_1",
                "object": "video",
                "status": "completed" if done else "in_progress",
                "progress": 100 if done else 50,
            },
        )
    if path == "/odd/fetch/x1":
        return await resp.json(200, {"state": "weird-state", "percent": 3})
    await resp.json(404, {"error": {"message": f"no route {req.method} {path}", "type": "not_found"}})


# -- hostile scenarios ------------------------------------------------------------------


def fail_first(n: int, status: int, headers: Callable[[], dict[str, str]] = dict) -> Handler:
    async def handler(srv: FaultServer, req: Request, resp: Response) -> None:
        if req.count <= n:
            return await resp.json(
                status, {"error": {"message": f"try again ({req.count})", "type": "transient"}}, headers()
            )
        await ok(srv, req, resp)

    return handler


async def cut(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.start_sse()
    for c in CHAT_STREAM[:3]:
        await resp.send(encode(c))
    await asyncio.sleep(0.05)
    resp.abort()


async def keepalive(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.start_sse()
    if "after" in req.scenario:
        for c in CHAT_STREAM[:2]:
            await resp.send(encode(c))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        await resp.send(comment("PING"))
        await asyncio.sleep(0.02)


async def silent(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.start_sse()
    await asyncio.sleep(20)


async def trickle(srv: FaultServer, req: Request, resp: Response) -> None:
    """A whole JSON body, a byte every 20 ms: inside every per-read timeout, never done in time."""
    await resp.head(200, {"content-type": "application/json", "transfer-encoding": "chunked"})
    for byte in json.dumps({"id": "c", "choices": []}).encode() * 50:
        await resp.send(bytes([byte]))
        await asyncio.sleep(0.02)
    await resp.end()


MALFORMED = [
    b": this is a comment\n\n",
    b"garbage line without a colon\n",
    b"dta: misspelt field\n\n",
    b"data: " + json.dumps(chunk(role=True)).encode() + b"\r\n\r",  # CR at the end of a read ...
    b"\n",  # ... and its LF in the next one
    b"data: not json at all\n\n",
    b"data: [1, 2, 3]\n\n",
    b"id: 7\nretry: 100\ndata: "
    + json.dumps(chunk("Hel")).encode()
    + b"\r\rdata: "
    + json.dumps(chunk("lo")).encode()[:10],
    json.dumps(chunk("lo")).encode()[10:] + b"\n\n",
]


async def malformed(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.start_sse()
    raw = json.dumps(chunk(" \u2028wide"), ensure_ascii=False).encode("utf-8")
    for piece in MALFORMED:
        await resp.send(piece)
    cut = raw.index("\u2028".encode()) + 1  # split the UTF-8 of U+2028 across two reads
    await resp.send(b"data: " + raw[:cut])
    await resp.send(raw[cut:] + b"\n\n")
    await resp.send(encode(chunk(finish="stop")))
    await resp.send(b"data: [DONE]\n\n")
    await resp.end()


async def stream_error(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.events(
        [
            chunk(role=True),
            chunk("Partial"),
            {"error": {"message": "upstream overloaded", "type": "server_error", "code": "overloaded"}},
        ],
        done=False,
    )


async def json_for_stream(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.json(200, completion(req.json()["model"], "Whole answer"))


async def error200(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.json(
        200,
        {
            "error": {
                "message": "no channel for model under group default",
                "type": "new_api_error",
                "code": "model_not_found",
            }
        },
        {"x-request-id": "rid-200"},
    )


async def echo_key(srv: FaultServer, req: Request, resp: Response) -> None:
    key = req.headers.get("authorization", "").removeprefix("Bearer ") or req.headers.get(
        "x-goog-api-key", ""
    )
    if (req.json() or {}).get("stream"):
        return await resp.events(
            [chunk("Hi"), {"error": {"message": f"key {key} is over quota", "type": "quota"}}], done=False
        )
    await resp.json(
        401,
        {
            "error": {
                "message": f"Incorrect API key provided: {key}. Find your key at the dashboard.",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
        {"x-request-id": "rid-echo"},
    )


async def reasoner(srv: FaultServer, req: Request, resp: Response) -> None:
    body = req.json() or {}
    if req.path == "/v1/chat/completions" and body.get("model") == "deep-thinker":
        return await resp.json(
            400,
            {
                "error": {
                    "message": "This model is only supported in v1/responses and not in v1/chat/completions.",
                    "type": "invalid_request_error",
                    "code": "unsupported_api",
                }
            },
        )
    await ok(srv, req, resp)


async def text_only(srv: FaultServer, req: Request, resp: Response) -> None:
    """A text-only model: a picture in a chat request is refused, as providers word it."""
    if b'"image_url"' in req.body:
        return await resp.json(
            400,
            {
                "error": {
                    "message": "Invalid content type. image_url is only supported by certain models.",
                    "type": "invalid_request_error",
                    "param": "messages.[0].content.[1].type",
                    "code": None,
                }
            },
        )
    await ok(srv, req, resp)


async def sse_for_plain(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.events(CHAT_STREAM)


async def not_json(srv: FaultServer, req: Request, resp: Response) -> None:
    await resp.raw(502, b"<html><body>Bad Gateway</body></html>", "text/html")


async def native_errors(srv: FaultServer, req: Request, resp: Response) -> None:
    if req.path.startswith("/v1/messages"):
        return await resp.json(
            400,
            {"type": "error", "error": {"type": "invalid_request_error", "message": "max_tokens too large"}},
        )
    await resp.json(
        404, {"error": {"code": 404, "message": "models/nope is not found", "status": "NOT_FOUND"}}
    )


def redirect(status: int, same_origin: bool) -> Handler:
    """Redirect every request to the "ok" scenario, on the same origin or on another one
    (``localhost`` instead of ``127.0.0.1``: another host, the same server)."""

    async def handler(srv: FaultServer, req: Request, resp: Response) -> None:
        host = req.host if same_origin else f"localhost:{srv.port}"
        await resp.raw(status, b"", None, {"location": f"http://{host}/s/ok/{req.token}{req.path}"})

    return handler


async def endless(srv: FaultServer, req: Request, resp: Response, head: bytes, piece: bytes) -> None:
    """``head``, then ``piece`` for ever, counting what went out, until the client hangs up."""
    await resp.head(
        200,
        {
            "content-type": "text/event-stream" if head.startswith(b"data") else "application/json",
            "transfer-encoding": "chunked",
        },
    )
    await resp.send(head)
    srv.sent[req.token] = len(head)
    while True:
        await resp.send(piece)
        srv.sent[req.token] += len(piece)
        await asyncio.sleep(0)


async def huge_json(srv: FaultServer, req: Request, resp: Response) -> None:
    """An image answer whose URL never ends (the 3,000 MiB image URL of issue 9)."""
    await endless(srv, req, resp, b'{"data": [{"url": "http://files/', b"a" * 65536)


async def huge_declared(srv: FaultServer, req: Request, resp: Response) -> None:
    """Says 10 GiB in Content-Length, then sends nothing."""
    await resp.head(200, {"content-type": "application/json", "content-length": str(10 * 2**30)})
    await asyncio.sleep(20)


async def huge_stream(srv: FaultServer, req: Request, resp: Response) -> None:
    """A chat stream of well-formed chunks that never ends."""
    await endless(srv, req, resp, encode(chunk(role=True)), encode(chunk("more text ")) * 200)


async def endless_line(srv: FaultServer, req: Request, resp: Response) -> None:
    """One SSE line that never ends."""
    await endless(srv, req, resp, b"data: " + json.dumps(chunk("x"))[:-1].encode(), b"x" * 65536)


async def compressed(srv: FaultServer, req: Request, resp: Response) -> None:
    """A gzip body although the client asked for none."""
    body = gzip.compress(json.dumps(completion("m")).encode())
    await resp.raw(200, body, headers={"content-encoding": "gzip"})


async def echo_key_header(srv: FaultServer, req: Request, resp: Response) -> None:
    """Echoes the key in response headers (as it came, and upper-cased), and in an error body."""
    key = req.headers.get("authorization", "").removeprefix("Bearer ")
    echo = {"x-echo-key": key, "x-debug-auth": f"Bearer {key.upper()}"}
    if req.path == "/v1/models":
        return await resp.json(
            401, {"error": {"message": f"KEY {key.upper()} IS NOT VALID", "type": "auth"}}, echo
        )
    await resp.json(200, completion("m"), echo)


LITELLM_COST = "0.00042"  # what the proxy says a whole answer of model "m" cost
LITELLM_STREAM_COST = 0.00021  # and a streamed one, in its last usage chunk
LITELLM_MODEL_INFO = {  # its /model/info: per-token prices, for a model its answers do not price
    "data": [
        {"model_name": "m", "model_info": {"input_cost_per_token": 1e-5, "output_cost_per_token": 3e-5}},
        {
            "model_name": "by-info",
            "model_info": {"input_cost_per_token": 2e-6, "output_cost_per_token": 4e-6},
        },
        {"model_name": "free-form", "model_info": {"mode": "chat"}},
    ]
}


async def litellm(srv: FaultServer, req: Request, resp: Response) -> None:
    """What LiteLLM's proxy sends: its call id header, FastAPI ``detail`` error bodies, what
    an answer cost (a header; a stream asked for its usage: in the last usage chunk), its
    ``/model/info``. Models other than "m" come without a cost (the header says "None")."""
    ids = {"x-litellm-call-id": f"call-{req.count}", "x-litellm-response-id": "resp-x"}
    if req.path == "/v1/chat/completions":
        body = req.json()
        if body.get("stream"):
            events = [chunk(role=True), chunk("Hello"), chunk(" world"), chunk(finish="stop")]
            if (body.get("stream_options") or {}).get("include_usage"):
                events.append(chunk(usage={**USAGE, "cost": LITELLM_STREAM_COST}))
            await resp.start_sse(ids)
            for event in [*events, b"data: [DONE]\n\n"]:
                await resp.send(event if isinstance(event, bytes) else encode(event))
            return await resp.end()
        cost = LITELLM_COST if body["model"] == "m" else "None"
        return await resp.json(200, completion(body["model"]), {**ids, "x-litellm-response-cost": cost})
    if req.path == "/model/info":
        return await resp.json(200, LITELLM_MODEL_INFO, ids)
    if req.path == "/v1/models":
        detail = [
            {"loc": ["query", "limit"], "msg": "Input should be a valid integer", "type": "int_parsing"},
            {"loc": ["query", "page"], "msg": "Field required", "type": "missing"},
        ]
        return await resp.json(422, {"detail": detail}, ids)
    if req.path == "/v1/messages":
        return await resp.json(404, {"detail": "Not Found"}, ids)
    await resp.json(400, {"detail": {"error": "Authentication Error - invalid proxy key"}}, ids)


# -- typed answers: a model that answers the way real ones do -------------------------------

REVIEW = {"sentiment": "positive", "product": "Acme kettle", "stars": 5}
REVIEW_JSON = json.dumps(REVIEW)
# A gateway's refusal of a native field, as OpenAI-compatible proxies word it.
NATIVE_REFUSED = "Unrecognized request argument supplied: response_format"


def native_field(path: str, body: dict) -> str | None:
    """The native typed-answer field a request carries (WIRE-NOTES), or None."""
    if path == "/v1/chat/completions" and "response_format" in body:
        return "response_format"
    if path == "/v1/responses" and isinstance(body.get("text"), dict) and "format" in body["text"]:
        return "text.format"
    if path.startswith("/v1beta/") and "responseSchema" in (body.get("generationConfig") or {}):
        return "generationConfig.responseSchema"
    if path == "/v1/messages" and isinstance(body.get("tool_choice"), dict):
        return "tool_choice"
    return None


def reply_in(path: str, body: dict, text: str) -> dict:
    """``text`` as the reply of the API at ``path``; a messages request forcing a tool gets
    the tool call (its input the JSON of ``text``, when it is JSON)."""
    model = body.get("model", "m")
    if path == "/v1/messages":
        forced = (body.get("tool_choice") or {}).get("name")
        try:
            value = json.loads(text) if forced else None
        except ValueError:
            value = None
        block = (
            {"type": "tool_use", "id": "toolu_1", "name": forced, "input": value}
            if isinstance(value, dict)
            else {"type": "text", "text": text}
        )
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 3, "output_tokens": 2},
        }
    if path.startswith("/v1beta/"):
        return {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": 2, "candidatesTokenCount": 1, "totalTokenCount": 3},
        }
    if path == "/v1/responses":
        return {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "model": model,
            "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
            ],
            "usage": {"input_tokens": 4, "output_tokens": 6, "total_tokens": 10},
        }
    return completion(model, text)


def typed(*answers: str, refuses_native: bool = False, takes_native: bool = False) -> Handler:
    """A model that answers its n-th typed round with ``answers[n-1]`` (the last one again
    after them), in each API's shape. ``refuses_native``: a 400 for any request carrying a
    native field (counted as ``"refused"``); ``takes_native``: ``/model/info`` says model
    ``m`` takes it (LiteLLM's shape), where other gateways answer 404. The rounds answered
    are counted as ``"answered"``."""

    async def handler(srv: FaultServer, req: Request, resp: Response) -> None:
        body = req.json() or {}
        path = req.path.split("?")[0]
        if path == "/model/info":
            if not takes_native:
                return await resp.json(404, {"detail": "Not Found"})
            entries = [
                {"model_name": "m", "model_info": {"supports_response_schema": True}},
                {"model_name": "old", "model_info": {"supports_response_schema": False}},
            ]
            return await resp.json(200, {"data": entries})
        field = native_field(path, body)
        if refuses_native and field is not None:
            srv.bump(req, "refused")
            error = {"message": NATIVE_REFUSED, "type": "invalid_request_error", "param": field}
            return await resp.json(400, {"error": error})
        n = srv.bump(req, "answered")
        await resp.json(
            200, reply_in(path, body, answers[min(n, len(answers)) - 1]), {"x-request-id": f"r{n}"}
        )

    return handler


def _date_soon() -> dict[str, str]:
    return {"retry-after": formatdate(time.time() - 5, usegmt=True)}


SCENARIOS: dict[str, Handler] = {
    "ok": ok,
    "429s": fail_first(1, 429, lambda: {"retry-after": "0.05"}),
    "429ms": fail_first(1, 429, lambda: {"retry-after-ms": "30"}),
    "429date": fail_first(1, 429, _date_soon),
    "429always": fail_first(10**6, 429, lambda: {"retry-after": "0"}),
    "429long": fail_first(1, 429, lambda: {"retry-after": "3600"}),
    "5xx": fail_first(2, 503),
    "500always": fail_first(10**6, 500),
    "400": fail_first(10**6, 400),
    "cut": cut,
    "keepalive": keepalive,
    "keepalive-after": keepalive,
    "silent": silent,
    "trickle": trickle,
    "malformed": malformed,
    "stream-error": stream_error,
    "json-for-stream": json_for_stream,
    "error200": error200,
    "echo-key": echo_key,
    "reasoner": reasoner,
    "text-only": text_only,
    "sse-for-plain": sse_for_plain,
    "not-json": not_json,
    "native-errors": native_errors,
    "redirect-same-307": redirect(307, same_origin=True),
    "redirect-same-302": redirect(302, same_origin=True),
    "redirect-other-307": redirect(307, same_origin=False),
    "redirect-other-308": redirect(308, same_origin=False),
    "redirect-other-302": redirect(302, same_origin=False),
    "huge-json": huge_json,
    "huge-declared": huge_declared,
    "huge-stream": huge_stream,
    "endless-line": endless_line,
    "compressed": compressed,
    "echo-key-header": echo_key_header,
    "litellm": litellm,
    # typed answers, as real models write them
    "typed-clean": typed(REVIEW_JSON),
    "typed-fenced": typed(f"```json\n{json.dumps(REVIEW, indent=2)}\n```"),
    "typed-prose": typed(f"Sure! Here is the review as JSON: {REVIEW_JSON}"),
    "typed-truncated": typed(REVIEW_JSON[:-12]),
    "typed-fixable": typed(json.dumps({**REVIEW, "stars": "five"}), REVIEW_JSON),
    "typed-stubborn": typed(json.dumps({**REVIEW, "stars": "five"})),
    "typed-offlabel": typed("Mixed."),
    "typed-label": typed("**Positive.**"),
    "typed-empty": typed(""),
    "typed-refuses-native": typed(REVIEW_JSON, refuses_native=True),
    "typed-takes-native": typed(REVIEW_JSON, takes_native=True),
    "summary-at-end": ok,
}


@dataclass
class FaultServer:
    port: int = 0
    requests: list[Request] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)
    sent: Counter = field(default_factory=Counter)  # bytes of endless bodies sent, by token

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def bump(self, req: Request, what: str) -> int:
        key = (req.token, what)
        self.counts[key] += 1
        return self.counts[key]

    def seen(self, token: str) -> list[Request]:
        return [r for r in self.requests if r.token == token]

    def start(self) -> FaultServer:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        async def main() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()

        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(main(), self._loop)
        ready.wait(10)
        return self

    def stop(self) -> None:
        async def shutdown() -> None:
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", 0)))
            _, _, scenario, token, rest = (target.split("/", 4) + [""] * 5)[:5]
            req = Request(method, "/" + rest, headers, body, scenario, token, host=headers.get("host", ""))
            self.counts[(scenario, token)] += 1
            req.count = self.counts[(scenario, token)]
            self.requests.append(req)
            await SCENARIOS[scenario](self, req, Response(writer))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
