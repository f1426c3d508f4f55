"""The tool loop as one sans-IO program, in the style of `gatecell.wire.typed_calls`: send
with the tools offered, read the calls in the answer, run them (an `Effect` the driver
performs: threads under `Gateway`, tasks under `AsyncGateway`), send the results, and again,
until the model answers without calls or ``max_rounds`` requests were made.

A streamed round is read through by the driver (`ReadThrough`: text pieces go to
``on_event`` as they come) and its calls assembled from its events (`dialects`). The chain's
result is the last round's, whole (a stream's made whole), with ``tool_calls``: every call
(`ToolCall`), and ``tool_calls.stopped``, the one line saying why the chain ended early.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatecell.wire.errors import InvalidRequest, echo
from gatecell.wire.exchange import Effect, Program, logger
from gatecell.wire.results import Reply
from gatecell.wire.streams import Stream
from gatecell.wire.structured import merged

from .dialects import answer_of, follow_up, offer
from .functions import Tool, as_tools
from .runner import Approve, RunTools, ToolCall, ToolCalls, checked

__all__ = ["Chain", "ReadThrough", "chain", "OPTIONS", "DEFAULT_CAP"]

# The keyword arguments a text method takes with ``tools=`` (besides the body's own).
OPTIONS = ("tools", "approve", "max_rounds", "tool_timeout", "parallel", "on_event", "tool_result_chars")
DEFAULT_CAP = 20_000

OnEvent = Callable[[Any], Any]  # a text piece (str) or a ToolCall, as it happens


@dataclass
class Chain:
    """What a chain is asked: the tools and how to run them. Made by `Chain.of` from the
    keyword arguments of a text method (refused in one line before any request)."""

    tools: list[Tool]
    approve: Approve | None = None
    max_rounds: int = 8
    timeout: float | None = None
    parallel: bool = True
    on_event: OnEvent | None = None
    cap: int = DEFAULT_CAP
    # Told of each finished call and the chain's id (the client's log: `Journal.tool_call`).
    log: Callable[[ToolCall, str], Any] | None = None

    @classmethod
    def of(cls, options: dict[str, Any]) -> Chain:
        tools = as_tools(options.get("tools") or ())
        if not tools:
            raise InvalidRequest("tools", "no tools given")
        rounds = options.get("max_rounds", 8)
        if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
            raise InvalidRequest("max_rounds", f"must be a whole number >= 1; got {echo(rounds)}")
        timeout = options.get("tool_timeout")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise InvalidRequest("tool_timeout", f"must be seconds > 0 or None; got {echo(timeout)}")
        for name in ("approve", "on_event"):
            if options.get(name) is not None and not callable(options[name]):
                raise InvalidRequest(name, f"must be a function; got {echo(options[name])}")
        cap = options.get("tool_result_chars") or DEFAULT_CAP
        return cls(
            tools,
            options.get("approve"),
            rounds,
            timeout,
            bool(options.get("parallel", True)),
            options.get("on_event"),
            int(cap),
        )

    def program(
        self,
        api: str,
        data: dict[str, Any],
        validate: Callable[[dict[str, Any]], Any],
        send: Callable[[Any, Any], Program[Any]],
    ) -> Program[Any]:
        """The program of this chain on ``api`` (see `chain`)."""
        return chain(api, data, self, validate, send)


class ReadThrough(Effect):
    """The effect "read this stream to its end", each text piece to ``on_text``."""

    def __init__(self, stream: Any, on_text: OnEvent | None) -> None:
        self.stream = stream
        self.on_text = on_text

    def run(self) -> None:
        for piece in self.stream:
            if self.on_text is not None:
                self.on_text(piece)

    async def arun(self) -> None:
        async for piece in self.stream:
            if self.on_text is not None:
                said = self.on_text(piece)
                if inspect.isawaitable(said):
                    await said


def chain(
    api: str,
    data: dict[str, Any],
    asked: Chain,
    validate: Callable[[dict[str, Any]], Any],
    send: Callable[[Any, Any], Program[Any]],
) -> Program[Any]:
    """The rounds of a tool chain (see the module): ``data`` is the body as the caller made
    it, ``validate`` makes a body the endpoint's request, ``send`` the program of one call."""
    by_name = {t.name: t for t in asked.tools}
    body = merged(data, offer(api, asked.tools, asked.parallel))
    calls = ToolCalls()
    calls.chain = uuid.uuid4().hex
    while True:
        result = yield from send(validate(body), None)
        calls.rounds += 1
        if isinstance(result, Stream):
            yield ReadThrough(result, asked.on_event)
        answer = answer_of(api, result)
        if not answer.calls:
            break
        if calls.rounds >= asked.max_rounds:
            names = ", ".join(dict.fromkeys(c.name for c in answer.calls))
            calls.stopped = (
                f"stopped after {asked.max_rounds} rounds (max_rounds): the model still asked for {names}"
            )
            break
        running = RunTools(
            [checked(c, by_name, calls.rounds) for c in answer.calls],
            asked.approve,
            asked.timeout,
            asked.parallel,
            asked.cap,
            asked.on_event,
        )
        done: list[ToolCall] = yield running
        calls += done
        if asked.log is not None:
            for call in done:
                asked.log(call, calls.chain)
        if running.interrupted:
            calls.stopped = f"stopped by Ctrl-C in round {calls.rounds}; the rounds before are kept"
            break
        body = follow_up(api, body, answer, [(c.requested, c.output, c.error is not None) for c in done])  # type: ignore[misc]
    if calls.stopped:
        logger.warning("gatecell: %s", calls.stopped)
    final = _whole(api, result) if isinstance(result, Stream) else result
    final.tool_calls = calls
    return final


def _whole(api: str, stream: Stream) -> Any:
    """A stream read to its end as the endpoint's whole result."""
    if api == "chat":
        return stream.completion()
    text = stream.text
    usage = stream.raw_usage
    if api == "messages":
        raw: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
        }
        raw.update(
            {"stop_reason": stream.finish_reason, "usage": usage, "id": stream.id, "model": stream.model}
        )
    elif api == "generate-content":
        raw = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": text}]},
                    "finishReason": stream.finish_reason,
                }
            ],
            "usageMetadata": usage,
            "modelVersion": stream.model,
        }
    else:
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        raw = {
            "id": stream.id,
            "object": "response",
            "model": stream.model,
            "output": [message],
            "usage": usage,
        }
    return Reply(raw, stream.meta)
