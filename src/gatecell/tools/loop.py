"""The tool loop as a *policy* of rounds (send, read the answer, decide the next round), in
the shape of the rounds layer the wire is growing (``wire.rounds``: ``Ask``, ``Done``,
``Policy``, ``rounds``; `Ask`, `Done` and `rounds` here are its stand-ins until the two meet):
`ToolPolicy` offers the tools, reads the calls in each answer, runs them and asks again with
the results, until the model answers without calls or ``max_rounds`` requests were made.

What it runs between rounds goes through the `Perform` command, so the program stays
sans-IO and one for both clients: running the calls (`RunTools`: threads under `Gateway`,
tasks under `AsyncGateway`) and reading a streamed round through (`ReadThrough`: text pieces
to ``on_event`` as they come; the calls assembled from its events by `dialects`). The chain's
result is the last round's, whole (a stream's made whole), with ``tool_calls``: every call
(`ToolCall`), and ``tool_calls.stopped``, the one line saying why the chain ended early.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gatecell.wire.apis.streams import Stream
from gatecell.wire.transport.errors import GatecellError, InvalidRequest, echo
from gatecell.wire.transport.exchange import Perform, Program, logger
from gatecell.wire.transport.results import Reply
from gatecell.wire.typed.rounds import Ask, Done, rounds
from gatecell.wire.typed.structured import merged

from .dialects import answer_of, follow_up, offer
from .functions import Tool, as_tools
from .runner import NOT_RUN, Approve, RunTools, ToolCall, ToolCalls, checked

__all__ = ["Chain", "ToolPolicy", "ReadThrough", "Ask", "Done", "rounds", "OPTIONS", "DEFAULT_CAP"]

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
    asynchronous: bool = False  # run by `AsyncGateway`: calls as tasks, streams read with async for

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
        """The program of this chain on ``api``: ``data`` is the body as the caller made it,
        ``validate`` makes a body the endpoint's request, ``send`` the program of one call."""
        return rounds(ToolPolicy(api, data, self), lambda body: send(validate(body), None))


class ReadThrough:
    """Read ``stream`` to its end, each text piece to ``on_text``: ``run`` on the sync
    driver, ``arun`` (awaited) on the async one."""

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


class ToolPolicy:
    """The rounds of a tool chain (see the module) on ``api``, from the caller's body ``data``."""

    def __init__(self, api: str, data: dict[str, Any], asked: Chain) -> None:
        self.api = api
        self.asked = asked
        self.by_name = {t.name: t for t in asked.tools}
        self.body = merged(data, offer(api, asked.tools, asked.parallel))
        self.calls = ToolCalls()
        self.calls.chain = uuid.uuid4().hex

    def _told(self, call: ToolCall) -> None:
        """A call started or ended: the caller's ``on_event`` hears of it, and the log gets it
        as soon as it ended (a kernel killed mid-round keeps the calls that finished)."""
        if self.asked.on_event is not None:
            self.asked.on_event(call)
        if self.asked.log is not None and (call.output or call.error is not None):
            self.asked.log(call, self.calls.chain)

    def _perform(self, work: RunTools | ReadThrough) -> Perform:
        return Perform(work.arun if self.asked.asynchronous else work.run)

    def start(self) -> Program[Ask | Done]:
        return Ask(self.body)
        yield  # a program that asks nothing first

    def failed(self, error: GatecellError) -> Program[Ask | Done]:
        raise error
        yield

    def answered(self, result: Any) -> Program[Ask | Done]:
        asked, calls, api = self.asked, self.calls, self.api
        calls.rounds += 1
        if isinstance(result, Stream):
            yield self._perform(ReadThrough(result, asked.on_event))
        answer = answer_of(api, result)
        if answer.calls and calls.rounds >= asked.max_rounds:
            names = ", ".join(dict.fromkeys(c.name for c in answer.calls))
            calls.stopped = (
                f"stopped after {asked.max_rounds} rounds (max_rounds): the model still asked for {names}"
            )
            if asked.log is not None:  # in the log, so that `gw.resume` finds them
                for c in answer.calls:
                    unrun = ToolCall(c.name, c.arguments, error=NOT_RUN, round=calls.rounds, id=c.id)
                    asked.log(unrun, calls.chain)
        elif answer.calls:
            running = RunTools(
                [checked(c, self.by_name, calls.rounds) for c in answer.calls],
                asked.approve,
                asked.timeout,
                asked.parallel,
                asked.cap,
                self._told,
            )
            done: list[ToolCall] = yield self._perform(running)
            calls += done
            if running.interrupted:
                calls.stopped = f"stopped by Ctrl-C in round {calls.rounds}; the rounds before are kept"
            else:
                results = [(c.requested, c.output, c.error is not None) for c in done]
                self.body = follow_up(api, self.body, answer, results)  # type: ignore[arg-type]
                return Ask(self.body)
        if calls.stopped:
            logger.warning("gatecell: %s", calls.stopped)
        final = _whole(api, result) if isinstance(result, Stream) else result
        final.tool_calls = calls
        return Done(final)


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
