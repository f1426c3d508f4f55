"""`RowServer`: a keep-alive chat-completions gateway on loopback for the batch tests, which
counts what it sees and misbehaves on request (a module of its own, so tests can import it)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

KEY = "sk-batch-test-0123456789abcdef"


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll ``condition`` until it holds; an AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.005)


def reply_to(prompt: str) -> str:
    """What the server answers to a prompt: tells rows apart."""
    return f"re: {prompt}"


# A rule decides each answer: (status, extra headers[, message]) or None for a normal reply;
# the message is the error's, or a 200's reply text instead of ``reply_to(prompt)``. It gets
# the prompt and the server, and may wait (an awaitable) to hold the answer back.
Rule = Callable[[str, "RowServer"], Any]
# A reply decides the text of a normal answer from the prompt and the request body.
Reply = Callable[[str, dict[str, Any]], str]


class RowServer:
    """HTTP/1.1 with keep-alive, in a thread of its own. Answers chat completions (and
    responses, messages, generate-content) with ``reply_to(prompt)``; `rule` may make it answer
    otherwise, and `reply` choose the text. ``prompts`` lists the prompts of the requests it
    received, in order; ``bodies`` their JSON bodies; ``answered`` counts 200s; ``statuses``
    every status sent. ``GET /model/info`` answers ``model_info`` (LiteLLM's metadata), or 404
    without it; ``infos`` counts those requests."""

    def __init__(self, rule: Rule | None = None, reply: Reply | None = None, model_info: Any = None) -> None:
        self.rule = rule
        self.reply = reply
        self.model_info = model_info
        self.bodies: list[dict[str, Any]] = []
        self.infos = 0
        self.prompts: list[str] = []
        self.paths: list[str] = []  # of each request, in order
        self.statuses: list[int] = []
        self.times: list[float] = []  # time.monotonic of each request, as it arrived
        self.answered = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = threading.Event()  # for rules that hold answers back
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        async def main() -> None:
            self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            with contextlib.suppress(asyncio.CancelledError):
                await self._server.serve_forever()
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in handlers:
                task.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)

        self._thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self._thread.start()
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {
                    k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))) or b"{}")
                if path.endswith("/model/info"):
                    self.infos += 1
                    found = self.model_info is not None
                    data = json.dumps(self.model_info if found else {"detail": "Not Found"}).encode()
                    writer.write(
                        b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                        % (200 if found else 404, len(data), data)
                    )
                    await writer.drain()
                    continue
                prompt = _prompt(body)
                self.bodies.append(body)
                self.prompts.append(prompt)
                self.paths.append(path)
                self.times.append(time.monotonic())
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                try:
                    decided = self.rule(prompt, self) if self.rule else None
                    if asyncio.iscoroutine(decided):
                        decided = await decided
                finally:
                    self.in_flight -= 1
                status, extra, *message = decided or (200, {})
                error = {"error": {"message": message[0] if message else f"no: {status}"}}
                text = message[0] if message else self.reply(prompt, body) if self.reply else reply_to(prompt)
                answer = _answer(path, body, text) if status == 200 else error
                data = json.dumps(answer).encode()
                self.statuses.append(status)
                self.answered += status == 200
                fields = {"content-type": "application/json", "content-length": str(len(data)), **extra}
                writer.write(
                    f"HTTP/1.1 {status} X\r\n".encode()
                    + "".join(f"{k}: {v}\r\n" for k, v in fields.items()).encode()
                    + b"\r\n"
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def hold(self) -> None:
        """Wait (in the server's loop) until the test sets `release`."""
        while not self.release.is_set():
            await asyncio.sleep(0.005)

    def stop(self) -> None:
        self.release.set()
        self.loop.call_soon_threadsafe(self._server.close)
        self._thread.join(10)


def _prompt(body: dict[str, Any]) -> str:
    if "messages" in body:
        content = body["messages"][-1]["content"]
        return content if isinstance(content, str) else content[-1]["text"]
    if "contents" in body:
        return body["contents"][-1]["parts"][0]["text"]
    return body.get("input", "")


def _answer(path: str, body: dict[str, Any], text: str) -> dict[str, Any]:
    usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    if path.endswith("/responses"):
        output = [
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        ]
        return {
            "id": "r",
            "object": "response",
            "status": "completed",
            "output": output,
            "usage": {"input_tokens": 3, "output_tokens": 2, "total_tokens": 5},
        }
    if path.endswith("/messages"):
        return {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "usage": {"input_tokens": 3, "output_tokens": 2},
        }
    if "generateContent" in path:
        return {
            "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        }
    message = {"role": "assistant", "content": text}
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage,
    }
