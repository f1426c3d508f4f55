"""Shared fixtures. `home` is a fresh GATECELL_HOME; `local_gateway` is the embedded local
gateway, one per test session; `make_gateway` starts gateways of a test's own, with its own
options; `kernel_cells` runs cells in a running Jupyter kernel and collects what a frontend
shows; `ipshell` is a real IPython shell with gatecell loaded; `browser` Debian's Chromium,
`screenshots` the folder its screenshots go to."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh GATECELL_HOME for this test (and for the processes it starts), with no other
    GATECELL_* setting in the way."""
    folder = tmp_path / "home"
    for name in [k for k in os.environ if k.startswith("GATECELL_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATECELL_HOME", str(folder))
    return folder


@pytest.fixture(scope="session")
def local_gateway():
    """The embedded gateway (``.base_url`` root without /v1, ``.api_key`` a Secret).

    Started once per process by `gatecell.local.embedded.start` on a free loopback port, with
    a short job duration so job-flow tests finish quickly; streams keep a visible pace.
    """
    from gatecell.local.embedded import start

    return start(pace=0.002, job_seconds=0.6)


@pytest.fixture(scope="session")
def kernel_cells():
    """``kernel_cells(connection_file, *cells)``: run each cell in that kernel; per cell,
    whether it ran ``ok``, its ``stdout``, ``stderr``, the ``text`` (``text/plain``) of its
    last display and its ``displays`` (the data and metadata of every display and result
    message). gatecell's outputs are HTML and text, never Markdown a frontend would render."""
    from jupyter_client import BlockingKernelClient

    def run(connection_file: Any, *cells: str) -> list[dict[str, Any]]:
        kc = BlockingKernelClient(connection_file=str(connection_file))
        kc.load_connection_file()
        # A client without its KernelManager judges the kernel by heartbeats, and by default
        # one ping unanswered for 1 s means dead: a kernel starting on a loaded machine (two
        # xdist workers among other jobs) is slow, not dead. A dead one still fails, in 10 s.
        kc.hb_channel.time_to_dead = 10.0
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            results = []
            for code in cells:
                got: dict[str, Any] = {"stdout": "", "stderr": "", "text": "", "displays": []}

                def collect(msg: dict[str, Any], got: dict[str, Any] = got) -> None:
                    content = msg["content"]
                    if msg["msg_type"] == "stream":
                        got[content["name"]] += content["text"]
                    elif msg["msg_type"] in ("display_data", "update_display_data", "execute_result"):
                        got["displays"].append(content)
                        got["text"] = content["data"].get("text/plain", got["text"])

                reply = kc.execute_interactive(code, timeout=120, output_hook=collect)
                got["ok"] = reply["content"]["status"] == "ok"
                results.append(got)
            return results
        finally:
            kc.stop_channels()

    return run


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


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """Where browser tests save their screenshots: .artifacts/screenshots, or the folder in
    GATECELL_SCREENSHOTS (docs/screenshots, for the README's)."""
    from browsers import ROOT

    folder = Path(os.environ.get("GATECELL_SCREENSHOTS", ROOT / ".artifacts" / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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


@pytest.fixture(scope="module")
def squid():
    """Debian's squid on a free loopback port, for one test module (see tests/proxy.py)."""
    from proxy import Squid

    proxy = Squid()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def squid_auth():
    """A squid that demands basic credentials: ``alice`` and ``squid_auth.users["alice"]``."""
    from proxy import Squid

    proxy = Squid(users={"alice": "s3cret:pa@ss w"})
    yield proxy
    proxy.stop()


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory):
    """A CA of the tests' own and a leaf for 127.0.0.1 it signed (see tests/proxy.py)."""
    from proxy import make_ca

    return make_ca(tmp_path_factory.mktemp("ca"))


_from_workers: list[str] = []  # summary lines of pytest-xdist's workers (a conftest's own, there)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    _from_workers.extend(getattr(node, "workeroutput", {}).get("summary", []))


def pytest_terminal_summary(terminalreporter) -> None:
    for line in _from_workers:
        terminalreporter.write_line(line)


@pytest.fixture
def ctrl_c():
    """Ctrl-C handled as Python's default does, for a test that interrupts its own process
    (``_thread.interrupt_main``, a SIGINT to itself): a suite started with SIGINT ignored
    (``nohup``, ``&``, some CI runners) would otherwise never raise KeyboardInterrupt."""
    import signal

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)
