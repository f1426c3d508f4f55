"""Voila serving notebooks/dashboard.ipynb on loopback, and Debian's Chromium driven by Playwright.

The Voila kernel finds no gateway configured, so the dashboard starts the embedded local
gateway inside the kernel (the offline path a user gets). The test chooses that gateway's
key (GATECELL_LOCAL_KEYS) so that it can look for it in the page, and a visible stream pace.
The servers and the browser come from tests/browsers.py.
"""

from __future__ import annotations

import secrets

import pytest
from browsers import ROOT, clean_env, dashboard_page, free_port, serve, voila


@pytest.fixture(scope="session")
def dashboard_key() -> str:
    return "sk-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory, dashboard_key):
    home = tmp_path_factory.mktemp("voila")
    port = free_port()
    env = clean_env(
        home,
        GATECELL_LOCAL_KEYS=dashboard_key,
        GATECELL_LOCAL_PACE="0.03",
        GATECELL_LOCAL_JOB_SECONDS="1.5",
        GATECELL_STREAM_USAGE="1",  # the panels' stats show the token counts of chat streams
    )
    with serve(voila(ROOT / "notebooks" / "dashboard.ipynb", port), port, env, home / "voila.log"):
        yield f"http://127.0.0.1:{port}/"


@pytest.fixture(scope="module")
def page(browser, voila_url):
    """One dashboard page for the module: each page load starts a kernel."""
    with dashboard_page(browser, voila_url) as found:
        yield found
