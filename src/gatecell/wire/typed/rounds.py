"""Rounds: one call that may take several requests. Send, read the answer, decide the next round.

`rounds` is the sans-IO program (see `exchange`) of such a call; a *policy* decides what
each round asks and whether another follows. The same rounds run under `Gateway`,
`AsyncGateway` and the batch, each round being one call of the endpoint: validated, sent
with its retries, parsed, logged, answered from the log, waited for, as every call is. The
last round's answer carries the earlier rounds' provenance (`ResponseMeta.earlier`), so
what the call cost is all its rounds'.

**How a policy plugs in** (`Policy`). Three methods, each a *program* (a generator: it may
yield commands before it returns, or return at once):

- ``start()`` returns the first step: `Ask` with the body of the first request (a dict of
  the endpoint's shape, which the endpoint validates before sending), or `Done` with the
  answer when nothing need be sent.
- ``answered(answer)`` is given each round's parsed answer (a `ChatCompletion` or a
  `Reply`: ``.text``, ``.meta``, ``.usage``, ``.parsed``, ``.raw`` for the body) and returns
  the next step: `Ask` with the next request's body (say the conversation with the
  assistant's turn and the tools' results appended), or `Done` with the answer the call
  returns (usually this one).
- ``failed(error)`` is given a round's `GatecellError` (the gateway refused, the connection
  broke after its retries) and returns the next step, or raises (the default: the error is
  the call's).

**Effects between rounds.** Since the three are programs, a policy runs what it needs
between rounds by yielding commands and receiving their results, as the exchange does:
`exchange.Send`/`Read` through a program of the client (the typed policy asks the
gateway's model metadata with ``yield from metadata()``), `exchange.Sleep`, and `Perform`:
``result = yield Perform(fn)`` has the driver call ``fn()`` and send back what it returns
(or throw what it raises into the policy, which decides). The sync driver calls it; the
async driver calls it and awaits the result when it is awaitable. So a tool-calling policy
runs each tool call of an answer as ``output = yield Perform(lambda: tool(**arguments))``:
plain functions on `Gateway`, coroutine functions too on `AsyncGateway` (a blocking
function blocks the event loop there: a policy that must not block hands over
``lambda: asyncio.to_thread(tool, **arguments)``). Nothing but the policy knows tools; the
drivers know only `Perform`.

Policies: `typed_calls.TypedAnswer` (a typed answer's native field, its fallback to the
instruction, its repair rounds). Tool calling is another, beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gatecell.wire.transport.errors import GatecellError
from gatecell.wire.transport.exchange import Perform, Program

__all__ = ["Ask", "Done", "Step", "Policy", "Perform", "rounds"]


@dataclass(frozen=True)
class Ask:
    """Send another round: ``body`` is the next request's, of the endpoint's shape."""

    body: dict[str, Any]


@dataclass(frozen=True)
class Done:
    """The call is over: ``answer`` is what it returns."""

    answer: Any


Step = Ask | Done


class Policy(Protocol):
    """What decides the rounds of a call (see the module)."""

    def start(self) -> Program[Step]: ...

    def answered(self, answer: Any) -> Program[Step]: ...

    def failed(self, error: GatecellError) -> Program[Step]: ...


def rounds(policy: Policy, send: Callable[[dict[str, Any]], Program[Any]]) -> Program[Any]:
    """The rounds of one call: ``send(body)`` is the program of one round (the endpoint's
    call of that body), ``policy`` decides (see the module)."""
    step = yield from policy.start()
    earlier: tuple[Any, ...] = ()
    while isinstance(step, Ask):
        try:
            answer = yield from send(step.body)
        except GatecellError as error:
            step = yield from policy.failed(error)
            continue
        meta = answer.meta
        if meta is not None:
            meta.earlier = earlier
            earlier = (*earlier, meta)
        step = yield from policy.answered(answer)
    return step.answer
