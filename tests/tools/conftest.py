"""Fixtures of the tools' tests: the tool server (a model that calls tools) and clients
pointed at its scenarios."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tool_server import KEY, ToolServer

from gatecell.gateway import AsyncGateway, Gateway


@pytest.fixture(scope="session")
def tool_server() -> Iterator[ToolServer]:
    server = ToolServer()
    yield server
    server.close()


@pytest.fixture
def make(tool_server: ToolServer) -> Iterator[Callable[..., Any]]:
    """``make("scenario")`` -> a `Gateway` (``asynchronous=True``: `AsyncGateway`) whose
    ``gw.received`` is the list of request bodies the server got from it."""
    made: list[Gateway] = []

    def factory(scenario: str, asynchronous: bool = False) -> Any:
        token = uuid.uuid4().hex[:12]
        cls = AsyncGateway if asynchronous else Gateway
        gw = cls(tool_server.base(scenario, token), KEY, log=False, max_retries=0)
        gw.received = tool_server.received[(scenario, token)]
        if not asynchronous:
            made.append(gw)
        return gw

    yield factory
    for gw in made:
        gw.close()
