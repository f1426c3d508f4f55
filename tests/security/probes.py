"""Helpers of the security tests: what a recording upstream saw, raw HTTP requests, a render
gate, ``gatecell serve`` in a child process, the shell's magics pointed at a gateway, and the
CPU a call costs (to tell linear work from work that rescans its input).

Requests go out byte for byte (`raw`), so paths like ``/health/../v1/...`` arrive as written
instead of normalised by a client library.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

UPSTREAM_KEY = "sk-upstream-" + "U9" * 12


@dataclass
class Seen:
    method: str
    raw_path: bytes
    headers: dict[str, str]


@dataclass
class Recorder:
    """An upstream gateway that answers every request and remembers it."""

    base_url: str = ""
    seen: list[Seen] = field(default_factory=list)


def raw(base_url: str, method: str, target: str, headers: dict[str, str] | None = None, body: bytes = b""):
    """Send `target` exactly as given (no normalisation); (status, body bytes)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.putrequest(method, target, skip_accept_encoding=True)
        for name, value in {**(headers or {}), "content-length": str(len(body))}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


class Gate:
    """Stands in for a long render: blocks until opened (or until its job is stopped).

    ``entered`` counts calls that started; the gate makes "a render is provably still in
    progress" a fact a test can rely on, instead of a guess about timing."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Semaphore(0)
        self.started: list[str] = []  # the prompts of the renders that began
        self.stopped: list[str] = []  # ... and of those told to stop

    def __call__(self, prompt: str, *args, stop: threading.Event | None = None, **kwargs) -> bytes:
        self.started.append(prompt)
        self.entered.release()
        while not self.open.wait(0.02):
            if stop is not None and stop.is_set():
                self.stopped.append(prompt)
                from gatecell.local.backends._stop import Stopped

                raise Stopped
        return b"RIFF\x24\x00\x00\x00WAVEfmt " + b"\x00" * 24

    def wait_started(self, count: int = 1, timeout: float = 30.0) -> None:
        for _ in range(count):
            assert self.entered.acquire(timeout=timeout), "the render never started"


@contextlib.contextmanager
def serving(*args: str, env: dict[str, str] | None = None, preexec_fn=None):
    """``python -m gatecell serve`` in a child process on a free port; yields (process, base_url)
    once ``/health`` answers. GATECELL_* variables come only from `env`."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    command = [
        sys.executable,
        "-m",
        "gatecell",
        "serve",
        "--port",
        str(port),
        "--log-level",
        "critical",
        *args,
    ]
    proc = subprocess.Popen(
        command, env={**base_env, **(env or {})}, preexec_fn=preexec_fn, stderr=subprocess.DEVNULL
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/health", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline and proc.poll() is None, "gatecell serve did not start"
                time.sleep(0.1)
        yield proc, base
    finally:
        proc.terminate()
        proc.wait(15)


@contextlib.contextmanager
def pointed_at(ipshell: Any, base_url: str) -> Iterator[Any]:
    """gatecell's magics in ``ipshell``, pointed at ``base_url`` with rich output, no footer
    and fresh memory; set back when the block ends."""
    from gatecell.notebook import _STATE

    magics = _STATE[id(ipshell)]["magics"]
    config = magics.session.config
    config.base_url = base_url
    config.output, config.footer, config.debug = "rich", False, False
    magics.session.memory.reset()
    magics.session.disconnect()
    try:
        yield magics
    finally:
        config.base_url = ""
        config.video_embed_limit = 20_000_000
        magics.session.disconnect()


def cpu_per_call(fn: Callable[[Any], Any], arg: Any) -> float:
    """Thread CPU seconds per call: the best of three runs of enough calls to take 20 ms."""
    best = float("inf")
    for _ in range(3):
        calls, start = 0, time.thread_time()
        while True:
            fn(arg)
            calls += 1
            spent = time.thread_time() - start
            if spent >= 0.02:
                break
        best = min(best, spent / calls)
    return best


def growth(fn: Callable[[Any], Any], make: Callable[[int], Any], n: int = 4000) -> float:
    """How much more CPU ``fn`` costs on an input 8 times larger: about 8 when its work is
    linear, 64 when it rescans its input."""
    return cpu_per_call(fn, make(8 * n)) / cpu_per_call(fn, make(n))
