"""Fixtures of the security tests: the hostile gateway and the IPython shell pointed at it,
a recording upstream, and a gate for renders.

Everything runs for real on loopback: local gateways (`make_gateway`, tests/conftest.py), an
upstream that records what reaches it, a gateway whose every answer is an attack, and a hostile
upstream with local gateways in front of it (`front`). Helpers are in probes.py,
hostile_gateway.py and hostile_upstream.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest
from hostile_gateway import KEY, start
from hostile_upstream import KEY as UPSTREAM_KEY
from hostile_upstream import HostileUpstream
from probes import Gate, Recorder, Seen, pointed_at
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gatecell.local.app import create_app
from gatecell.local.config import Config
from gatecell.local.embedded import run_in_thread


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
    work = tmp_path / "a" / "b" / "work"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("GATECELL_API_KEY", KEY)
    with pointed_at(ipshell, hostile.base_url) as magics:
        yield magics


@pytest.fixture
def run(victim, cell_runner):
    """``run(code)`` runs a cell in the shell pointed at the hostile gateway."""
    return cell_runner


@pytest.fixture
def recorder():
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


@pytest.fixture
def upstream():
    """A hostile upstream gateway (hostile_upstream.py) that records what reaches it."""
    server = HostileUpstream()
    yield server
    server.stop()


@pytest.fixture
def front(upstream, monkeypatch):
    """Start an embedded gateway forwarding to `upstream` with its key; `Config.create` options
    as keywords. Each comes with an authenticated httpx client as ``.http``."""
    monkeypatch.setenv("TEST_HOSTILE_KEY", UPSTREAM_KEY)
    stops = []

    def make(**options):
        config = Config.create(
            api_keys=["sk-front-caller-0123456789"],
            upstream=upstream.url,
            upstream_key_env="TEST_HOSTILE_KEY",
            **options,
        )
        base_url, stop = run_in_thread(create_app(config))
        client = httpx.Client(
            base_url=base_url,
            headers={"authorization": "Bearer sk-front-caller-0123456789"},
            timeout=httpx.Timeout(60, connect=10),
        )
        stops.extend([client.close, stop])
        return SimpleNamespace(base_url=base_url, http=client)

    yield make
    for stop in stops:
        stop()
