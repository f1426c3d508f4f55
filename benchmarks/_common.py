"""Shared pieces of the benchmarks: child processes, loopback HTTP, statistics and results.

Every server a benchmark talks to runs in a process of its own (started here, stopped here),
so that the process being measured holds only the code under test. Traffic goes to
127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import gc
import json
import math
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
PYTHON = sys.executable
HOST = "127.0.0.1"
BENCH_KEY = "sk-bench-0123456789abcdef"  # what clients send to the gateway under test
UPSTREAM_KEY = "sk-upstream-bench"  # what a gateway sends to the neutral upstream
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Every benchmark logs into a fresh store (and its gateways keep their jobs there), never the
# user's: GATECELL_HOME is a temporary folder, inherited by the servers started here.
BENCH_HOME = tempfile.mkdtemp(prefix="gatecell-bench-home-")
os.environ["GATECELL_HOME"] = BENCH_HOME
atexit.register(shutil.rmtree, BENCH_HOME, True)


# ---------------------------------------------------------------- child processes

_CHILDREN: list[Child] = []  # every server started here, stopped at exit whatever happens


def _stop_all() -> None:
    for child in _CHILDREN:
        child.stop()


atexit.register(_stop_all)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that atexit runs on a plain kill too


@dataclass
class Child:
    """A server process this benchmark started; ``stop()`` ends it (and only it)."""

    name: str
    proc: subprocess.Popen
    port: int
    log: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _CHILDREN.append(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def rss_kib(self) -> int:
        return proc_status_kib(self.pid, "VmRSS")

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def stop(self) -> None:
        """End the process; its log goes too unless GATECELL_BENCH_KEEP_LOGS is set."""
        if self.log is not None and not os.environ.get("GATECELL_BENCH_KEEP_LOGS"):
            self.log.unlink(missing_ok=True)
        if self.proc.poll() is None:
            # The child leads a session of its own (start_new_session): its group is ours.
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def log_tail(self, lines: int = 15) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def spawn_ready_line(name: str, argv: list[str], timeout: float = 30.0) -> Child:
    """Start a helper server of ours (_neutral.py) that prints ``READY <port>`` once it listens."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline().decode() if ready else ""
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"{name} did not start: {line!r}")
    return Child(name, proc, int(line.split()[1]))


def spawn_http(
    name: str,
    argv: list[str],
    port: int,
    *,
    ready_path: str = "/v1/models",
    headers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60.0,
) -> Child:
    """Start a server and wait until ``GET ready_path`` answers 200; output goes to a log file."""
    log = Path(tempfile.gettempdir()) / f"gatecell-bench-{name}-{port}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    child = Child(name, proc, port, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode}:\n{child.log_tail()}")
        if http_status(port, ready_path, headers) == 200:
            return child
        time.sleep(0.05)
    tail = child.log_tail()
    child.stop()
    raise RuntimeError(f"{name} not ready after {timeout:.0f} s:\n{tail}")


def spawn_neutral(chunks: int = 50_000, reply: int | None = None, reply_json: bool = False) -> Child:
    """The neutral chat-completions server (see _neutral.py); ``reply``: bytes of its reply
    text; ``reply_json``: its reply text is a JSON object."""
    argv = [PYTHON, str(HERE / "_neutral.py"), "neutral", "--chunks", str(chunks)]
    if reply is not None:
        argv += ["--reply", str(reply)]
    if reply_json:
        argv.append("--reply-json")
    return spawn_ready_line("neutral", argv)


def spawn_hello() -> Child:
    child = spawn_ready_line("uvicorn-hello", [PYTHON, str(HERE / "_neutral.py"), "hello"])
    _wait_status(child, "/")
    return child


