"""Fixtures of the tools' tests: the tool server (a model that calls tools) and clients
pointed at its scenarios."""

from __future__ import annotations

import contextlib
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
    with contextlib.ExitStack() as open_clients:

        def factory(scenario: str, asynchronous: bool = False) -> Any:
            token = uuid.uuid4().hex[:12]
            cls = AsyncGateway if asynchronous else Gateway
            gw = cls(tool_server.base(scenario, token), KEY, log=False, max_retries=0)
            gw.received = tool_server.received[(scenario, token)]
            return gw if asynchronous else open_clients.enter_context(gw)

        yield factory
