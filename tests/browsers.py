"""What the browser tests share: Debian's Chromium through Playwright, Jupyter servers
(Voila, JupyterLab) started on a free loopback port for one test module, notebooks run by
nbclient and trusted, and the probes that say whether a page ran anything it should not.

No browser is downloaded: Playwright launches /usr/bin/chromium. Servers run with their
own Jupyter folders under the test's temporary directory and without the developer's
GATECELL_*/OPENAI_* variables, so nothing of the machine leaks in or out.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
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


def run_notebook(home: Path, name: str, cells: list[str], **env: str) -> Any:
    """Run these code cells in a fresh kernel (nbclient, errors kept as outputs), in
    ``home/root``, with no GATECELL_*/OPENAI_* variable of the developer's but ``env``; save
    the notebook there as ``name``, signed with `jupyter trust` as a notebook its user ran is
    (so that `jupyterlab(home)` shows its outputs as trusted); return it."""
    import nbformat
    from nbclient import NotebookClient

    root = home / "root"
    root.mkdir(parents=True, exist_ok=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with pytest.MonkeyPatch.context() as mp:  # the kernel nbclient starts inherits this
        for variable in [n for n in os.environ if n.startswith(("GATECELL_", "OPENAI_"))]:
            mp.delenv(variable)
        for variable, value in env.items():
            mp.setenv(variable, value)
        client = NotebookClient(
            nb,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(root)}},
        )
        client.execute()
    nbformat.write(nb, str(root / name))
    jupyter = Path(sys.executable).parent / "jupyter"
    subprocess.run(
        [str(jupyter), "trust", str(root / name)], env=clean_env(home), check=True, capture_output=True
    )
    return nb


def lab_settings(home: Path, plugin: str, name: str, values: dict[str, Any]) -> None:
    """Write user settings of JupyterLab's ``plugin`` (``@jupyterlab/notebook-extension``,
    ``tracker``) for a `jupyterlab` server of ``home``; a page loaded afterwards has them."""
    folder = home / "settings" / plugin
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values))


@contextlib.contextmanager
def jupyterlab(home: Path) -> Iterator[str]:
    """JupyterLab serving ``home/root`` (as root: --allow-root), with the Jupyter folders,
    settings and workspaces of ``home``; yields the URL of a notebook in it, to be formatted
    with its name: ``http://127.0.0.1:PORT/lab/tree/{}?token=...``. Every notebook shows all
    its outputs at once (no windowing), so that a test sees them all."""
    root = home / "root"
    lab_settings(home, "@jupyterlab/notebook-extension", "tracker", {"windowingMode": "none"})
    lab_settings(home, "@jupyterlab/apputils-extension", "notification", {"fetchNews": "false"})
    port, token = free_port(), secrets.token_hex(16)
    args = [
        *("jupyterlab", "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1", "--allow-root"),
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={home / 'settings'}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with serve(args, port, clean_env(home), home / "lab.log"):
        yield f"http://127.0.0.1:{port}/lab/tree/{{}}?token={token}"


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
def dashboard_page(
    browser: Any, url: str, ready: str = ".gatecell-dashboard", before: Callable[[Any], object] | None = None
) -> Iterator[Any]:
    """A page of a Voila-served notebook, once ``ready`` (the dashboard) is on screen (each
    page load starts a kernel, so tests of a module share one); ``before(page)`` runs before
    the page loads (routes)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60_000)
    if before is not None:
        before(page)
    try:
        page.goto(url, wait_until="domcontentloaded")
        page.locator(ready).first.wait_for(state="visible", timeout=120_000)
        yield page
    finally:
        context.close()


# -- whether a page ran anything ----------------------------------------------------------

# A control output made on purpose proves that the front end runs the scripts and handlers of
# these outputs (``window.__control``), so that ``window.__pwned`` staying unset means
# gatecell's outputs gave it nothing to run. Each hostile payload records its name there.
CONTROL = (
    '<div id="gatecell-control"><img src=x onerror="window.__control=1">'
    "<script>window.__control_script=1</script></div>"
)

# Everything in `root` that could run or load something; the control's own output is left out.
SCAN = """root => {
  const bad = [];
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('#gatecell-control')) continue;
    if (['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'FORM', 'FRAME'].includes(el.tagName)) bad.push(el.tagName);
    for (const a of el.attributes) {
      const v = a.value.replace(/[\\x00-\\x20]/g, '').toLowerCase();
      if (a.name.startsWith('on') || a.name === 'srcdoc') bad.push(`${el.tagName} ${a.name}`);
      const url = ['href', 'src', 'action', 'formaction', 'xlink:href'].includes(a.name);
      if (url && /^(javascript|vbscript|data:text|data:image\\/svg)/.test(v)) bad.push(`${el.tagName} ${v}`);
    }
  }
  return bad;
}"""

# Every image has loaded or failed (and JupyterLab has resolved its relative `src`, which it
# does asynchronously): any error handler among them has had its chance to run.
SETTLED = """sel => [...document.querySelectorAll(sel + ' img')].every(i => i.complete
  && (!document.querySelector('.jp-Notebook') || i.getAttribute('src') !== 'x'))"""
