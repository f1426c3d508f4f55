"""Fixtures of the security tests: a recording upstream and a gate for renders.

Everything runs for real on loopback: local gateways (`make_gateway`, tests/conftest.py) and
an upstream that records what reaches it. Helpers are in probes.py.
"""

from __future__ import annotations

import pytest
from probes import Gate, Recorder, Seen
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


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
