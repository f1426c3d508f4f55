"""Shared fixtures. `local_gateway` is the embedded local gateway, one per test session;
`ipshell` a real IPython shell with gatecell loaded; `browser` Debian's Chromium."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def local_gateway():
    """The embedded gateway (``.base_url`` root without /v1, ``.api_key`` a Secret).

    Started once per process by `gatecell.local.embedded.start` on a free loopback port, with
    a short job duration so job-flow tests finish quickly; streams keep a visible pace.
    """
    from gatecell.local.embedded import start

    return start(pace=0.002, job_seconds=0.6)


@pytest.fixture(scope="session")
def ipshell():
    """IPython's test shell (a real InteractiveShell, one per process) with gatecell loaded."""
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "gatecell")
    return shell


@pytest.fixture
def cell_runner(ipshell):
    """``run(code)`` runs a cell in the shell; returns (ExecutionResult, captured output)."""
    from IPython.utils.capture import capture_output

    def run_cell(code: str) -> tuple[Any, Any]:
        with capture_output() as captured:
            result = ipshell.run_cell(code)
        return result, captured

    return run_cell


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module (see tests/browsers.py)."""
    from browsers import chromium

    with chromium() as found:
        yield found
