"""Fixtures of the security tests: a hostile upstream, and local gateways in front of it."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest
from hostile_upstream import KEY, HostileUpstream

from gatecell.local.app import create_app
from gatecell.local.config import Config
from gatecell.local.embedded import run_in_thread


@pytest.fixture
def hostile():
    server = HostileUpstream()
    yield server
    server.stop()


@pytest.fixture
def front(hostile, monkeypatch):
    """Start an embedded gateway forwarding to `hostile` with its key; `Config.create` options
    as keywords. Each comes with an authenticated httpx client as ``.http``."""
    monkeypatch.setenv("TEST_HOSTILE_KEY", KEY)
    stops = []

    def make(**options):
        config = Config.create(
            api_keys=["sk-front-caller-0123456789"],
            upstream=hostile.url,
            upstream_key_env="TEST_HOSTILE_KEY",
            **options,
        )
        base_url, stop = run_in_thread(create_app(config))
        client = httpx.Client(
            base_url=base_url,
            headers={"authorization": "Bearer sk-front-caller-0123456789"},
            timeout=httpx.Timeout(60, connect=10),
        )
        stops.extend([client.close, stop])
        return SimpleNamespace(base_url=base_url, http=client)

    yield make
    for stop in stops:
        stop()
