"""Fixtures of the attack tests: the hostile gateway, and the IPython shell pointed at it."""

from __future__ import annotations

import pytest
from hostile_gateway import KEY, start


@pytest.fixture(scope="session")
def hostile():
    server = start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def victim(ipshell, hostile, monkeypatch, tmp_path):
    """gatecell in the shell, pointed at the hostile gateway, working in a folder three levels
    below ``tmp_path`` (so that a path that climbs out is still caught inside it)."""
    from gatecell.notebook import _STATE

    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    magics = _STATE[id(ipshell)]["magics"]
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
def run(victim, cell_runner):
    """``run(code)`` runs a cell in the shell pointed at the hostile gateway."""
    return cell_runner
