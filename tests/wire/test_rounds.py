"""The rounds layer with a policy of the test's own, as a tool-calling policy would plug in:
it runs something between rounds (`Perform`), on the sync and the async driver alike, sees
every answer and every failure, and the last answer carries the earlier rounds' metas."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gatecell.wire.transport.drivers import arun, run
from gatecell.wire.transport.errors import APIError
from gatecell.wire.transport.exchange import Perform, Program
from gatecell.wire.transport.results import ResponseMeta
from gatecell.wire.typed.rounds import Ask, Done, Step, rounds


class Answer:
    """An answer as the endpoints give them: ``.text``, ``.meta``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.meta = ResponseMeta("/v1/chat/completions", "m", 200, 0.0)


class Tools:
    """Asks, runs the "tool" the answer names, asks again with its output; done after that."""

    def __init__(self, tool: Any) -> None:
        self.tool = tool
        self.seen: list[str] = []

    def start(self) -> Program[Step]:
        return Ask({"messages": ["question"]})
        yield

    def answered(self, answer: Any) -> Program[Step]:
        self.seen.append(answer.text)
        if answer.text != "call the tool":
            return Done(answer)
        output = yield Perform(lambda: self.tool(answer.text))
        return Ask({"messages": ["question", answer.text, output]})

    def failed(self, error: Any) -> Program[Step]:
        self.seen.append(f"failed: {error.message}")
        return Ask({"messages": ["question", "again"]})
        yield


def _gateway(bodies: list[dict[str, Any]]) -> Any:
    """The program of one round: the body is kept, the answer depends on how many came."""

    def send(body: dict[str, Any]) -> Program[Any]:
        bodies.append(body)
        if len(bodies) == 1:
            raise APIError("overloaded", status=503)
        return Answer("call the tool" if len(bodies) == 2 else f"done with {body['messages'][-1]}")
        yield

    return send


def test_a_policy_runs_its_effect_between_rounds_on_the_sync_driver():
    bodies: list[dict[str, Any]] = []
    policy = Tools(lambda text: f"ran for {text!r}")
    answer = run(rounds(policy, _gateway(bodies)), send=lambda request: pytest.fail("no HTTP here"))
    assert answer.text == "done with ran for 'call the tool'"
    assert policy.seen == ["failed: overloaded", "call the tool", answer.text]
    assert bodies[-1] == {"messages": ["question", "call the tool", "ran for 'call the tool'"]}
    assert [meta.endpoint for meta in answer.meta.earlier] == ["/v1/chat/completions"]  # the tool round


def test_the_async_driver_awaits_an_effect_that_is_a_coroutine():
    async def tool(text: str) -> str:
        await asyncio.sleep(0)
        return "awaited"

    async def fail(request: Any) -> Any:
        pytest.fail("no HTTP here")

    bodies: list[dict[str, Any]] = []
    answer = asyncio.run(arun(rounds(Tools(tool), _gateway(bodies)), fail))
    assert answer.text == "done with awaited" and len(answer.meta.earlier) == 1


def test_what_an_effect_raises_is_thrown_into_the_policy():
    def broken(text: str) -> str:
        raise LookupError("no such tool")

    with pytest.raises(LookupError, match="no such tool"):
        run(rounds(Tools(broken), _gateway([])), send=lambda request: pytest.fail("no HTTP here"))
