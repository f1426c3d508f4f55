"""Fixtures of the batch tests: a fresh GATECELL_HOME per test, and `RowServer`s."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rowserver import KEY, RowServer, Rule


@pytest.fixture(autouse=True)
def fresh_home(home: Path) -> Path:
    """Every batch test logs to a folder of its own (`home`)."""
    return home


@pytest.fixture
def row_server() -> Iterator[Callable[..., RowServer]]:
    """``row_server(rule=None, reply=None, model_info=None)``: a `RowServer` of this test's
    own, stopped after it."""
    servers: list[RowServer] = []

    def make(rule: Rule | None = None, **options: Any) -> RowServer:
        server = RowServer(rule, **options)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


@pytest.fixture
def gateway() -> Iterator[Callable[[RowServer], Any]]:
    """``gateway(server, **options)``: a `Gateway` on that server, closed after the test."""
    from gatecell import Gateway

    made: list[Gateway] = []

    def make(server: RowServer, **options: Any) -> Gateway:
        gw = Gateway(base_url=server.url, api_key=KEY, **options)
        made.append(gw)
        return gw

    yield make
    for gw in made:
        gw.close()