def _wait_status(child: Child, path: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while http_status(child.port, path) != 200:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{child.name} not answering on {path}")
        time.sleep(0.05)


def gatecell_argv(port: int, key: str = BENCH_KEY, upstream: str | None = None) -> list[str]:
    """``python -m gatecell serve`` as a user starts it."""
    argv = [PYTHON, "-m", "gatecell", "serve", "--host", HOST, "--port", str(port), "--api-key", key]
    if upstream:
        argv += ["--upstream", upstream, "--upstream-key-env", "BENCH_UPSTREAM_KEY"]
    return argv


def spawn_gatecell(*extra: str, upstream: Child | None = None) -> Child:
    """``gatecell serve`` in its own process; with ``upstream``, unknown models go there."""
    port = free_port()
    env = {**os.environ, "BENCH_UPSTREAM_KEY": UPSTREAM_KEY}
    argv = gatecell_argv(port, upstream=upstream.url if upstream else None) + list(extra)
    return spawn_http("gatecell", argv, port, headers={"Authorization": f"Bearer {BENCH_KEY}"}, env=env)


# LiteLLM lives in a venv of its own: set GATECELL_BENCH_LITELLM_VENV, default /tmp/litellm-venv.
LITELLM_VENV = Path(os.environ.get("GATECELL_BENCH_LITELLM_VENV", "/tmp/litellm-venv"))
LITELLM_CONFIG = """\
model_list:
  - model_name: bench-model
    litellm_params:
      model: openai/bench-model
      api_base: {upstream}/v1
      api_key: {key}
general_settings:
  master_key: {master}
"""


def spawn_litellm(upstream: Child) -> tuple[Child | None, str]:
    """LiteLLM's proxy (from its own venv, never the project's) in front of ``upstream``,
    or None and why not."""
    exe = LITELLM_VENV / "bin" / "litellm"
    if not exe.exists():
        return None, f"not installed ({exe} missing; pip install 'litellm[proxy]' into {LITELLM_VENV})"
    config = Path(tempfile.gettempdir()) / "gatecell-bench-litellm.yaml"
    config.write_text(LITELLM_CONFIG.format(upstream=upstream.url, key=UPSTREAM_KEY, master=BENCH_KEY))
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    argv = [str(exe), "--config", str(config), "--host", HOST, "--port", str(port)]
    try:
        return spawn_http("litellm", argv, port, ready_path="/health/liveliness", env=env, timeout=90), ""
    except RuntimeError as exc:
        return None, f"did not start: {str(exc).splitlines()[0]}"


# ---------------------------------------------------------------- /proc


def proc_status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_pids(pid: int) -> list[int]:
    """``pid`` and its descendants (a server may fork workers)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


# ---------------------------------------------------------------- loopback HTTP


def http_status(port: int, path: str, headers: dict[str, str] | None = None) -> int:
    """Status of ``GET path`` on 127.0.0.1, 0 when nothing answers."""
    lines = [f"GET {path} HTTP/1.1", f"Host: {HOST}:{port}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    try:
        with socket.create_connection((HOST, port), timeout=5) as sock:
            sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
            head = sock.recv(64)
        return int(head.split(b" ", 2)[1])
    except (OSError, ValueError, IndexError):
        return 0


def raw_request(
    method: str, path: str, port: int, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    """An HTTP/1.1 keep-alive request, built once and written many times."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{port}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes]]:
    """Status and lower-cased headers of the next HTTP/1.1 response."""
    head = await reader.readuntil(b"\r\n\r\n")
    headers = {}
    for line in head[:-4].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower()] = value.strip().lower()
    return int(head.split(b" ", 2)[1]), headers


async def read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes]) -> bytes:
    """The body after ``read_head``: chunked, by content-length, or until close."""
    if headers.get(b"transfer-encoding") == b"chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                    pass
                return bytes(body)
            body += (await reader.readexactly(size + 2))[:-2]
    if b"content-length" in headers:
        return await reader.readexactly(int(headers[b"content-length"]))
    return await reader.read()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    status, headers = await read_head(reader)
    return status, await read_body(reader, headers)


def chat_body(model: str, *, stream: bool = False, max_tokens: int | None = None) -> dict:
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "Say hello."}]}
    if stream:
        body["stream"] = True
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    return body


# ---------------------------------------------------------------- statistics and output


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: a p99 is a latency that happened)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


median = statistics.median


