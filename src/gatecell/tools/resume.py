"""Resume a tool chain cut short (a killed kernel, Ctrl-C, ``max_rounds``) from the log:
``gw.resume(chain_id, tools=[...])``. The calls of its last round that finished are not run
again (their results come from the log); the others run now; then the model is asked to go
on from the conversation as it stood, as one more chain (the same API, model and settings).

The log keeps what is needed when the round's answer came whole: a streamed round keeps no
body, and cannot be resumed (one line says so). The functions are given again: the log keeps
their calls, not their code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.transport.errors import InvalidRequest
from gatecell.wire.transport.results import Reply

from .dialects import TURNS, Requested, answer_of, follow_up
from .loop import Chain
from .runner import UNFINISHED, RunTools, ToolCall, checked

__all__ = ["Resumption", "resumption"]

# What a new chain sets itself: not taken from the logged request.
_OWN = ("tools", "tool_choice", "parallel_tool_calls", "toolConfig", "stream", "stream_options")
_METHODS = {
    "chat": "chat",
    "messages": "messages",
    "generate-content": "generate_content",
    "responses": "responses",
}


@dataclass
class Resumption:
    """What resuming a chain takes: the calls to run now (`RunTools`, the driver's to run),
    then `arguments` for the endpoint ``method`` (the conversation with every result)."""

    api: str
    method: str
    model: str
    body: dict[str, Any]
    answer: Any
    logged: dict[str, tuple[str, bool]]  # call id -> (result or error, failed), finished before
    pending: RunTools
    earlier: list[ToolCall]

    def arguments(self) -> dict[str, Any]:
        """The endpoint method's keyword arguments once `pending` ran: every call's result in
        the model's order (the logged ones as the log has them)."""
        ran = {c.id: c for c in self.pending.calls}
        results: list[tuple[Requested, str, bool]] = []
        for call in self.answer.calls:
            if call.id in self.logged:
                text, failed = self.logged[call.id]
            else:
                done = ran[call.id]
                text, failed = done.output, done.error is not None
            results.append((call, text, failed))
        body = follow_up(self.api, self.body, self.answer, results)
        turns = body.pop(TURNS[self.api])
        key = {"generate-content": "contents", "responses": "input"}.get(self.api, "messages")
        return {"model": self.model, key: turns, "extra_body": body or None}

    def finished(self, result: Any) -> Any:
        """``result`` of the new chain, its ``tool_calls`` after the earlier ones."""
        calls = result.tool_calls
        done = [*self.earlier, *self.pending.calls, *calls]
        calls[:] = done
        return result


def resumption(state: dict[str, Any] | None, chain_id: str, asked: Chain) -> Resumption:
    """How to resume the chain the log holds as ``state`` (`Store.chain`); one line when it cannot be."""
    if state is None:
        raise InvalidRequest("chain", f"no tool chain {chain_id!r} in the log")
    exchange = state["exchange"]
    if exchange is None or exchange["api"] not in _METHODS:
        raise InvalidRequest(
            "chain", f"the log does not keep the exchange of chain {chain_id!r}'s last round"
        )
    if exchange["response"] is None:
        raise InvalidRequest(
            "chain", "its last round was streamed, and the log keeps no answer of a stream to go on from"
        )
    api = exchange["api"]
    turns = exchange["messages"] or [{"role": "user", "content": exchange["prompt"] or ""}]
    body = {k: v for k, v in exchange["params"].items() if k not in _OWN}
    body[TURNS[api]] = turns
    result = (
        ChatCompletion.model_validate(exchange["response"]) if api == "chat" else Reply(exchange["response"])
    )
    answer = answer_of(api, result)
    last = max(c["round"] for c in state["calls"])
    logged = {
        c["call_id"]: (c["error"] if c["error"] is not None else c["result"] or "", c["error"] is not None)
        for c in state["calls"]
        if c["round"] == last and c["error"] not in UNFINISHED
    }
    earlier = [
        ToolCall(
            c["name"],
            c["arguments"],
            error=c["error"],
            round=c["round"],
            id=c["call_id"] or "",
            output=c["result"] or c["error"] or "",
        )
        for c in state["calls"]
        if c["round"] < last or c["call_id"] in logged
    ]
    by_name = {t.name: t for t in asked.tools}
    pending = RunTools(
        [checked(c, by_name, last) for c in answer.calls if c.id not in logged],
        asked.approve,
        asked.timeout,
        asked.parallel,
        asked.cap,
        asked.on_event,
    )
    return Resumption(api, _METHODS[api], exchange["model"], body, answer, logged, pending, earlier)
