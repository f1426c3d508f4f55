"""Shared fixtures. `local_gateway` is the embedded local gateway, one per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_gateway():
    """The embedded gateway (``.base_url`` root without /v1, ``.api_key`` a Secret).

    Started once per process by `gatecell.local.embedded.start` on a free loopback port, with
    a short job duration so job-flow tests finish quickly; streams keep a visible pace.
    """
    from gatecell.local.embedded import start

    return start(pace=0.002, job_seconds=0.6)
