"""What the browser tests share: Debian's Chromium through Playwright, and Jupyter servers
(Voila, JupyterLab) started on a free loopback port for one test module.

No browser is downloaded: Playwright launches /usr/bin/chromium. Servers run with their
own Jupyter folders under the test's temporary directory and without the developer's
GATECELL_*/OPENAI_* variables, so nothing of the machine leaks in or out.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a server: no gateway settings of the developer, own Jupyter folders."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GATECELL_"))}
    env.update(
        JUPYTER_CONFIG_DIR=str(home / "config"),
        JUPYTER_DATA_DIR=str(home / "data"),
        JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def serve(args: list[str], port: int, env: dict[str, str], log: Path, cwd: Path = ROOT) -> Iterator[None]:
    """Run ``python -m <args>`` until it listens on ``port``; stop it afterwards."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", *args], env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        _wait_for_port(port, process, log)
        yield
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"{process.args[2]} exited with {process.returncode}:\n{log.read_text()[-3000:]}"
            )
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{process.args[2]} did not listen on {port}:\n{log.read_text()[-3000:]}")


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A notebook of these code cells, unexecuted, at ``path``."""
    import nbformat

    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), str(path))
    return path


def voila(notebook: Path, port: int) -> list[str]:
    """Arguments of a Voila server for one notebook."""
    return [
        "voila",
        str(notebook),
        "--no-browser",
        f"--port={port}",
        "--Voila.ip=127.0.0.1",
        "--show_tracebacks=True",
    ]


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium, launched by Playwright. Use it from a module-scoped fixture, so
    that Playwright's event loop is gone before other tests run `asyncio.run`."""
    if not CHROMIUM.exists():
        pytest.fail(
            f"Debian's Chromium is missing at {CHROMIUM}: install it with "
            "`apt-get update && apt-get install -y chromium` (the test command does this)",
            pytrace=False,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def dashboard_page(browser: Any, url: str, ready: str = ".gatecell-dashboard") -> Iterator[Any]:
    """A page of a Voila-served notebook, once ``ready`` (the dashboard) is on screen (each
    page load starts a kernel, so tests of a module share one)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.locator(ready).first.wait_for(state="visible", timeout=120_000)
        yield page
    finally:
        context.close()
