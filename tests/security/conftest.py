"""Fixtures of the security tests: the hostile gateway and the IPython shell pointed at it,
a recording upstream, and a gate for renders.

Everything runs for real on loopback: local gateways (`make_gateway`, tests/conftest.py), an
upstream that records what reaches it, a gateway whose every answer is an attack. Helpers are in
probes.py and hostile_gateway.py.
"""

from __future__ import annotations

import pytest
from hostile_gateway import KEY, start
from probes import Gate, Recorder, Seen
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


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


@pytest.fixture
def recorder():
    from gatecell.local.embedded import run_in_thread

    rec = Recorder()

    async def anything(request: Request) -> JSONResponse:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.scope["headers"]}
        rec.seen.append(Seen(request.method, request.scope["raw_path"], headers))
        return JSONResponse({"object": "list", "data": [], "upstream": "recorder"})

    methods = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
    app = Starlette(routes=[Route("/{rest:path}", anything, methods=methods)])
    rec.base_url, stop = run_in_thread(app)
    yield rec
    stop()


@pytest.fixture
def gate(monkeypatch):
    """A `Gate` in place of the video and music renderers (not images: those stay real)."""
    from gatecell.local.backends import music, video

    g = Gate()
    monkeypatch.setattr(video, "render", g)
    monkeypatch.setattr(music, "synthesize", g)
    yield g
    g.open.set()
