"""Running the calls of one round: check each (a name offered, arguments that are JSON and
fit the schema, the user's approval), run the approved ones (concurrently unless told not
to: threads for plain functions, tasks for coroutine functions, each within ``timeout``),
and give back one `ToolCall` per call in the model's order.

Whatever goes wrong with a call (a name never offered, arguments that are not JSON or do not
validate, a denial, a raise, the timeout) is that call's ``error``: one line, the exception's
type and message (never a traceback), which is what the model is sent. A result is made text
(JSON for anything but a string), redacted (`gatecell.wire.util.secret`) and capped before it is
sent or shown. Ctrl-C while calls run marks the unfinished ones interrupted and ends the chain.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from gatecell.wire.transport.errors import InvalidRequest, first_line
from gatecell.wire.util.secret import redact

from .dialects import Requested
from .functions import Tool, problem

__all__ = ["ToolCall", "ToolCalls", "Approve", "RunTools", "checked", "text_of", "cut", "UNFINISHED"]

# How a call that did not finish reads in the log: `gatecell.tools.resume` runs these again.
INTERRUPTED = "interrupted (Ctrl-C) before it finished"
NOT_RUN = "not run: the chain stopped at max_rounds"
UNFINISHED = (INTERRUPTED, NOT_RUN)

Approve = Callable[["ToolCall"], Any]  # True to run; may be a coroutine function on AsyncGateway


@dataclass
class ToolCall:
    """One call the model made, and what came of it.

    **Parameters:** ``name``, ``arguments`` (the validated arguments, or what the model sent
    when they were not valid), ``result`` (what the function returned; None after an error),
    ``error`` (one line, or None), ``seconds`` (the function's own time), ``round`` (the
    request, from 1, whose answer asked for it), ``id`` (the model's id of the call),
    ``approved`` (True, False when denied, None when nobody was asked), ``output`` (the text
    sent back to the model: the result redacted and capped, or the error).
    """

    name: str
    arguments: Any
    result: Any = None
    error: str | None = None
    seconds: float = 0.0
    round: int = 0
    id: str = ""
    approved: bool | None = None
    output: str = ""
    tool: Tool | None = field(default=None, repr=False)
    requested: Requested | None = field(default=None, repr=False)

    def line(self) -> str:
        """The call as one line: ``order_status(order_id='A-1027')``."""
        if isinstance(self.arguments, dict):
            shown = ", ".join(f"{k}={v!r}" for k, v in self.arguments.items())
        else:
            shown = cut(str(self.arguments), 80)
        return f"{self.name}({cut(shown, 200)})"


class ToolCalls(list[ToolCall]):
    """Every call of a chain, in order; ``stopped`` is the one line saying why the chain ended
    before the model answered (the round limit, Ctrl-C), else None; ``rounds`` counts requests;
    ``chain`` is the chain's id in the log (``tool_calls.chain``)."""

    stopped: str | None = None
    rounds: int = 0
    chain: str = ""


def text_of(value: Any) -> str:
    """A tool's result as the text the model reads."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    try:
        return json.dumps(value, ensure_ascii=False, default=_plain)
    except (TypeError, ValueError):
        return repr(value)


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    to_dict = getattr(value, "to_dict", None)  # a pandas Series or DataFrame
    if callable(to_dict):
        try:
            return to_dict()
        except Exception:
            pass
    return str(value)


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def _failure(exc: BaseException) -> str:
    return redact(f"{type(exc).__name__}: {first_line(exc)}")


def checked(requested: Requested, tools: dict[str, Tool], round: int) -> ToolCall:
    """The call ``requested`` made ready to run, or already failed: a name never offered,
    arguments that are not a JSON object or do not fit the tool's schema."""
    call = ToolCall(requested.name, requested.arguments, round=round, id=requested.id, requested=requested)
    tool = tools.get(requested.name)
    if tool is None:
        offered = ", ".join(sorted(tools)) or "none"
        call.error = f"unknown tool {requested.name!r}: the tools offered are {offered}"
        return call
    given: Any = requested.arguments
    if isinstance(given, str):
        try:
            given = json.loads(given) if given.strip() else {}
        except ValueError as exc:
            call.error = f"the arguments are not JSON ({first_line(exc)}): {cut(given, 200)!r}"
            return call
    if not isinstance(given, dict):
        call.error = f"the arguments must be a JSON object; got {cut(json.dumps(given), 200)}"
        return call
    call.arguments = given
    try:
        call.arguments = tool.arguments(given)
    except ValidationError as exc:
        call.error = f"invalid arguments for {tool.name}: {problem(exc)}"
        return call
    call.tool = tool
    return call


@dataclass(eq=False)
class RunTools:
    """Run these calls: ``run`` with threads (the sync driver's `Perform`), ``arun`` with
    tasks (the async driver's); both return ``calls``, each finished, in the model's order.

    **Parameters:** ``calls`` (`checked`, in the model's order), ``approve`` (asked per call
    not refused already; None: only the tools marked ``ask`` are asked about, and denied),
    ``timeout`` (seconds per call, None: none), ``parallel``, ``cap`` (characters of a result
    sent back), ``on_call`` (told of each call as it starts, and again when it ends).
    """

    calls: list[ToolCall]
    approve: Approve | None
    timeout: float | None
    parallel: bool
    cap: int
    on_call: Callable[[ToolCall], Any] | None = None
    interrupted: bool = False

    def __repr__(self) -> str:
        return f"RunTools({', '.join(c.name for c in self.calls)})"

    # -- approval ---------------------------------------------------------------------------

    def _asks(self, call: ToolCall) -> bool:
        return call.error is None and (self.approve is not None or bool(call.tool and call.tool.ask))

    def _decided(self, call: ToolCall, answer: Any) -> None:
        """``answer``: the user's (None: nobody to ask, for a tool that asks, as MCP tools do)."""
        call.approved = bool(answer)
        if answer is None:
            call.error = "this tool runs only when the user approves it, and nobody was asked (approve=)"
        elif not call.approved:
            call.error = "the user denied this call"

    def _tell(self, call: ToolCall) -> None:
        if call.error is not None:
            call.output = call.error
        if self.on_call is not None:
            self.on_call(call)

    def _finish(self, call: ToolCall, value: Any, error: BaseException | None, seconds: float) -> None:
        call.seconds = seconds
        if error is not None:
            call.error = _failure(error)
        else:
            call.result = value
            call.output = cut(redact(text_of(value)), self.cap)
        self._tell(call)

    def _done(self) -> list[ToolCall]:
        for call in self.calls:
            if call.error is not None:
                call.output = call.error
        return self.calls

    # -- sync: threads ------------------------------------------------------------------------

    def run(self) -> list[ToolCall]:
        for call in self.calls:
            if call.error is None:
                self._tell(call)  # it starts (a call refused already is told once, below)
            if self._asks(call):
                answer = self.approve(call) if self.approve is not None else None
                if inspect.isawaitable(answer):  # would count as yes: refused instead
                    getattr(answer, "close", lambda: None)()
                    raise InvalidRequest(
                        "approve", "a coroutine function approves calls on AsyncGateway only"
                    )
                self._decided(call, answer)
            if call.error is not None:
                self._tell(call)
        ready = [c for c in self.calls if c.error is None]
        running: dict[int, Future[Any]] = {}
        try:
            if self.parallel:
                running = {id(c): self._thread(c) for c in ready}
            for call in ready:
                if not self.parallel:
                    running[id(call)] = self._thread(call)
                self._settle(call, running[id(call)])
        except KeyboardInterrupt:  # what finished is kept; the rest is said to be cut
            self.interrupted = True
            for call in ready:
                future = running.get(id(call))
                if call.error is not None or call.output:
                    continue
                if future is not None and future.done():
                    self._settle(call, future)
                else:
                    call.error = INTERRUPTED
                    self._tell(call)
        return self._done()

    def _thread(self, call: ToolCall) -> Future[Any]:
        """The call in a thread of its own: a daemon, so one past its timeout does not hold
        the process at exit; a coroutine function runs in an event loop of its own there."""
        future: Future[Any] = Future()
        assert call.tool is not None
        function, arguments = call.tool.function, call.arguments

        def work() -> None:
            started = time.perf_counter()
            try:
                value = function(**arguments)
                if inspect.isawaitable(value):
                    value = asyncio.run(_awaited(value))
            except BaseException as exc:  # the tool's failure is the model's to read
                future.set_result((None, exc, time.perf_counter() - started))
            else:
                future.set_result((value, None, time.perf_counter() - started))

        threading.Thread(target=work, name=f"gatecell-tool-{call.name}", daemon=True).start()
        return future

    def _settle(self, call: ToolCall, future: Future[Any]) -> None:
        try:
            value, error, seconds = future.result(timeout=self.timeout)
        except FutureTimeout:
            value, error, seconds = None, TimeoutError(f"no result within {self.timeout:g} s"), self.timeout
        self._finish(call, value, error, seconds or 0.0)

    # -- async: tasks -------------------------------------------------------------------------

    async def arun(self) -> list[ToolCall]:
        for call in self.calls:
            if call.error is None:
                self._tell(call)  # it starts (a call refused already is told once, below)
            if self._asks(call):
                answer = self.approve(call) if self.approve is not None else None
                self._decided(call, (await answer) if inspect.isawaitable(answer) else answer)
            if call.error is not None:
                self._tell(call)
        ready = [c for c in self.calls if c.error is None]
        if self.parallel:
            await asyncio.gather(*(self._task(c) for c in ready))
        else:
            for call in ready:
                await self._task(call)
        return self._done()

    async def _task(self, call: ToolCall) -> None:
        assert call.tool is not None
        tool, arguments = call.tool, call.arguments
        started = time.perf_counter()

        async def work() -> Any:
            if tool.is_async:
                return await tool.function(**arguments)
            value = await asyncio.to_thread(tool.function, **arguments)
            return (await value) if inspect.isawaitable(value) else value

        try:
            value = await asyncio.wait_for(work(), self.timeout)
        except asyncio.TimeoutError:
            self._finish(
                call,
                None,
                TimeoutError(f"no result within {self.timeout:g} s"),
                time.perf_counter() - started,
            )
        except Exception as exc:
            self._finish(call, None, exc, time.perf_counter() - started)
        else:
            self._finish(call, value, None, time.perf_counter() - started)


async def _awaited(value: Any) -> Any:
    return await value
