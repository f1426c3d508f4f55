"""Helpers for the local gateway's tests: extra gateways with their own options."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest

from gatecell.local.app import create_app
from gatecell.local.config import Config
from gatecell.local.embedded import run_in_thread


@pytest.fixture
def make_gateway():
    """Start gateways with given `Config.create` options; all stop after the test."""
    stops = []

    def make(**options):
        config = Config.create(**options)
        base_url, stop = run_in_thread(create_app(config))
        stops.append(stop)
        return SimpleNamespace(base_url=base_url, api_key=config.api_keys[0], stop=stop)

    yield make
    for stop in stops:
        stop()


@pytest.fixture
def http(local_gateway):
    """An httpx client on the session gateway, authenticated with its key."""
    headers = {"authorization": f"Bearer {local_gateway.api_key.reveal()}"}
    with httpx.Client(base_url=local_gateway.base_url, headers=headers, timeout=30) as client:
        yield client
