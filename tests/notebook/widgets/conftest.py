"""Panels against the real local gateway on loopback, through the real client."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest


@pytest.fixture
def gw(local_gateway):
    from gatecell import Gateway

    # stream_usage: the panels' stats show the token counts a chat stream sends when asked.
    with Gateway(base_url=local_gateway.base_url, api_key=local_gateway.api_key, stream_usage=True) as client:
        yield client


def _until(condition: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met before the deadline")
        time.sleep(0.002)


@pytest.fixture
def until():
    """Wait for a condition (a deadline for a hung test, not a timing assertion)."""
    return _until
