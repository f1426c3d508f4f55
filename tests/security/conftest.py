"""Fixtures of the attack tests: the hostile gateway, and a real IPython shell pointed at it."""

from __future__ import annotations

from typing import Any

import pytest
from hostile_gateway import KEY, start


@pytest.fixture(scope="session")
def hostile():
    server = start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def shell():
    """IPython's test shell (a real InteractiveShell, shared by the whole run) with gatecell."""
    from IPython.testing import globalipapp

    globalipapp.start_ipython()  # once per process; the notebook tests share the shell
    ip = globalipapp.get_ipython()
    ip.run_line_magic("load_ext", "gatecell")
    return ip


@pytest.fixture
def victim(shell, hostile, monkeypatch, tmp_path):
    """gatecell in the shell, pointed at the hostile gateway, working in a folder three levels
    below ``tmp_path`` (so that a path that climbs out is still caught inside it)."""
    from gatecell.notebook import _STATE

    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    magics = _STATE[id(shell)]["magics"]
    config = magics.session.config
    config.base_url = hostile.base_url
    config.output, config.footer, config.debug = "rich", False, False
    magics.session.memory.reset()
    magics.session.disconnect()
    yield magics
    config.base_url = ""
    config.video_embed_limit = 20_000_000
    magics.session.disconnect()


@pytest.fixture
def run(shell, victim):
    """``run(code)`` runs a cell; returns (ExecutionResult, captured output)."""
    from IPython.utils.capture import capture_output

    def run_cell(code: str) -> tuple[Any, Any]:
        with capture_output() as captured:
            result = shell.run_cell(code)
        return result, captured

    return run_cell