def print_table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for n, row in enumerate(cells):
        print(
            "  ".join(
                c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
        if n == 0:
            print("  ".join("-" * w for w in widths))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return str(value)


def summary_row(
    measure: str, gatecell: str, peer: str, ratio: float | None, target: str, met: bool | None
) -> dict:
    """One line of the README table (see run_all.py)."""
    return {
        "measure": measure,
        "gatecell": gatecell,
        "peer": peer,
        "ratio": ratio,
        "target": target,
        "met": met,
    }


def save(name: str, method: str, settings: dict, measurements: dict, summary: list[dict]) -> Path:
    """Write results/<name>.json: what was measured, how, on what, and the summary rows."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {
        "benchmark": name,
        "when": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "system": platform.platform(),
            "loadavg_1m_at_end": os.getloadavg()[0],
        },  # other work on the machine skews latencies
        "method": method,
        "settings": settings,
        "measurements": measurements,
        "summary": summary,
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"\nresults: {path.relative_to(HERE.parent)}")
    return path


def contest(
    makers: dict[str, Callable[[Child], Callable[[int], int]]],
    server: Child,
    n: int,
    reps: int,
    *,
    profile_first: bool = False,
) -> dict[str, list[dict]] | None:
    """CPU contest of clients against ``server``: each maker returns ``work(n) -> items handled``.

    Every contender warms up (imports, connection, caches) and must handle what it is given.
    Then each does ``work(n)`` once per repetition, the order rotating; CPU is this process's
    ``time.process_time()`` (its threads included), taken after a GC. With ``profile_first``
    the first contender is profiled instead, and None returned.
    """
    work = {name: make(server) for name, make in makers.items()}
    for name, fn in work.items():
        if fn(20) < 20:
            raise SystemExit(f"{name}: wrong answers during warm-up")
    if profile_first:
        profile(next(iter(work.values())), n)
        return None
    names = list(work)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for rep in range(reps):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:
            gc.collect()
            wall, cpu = time.perf_counter(), time.process_time()
            seen = work[name](n)
            runs[name].append({"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - wall})
            if seen < n:
                raise SystemExit(f"{name} handled {seen} items of {n}")
    return runs


def report_cpu(runs: dict[str, list[dict]], items: int, unit: str) -> dict[str, float]:
    """Print median CPU per item of each contender (and its ratio to the first); return us/item."""
    per = {name: median([r["cpu_s"] for r in rs]) / items * 1e6 for name, rs in runs.items()}
    first = next(iter(per.values()))
    print_table(
        ["client", f"CPU us/{unit}", f"{unit}s/CPU-s", "wall s/rep", "vs first"],
        [
            [name, us, round(1e6 / us), median([r["wall_s"] for r in runs[name]]), f"{us / first:.2f}x"]
            for name, us in per.items()
        ],
    )
    return per


def profile(work: Callable[..., Any], *args: Any) -> None:
    """Print where ``work(*args)`` spends its CPU (top functions by own time)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(work, *args)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(20)


def cpu_benchmark(
    name: str,
    doc: str,
    makers: dict[str, Callable[[Child], Callable[[int], int]]],
    *,
    unit: str,
    default_n: int,
    method: str,
    summarize: Callable[[dict[str, float]], list[dict]],
) -> None:
    """The command line of a client-CPU benchmark: contest against the neutral server, table, results."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(f"--{unit}s", dest="n", type=int, default=default_n, help=f"{unit}s per repetition")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument(
        "--profile", action="store_true", help="profile gatecell's run instead, print where its CPU goes"
    )
    args = parser.parse_args()
    with spawn_neutral(args.n) as server:
        runs = contest(makers, server, args.n, args.reps, profile_first=args.profile)
    if runs is None:
        return
    print(f"\n{args.n:,} {unit}s per repetition, {args.reps} repetitions, median client CPU (process_time)\n")
    per = report_cpu(runs, args.n, unit)
    summary = summarize(per)
    save(
        name,
        method,
        {f"{unit}s": args.n, "reps": args.reps},
        {f"cpu_us_per_{unit}": per, "runs": runs},
        summary,
    )
