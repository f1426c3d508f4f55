"""Fixtures of the client's tests: the fault server and clients pointed at its scenarios."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fault_server import KEY, FaultServer

from gatecell.gateway import AsyncGateway, Gateway

# Fast retries: the tests check that waits are asked for, not that time passes.
FAST = {"backoff": 0.001, "retry_after_cap": 0.2, "stream_idle_timeout": 5.0, "timeout": 10.0}


@pytest.fixture(scope="session")
def fault() -> Iterator[FaultServer]:
    server = FaultServer().start()
    yield server
    server.stop()


@pytest.fixture
def make(fault: FaultServer) -> Iterator[Callable[..., Any]]:
    """``make("scenario", **options)`` -> a `Gateway` (``asynchronous=True`` for `AsyncGateway`),
    with ``gw.token`` naming its requests on the server."""
    made: list[Gateway] = []

    def factory(scenario: str, asynchronous: bool = False, **options: Any) -> Any:
        token = uuid.uuid4().hex[:12]
        cls = AsyncGateway if asynchronous else Gateway
        gw = cls(f"{fault.url}/s/{scenario}/{token}", KEY, **{**FAST, **options})
        gw.token = token
        if not asynchronous:
            made.append(gw)
        return gw

    yield factory
    for gw in made:
        gw.close()


PROXY_VARIABLES = tuple(
    name for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY") for name in (base, base.lower())
) + ("GATECELL_PROXY",)


@pytest.fixture
def environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No proxy setting but the test's own."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch
