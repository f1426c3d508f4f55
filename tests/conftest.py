"""Shared fixtures. `local_gateway` is the embedded local gateway, one per test session;
`make_gateway` starts gateways of a test's own, with its own options."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture(scope="session")
def local_gateway():
    """The embedded gateway (``.base_url`` root without /v1, ``.api_key`` a Secret).

    Started once per process by `gatecell.local.embedded.start` on a free loopback port, with
    a short job duration so job-flow tests finish quickly; streams keep a visible pace.
    """
    from gatecell.local.embedded import start

    return start(pace=0.002, job_seconds=0.6)


@pytest.fixture
def make_gateway():
    """Start gateways with given `Config.create` options; all stop after the test.

    Each is a namespace: ``base_url``, ``api_key`` (the first key), ``keys`` (all, revealed)
    and ``runtime`` (the app's stores, for tests that look inside)."""
    from gatecell.local.app import create_app
    from gatecell.local.config import Config
    from gatecell.local.embedded import run_in_thread

    stops = []

    def make(**options):
        config = Config.create(**options)
        app = create_app(config)
        base_url, stop = run_in_thread(app)
        stops.append(stop)
        keys = [k.reveal() for k in config.api_keys]
        return SimpleNamespace(
            base_url=base_url, api_key=config.api_keys[0], keys=keys, runtime=app.state.runtime, stop=stop
        )

    yield make
    for stop in stops:
        stop()
