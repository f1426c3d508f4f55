"""Fixtures of the meaning tests: a fresh GATECELL_HOME per test, and `EmbedServer`s."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from embedserver import KEY, EmbedServer


@pytest.fixture(autouse=True)
def fresh_home(home: Path) -> Path:
    return home


@pytest.fixture
def embed_server() -> Iterator[Callable[..., EmbedServer]]:
    """``embed_server(**faults)``: an `EmbedServer` of this test's own, stopped after it."""
    with contextlib.ExitStack() as stops:

        def make(**faults: Any) -> EmbedServer:
            server = EmbedServer(**faults)
            stops.callback(server.stop)
            return server

        yield make


@pytest.fixture
def gateway() -> Iterator[Callable[..., Any]]:
    """``gateway(server, **options)``: a `Gateway` on that server, closed after the test."""
    from gatecell import Gateway

    with contextlib.ExitStack() as made:
        yield lambda server, **options: made.enter_context(
            Gateway(base_url=server.url, api_key=KEY, **options)
        )
