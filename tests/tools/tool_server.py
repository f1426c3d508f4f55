"""A gateway on loopback whose model calls tools the way real models do, on the four text
APIs, whole and streamed; it keeps every request it received, per scenario and token.

A client points at ``{url}/s/<scenario>/<token>``; the scenario decides each round's answer
from the request count so far:

- ``one``: one call, then a sentence quoting the results it was sent;
- ``parallel``: three calls in one answer (two tools), then the sentence;
- ``bad_json``: arguments that are not JSON (generate-content, whose arguments are objects:
  arguments of the wrong type), then the sentence;
- ``unknown``: a call of a tool never offered, then the sentence;
- ``forever``: a call in every answer (the round limit);
- ``denial``: a call of ``cancel_order`` (which the test denies), then ``order_status``, then
  the sentence.

Streamed answers split every call's arguments in pieces and interleave the pieces of several
calls (chat by ``index``, messages by block index, responses by ``output_index``); a
generate-content stream sends each call whole, as Gemini does.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

KEY = "sk-test-Wk3yS3cretValue0123456789abcd"  # the clients' key, which must never be sent back

CALLS: dict[str, list[list[tuple[str, Any]]]] = {
    "one": [[("order_status", {"order_id": "A-1027"})]],
    "parallel": [
        [
            ("order_status", {"order_id": "A-1"}),
            ("weather", {"city": "Paris", "days": 2}),
            ("order_status", {"order_id": "B-22"}),
        ]
    ],
    "bad_json": [[("order_status", '{"order_id": "A-1027"')]],
    "unknown": [[("rm_rf", {"path": "/"})]],
    "denial": [[("cancel_order", {"order_id": "A-1027"})], [("order_status", {"order_id": "A-1027"})]],
}


def results_in(api: str, body: dict[str, Any]) -> list[str]:
    """The tool results the last request carried, as text, in order."""
    if api == "chat":
        return [m["content"] for m in body["messages"] if m.get("role") == "tool"]
    if api == "messages":
        return [
            b["content"]
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    if api == "generate-content":
        return [
            next(iter(p["functionResponse"]["response"].values()))
            for c in body["contents"]
            for p in c.get("parts", ())
            if "functionResponse" in p
        ]
    return [
        i["output"] for i in body["input"] if isinstance(i, dict) and i.get("type") == "function_call_output"
    ]


class ToolServer:
    """The server (see the module); ``received[(scenario, token)]`` is the list of request
    bodies (JSON) received, in order."""

    def __init__(self) -> None:
        self.received: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.answer(self, body)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def base(self, scenario: str, token: str) -> str:
        return f"{self.url}/s/{scenario}/{token}"

    def answer(self, handler: BaseHTTPRequestHandler, body: dict[str, Any]) -> None:
        _, _, scenario, token, rest = handler.path.split("/", 4)
        with self._lock:
            seen = self.received[(scenario, token)]
            seen.append(body)
            count = len(seen)
        if rest.startswith("v1/chat"):
            api = "chat"
        elif rest.startswith("v1/messages"):
            api = "messages"
        elif rest.startswith("v1/responses"):
            api = "responses"
        else:
            api = "generate-content"
        stream = bool(body.get("stream")) or "streamGenerateContent" in rest
        plan = CALLS.get(scenario, [])
        if scenario == "forever":
            calls = [("order_status", {"order_id": f"A-{count}"})]
        elif count <= len(plan):
            calls = plan[count - 1]
        else:
            calls = []
        if api == "generate-content":  # arguments are objects there: wrong types instead of bad JSON
            calls = [(n, {"order_id": 1027} if isinstance(a, str) else a) for n, a in calls]
        events = _EVENTS[api](calls, "Results: " + " | ".join(results_in(api, body)), count)
        if stream:
            data = b"".join(_sse(api, e) for e in events) + (b"data: [DONE]\n\n" if api == "chat" else b"")
            content_type = "text/event-stream"
        else:
            data = json.dumps(
                _WHOLE[api](calls, "Results: " + " | ".join(results_in(api, body)), count)
            ).encode()
            content_type = "application/json"
        handler.send_response(200)
        handler.send_header("content-type", content_type)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def _text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _pieces(text: str, n: int = 3) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _interleaved(calls: list[tuple[str, Any]]) -> list[tuple[int, str]]:
    """(call index, piece) with the pieces of all calls taken in turn."""
    split = [_pieces(_text(a)) for _, a in calls]
    out = []
    for step in range(max((len(s) for s in split), default=0)):
        for i, pieces in enumerate(split):
            if step < len(pieces):
                out.append((i, pieces[step]))
    return out


# -- whole answers ---------------------------------------------------------------------------


def _chat_whole(calls: list[tuple[str, Any]], text: str, count: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else text}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{count}_{i}", "type": "function", "function": {"name": n, "arguments": _text(a)}}
            for i, (n, a) in enumerate(calls)
        ]
    finish = "tool_calls" if calls else "stop"
    return {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


def _messages_whole(calls: list[tuple[str, Any]], text: str, count: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": "Let me look." if calls else text}]
    content += [
        {
            "type": "tool_use",
            "id": f"toolu_{count}_{i}",
            "name": n,
            "input": a if isinstance(a, dict) else {"raw": a},
        }
        for i, (n, a) in enumerate(calls)
    ]
    stop = "tool_use" if calls else "end_turn"
    return {
        "id": "msg",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop,
    }


def _generate_whole(calls: list[tuple[str, Any]], text: str, count: int) -> dict[str, Any]:
    parts = [{"functionCall": {"name": n, "args": a}} for n, a in calls] or [{"text": text}]
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
        "modelVersion": "m",
    }


def _responses_whole(calls: list[tuple[str, Any]], text: str, count: int) -> dict[str, Any]:
    output = [
        {
            "type": "function_call",
            "id": f"fc_{count}_{i}",
            "call_id": f"call_{count}_{i}",
            "name": n,
            "arguments": _text(a),
        }
        for i, (n, a) in enumerate(calls)
    ] or [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]
    return {"id": "resp", "object": "response", "status": "completed", "model": "m", "output": output}


_WHOLE = {
    "chat": _chat_whole,
    "messages": _messages_whole,
    "generate-content": _generate_whole,
    "responses": _responses_whole,
}


# -- streams -------------------------------------------------------------------------------


def _chat_events(calls: list[tuple[str, Any]], text: str, count: int) -> list[dict[str, Any]]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "c",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    if not calls:
        return [
            chunk({"role": "assistant", "content": ""}),
            *(chunk({"content": p}) for p in _pieces(text)),
            chunk({}, "stop"),
        ]
    events = [chunk({"role": "assistant", "content": None})]
    events += [
        chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_{count}_{i}",
                        "type": "function",
                        "function": {"name": n, "arguments": ""},
                    }
                ]
            }
        )
        for i, (n, _) in enumerate(calls)
    ]
    events += [
        chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for i, p in _interleaved(calls)
    ]
    return [*events, chunk({}, "tool_calls")]


def _messages_events(calls: list[tuple[str, Any]], text: str, count: int) -> list[dict[str, Any]]:
    said = "Let me look." if calls else text
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg", "model": "m", "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in _pieces(said)
        ),
        {"type": "content_block_stop", "index": 0},
    ]
    for i, (n, _) in enumerate(calls):
        block = {"type": "tool_use", "id": f"toolu_{count}_{i}", "name": n, "input": {}}
        events.append({"type": "content_block_start", "index": i + 1, "content_block": block})
    events += [
        {
            "type": "content_block_delta",
            "index": i + 1,
            "delta": {"type": "input_json_delta", "partial_json": p},
        }
        for i, p in _interleaved(calls)
    ]
    events += [{"type": "content_block_stop", "index": i + 1} for i in range(len(calls))]
    stop = "tool_use" if calls else "end_turn"
    return [
        *events,
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]


def _generate_events(calls: list[tuple[str, Any]], text: str, count: int) -> list[dict[str, Any]]:
    def event(part: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [part]}}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "modelVersion": "m"}

    if not calls:
        pieces = _pieces(text)
        return [event({"text": p}, "STOP" if i == len(pieces) - 1 else None) for i, p in enumerate(pieces)]
    events = [event({"text": "Let me look."})]
    events += [event({"functionCall": {"name": n, "args": a}}) for n, a in calls]
    events[-1]["candidates"][0]["finishReason"] = "STOP"
    return events


def _responses_events(calls: list[tuple[str, Any]], text: str, count: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "resp", "model": "m"}}]
    if not calls:
        events += [
            {"type": "response.output_text.delta", "output_index": 0, "delta": p} for p in _pieces(text)
        ]
    for i, (n, _) in enumerate(calls):
        item = {
            "type": "function_call",
            "id": f"fc_{count}_{i}",
            "call_id": f"call_{count}_{i}",
            "name": n,
            "arguments": "",
        }
        events.append({"type": "response.output_item.added", "output_index": i, "item": item})
    events += [
        {
            "type": "response.function_call_arguments.delta",
            "output_index": i,
            "item_id": f"fc_{count}_{i}",
            "delta": p,
        }
        for i, p in _interleaved(calls)
    ]
    return [
        *events,
        {
            "type": "response.completed",
            "response": {"id": "resp", "model": "m", "usage": {"input_tokens": 1}},
        },
    ]


_EVENTS = {
    "chat": _chat_events,
    "messages": _messages_events,
    "generate-content": _generate_events,
    "responses": _responses_events,
}


def _sse(api: str, event: dict[str, Any]) -> bytes:
    data = json.dumps(event)
    if api in ("messages", "responses"):
        return f"event: {event['type']}\ndata: {data}\n\n".encode()
    return f"data: {data}\n\n".encode()
