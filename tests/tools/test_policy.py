"""The tool loop is a sans-IO program: stepped by hand with made-up answers, it asks for
each round's body and for its calls to be run (a `Perform` of the sync or async runner),
and nothing else."""

from __future__ import annotations

import json

from gatecell.tools.loop import Chain, ToolPolicy, rounds
from gatecell.tools.runner import RunTools
from gatecell.wire.apis.spec import ChatCompletion
from gatecell.wire.transport.exchange import Perform


def order_status(order_id: str) -> str:
    """Where an order is."""
    return f"order {order_id}"


def _answer(message: dict) -> ChatCompletion:
    return ChatCompletion.model_validate({"choices": [{"message": {"role": "assistant", **message}}]})


def _sent(body: dict):
    """A stand-in for one round's program: it yields the body, and returns what it is sent."""
    return (yield ("send", body))


def test_the_loop_asks_for_rounds_and_runs_calls_through_perform() -> None:
    for asynchronous in (False, True):
        chain = Chain.of({"tools": [order_status]})
        chain.asynchronous = asynchronous
        program = rounds(
            ToolPolicy("chat", {"model": "m", "messages": [{"role": "user", "content": "hi"}]}, chain), _sent
        )
        kind, body = next(program)
        assert kind == "send" and body["tools"][0]["function"]["name"] == "order_status"
        call = {
            "id": "c1",
            "type": "function",
            "function": {"name": "order_status", "arguments": '{"order_id": "A-1"}'},
        }
        perform = program.send(_answer({"content": None, "tool_calls": [call]}))
        assert isinstance(perform, Perform)
        work = perform.fn.__self__
        assert isinstance(work, RunTools) and perform.fn.__name__ == ("arun" if asynchronous else "run")
        work.calls[0].output = "order A-1"  # as the driver's run would leave it
        kind, body = program.send(work.calls)
        assert kind == "send" and body["messages"][-1] == {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "order A-1",
        }
        assert json.loads(body["messages"][-2]["tool_calls"][0]["function"]["arguments"]) == {
            "order_id": "A-1"
        }
        try:
            program.send(_answer({"content": "done"}))
        except StopIteration as stop:
            assert stop.value.text == "done" and stop.value.tool_calls.rounds == 2
        else:
            raise AssertionError("the loop went on after a text answer")
