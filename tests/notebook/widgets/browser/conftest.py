"""Voila serving notebooks/dashboard.ipynb on loopback, and Debian's Chromium driven by Playwright.

The Voila kernel finds no gateway configured, so the dashboard starts the embedded local
gateway inside the kernel (the offline path a user gets). The test chooses that gateway's
key (GATECELL_LOCAL_KEYS) so that it can look for it in the page, and a visible stream pace.
No browser is downloaded: Playwright launches /usr/bin/chromium.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[4]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(os.environ.get("GATECELL_SCREENSHOTS", ROOT / ".artifacts" / "screenshots"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"voila exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"voila did not listen on {port}:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="session")
def dashboard_key() -> str:
    return "sk-" + secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory, dashboard_key):
    home = tmp_path_factory.mktemp("voila")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GATECELL_"))}
    env.update(
        GATECELL_LOCAL_KEYS=dashboard_key,
        GATECELL_LOCAL_PACE="0.03",
        GATECELL_LOCAL_JOB_SECONDS="1.5",
        GATECELL_STREAM_USAGE="1",  # the panels' stats show the token counts of chat streams
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        PYTHONUNBUFFERED="1",
    )
    log = home / "voila.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "voila",
                str(ROOT / "notebooks" / "dashboard.ipynb"),
                "--no-browser",
                f"--port={port}",
                "--Voila.ip=127.0.0.1",
                "--show_tracebacks=True",
            ],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}/"
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(
            f"Debian's Chromium is missing at {CHROMIUM}: install it with "
            "`apt-get update && apt-get install -y chromium` (the test command does this)",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def page(browser, voila_url):
    """One dashboard page for the module: each page load starts a kernel. Module scope, so
    Playwright's event loop is gone before other tests run `asyncio.run`."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    page.goto(voila_url, wait_until="domcontentloaded")
    page.locator(".gatecell-dashboard").wait_for(state="visible", timeout=120_000)
    yield page
    context.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS
