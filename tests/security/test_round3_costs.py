"""Issue 33.7: every price and cost is finite and within a sane bound before it is stored or
summed, and ``gatecell usage --json`` is strict JSON. A hostile gateway on loopback says an
answer cost ``1e308`` dollars (two of which sum to ``inf``), in a header and in a stream's
usage, and that a token costs ``1e303`` dollars in its ``/model/info`` (``inf`` per million);
a log an older gatecell wrote holds such figures already; a prices file holds ``1e400``."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gatecell import Gateway
from gatecell.store import Store, default_store, settings
from gatecell.store.prices import Price, model_info_prices

KEY = "sk-costs-0123456789abcdef"
HI = [{"role": "user", "content": "hi"}]
HUGE = "1e308"
USAGE = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
INFO = {
    "data": [
        {
            "model_name": "priced",
            "model_info": {"input_cost_per_token": 1e303, "output_cost_per_token": 1e303},
        },
        {"model_name": "fair", "model_info": {"input_cost_per_token": 2.5e-6, "output_cost_per_token": 1e-5}},
    ]
}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, body: bytes, content_type: str, headers: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/model/info"):
            return self._send(json.dumps(INFO).encode(), "application/json", {})
        self._send(json.dumps({"object": "list", "data": []}).encode(), "application/json", {})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        model = body["model"]
        message = {"role": "assistant", "content": "ok"}
        if body.get("stream"):
            usage = {**USAGE, "cost": 1e308}
            events = [
                {"id": "c", "model": model, "choices": [{"index": 0, "delta": {"content": "ok"}}]},
                {"id": "c", "model": model, "choices": [], "usage": usage},
            ]
            data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            return self._send(data.encode(), "text/event-stream", {})
        answer = {"id": "c", "model": model, "usage": USAGE, "choices": [{"index": 0, "message": message}]}
        headers = {"x-litellm-response-cost": HUGE} if model == "said" else {}
        self._send(json.dumps(answer).encode(), "application/json", headers)


@pytest.fixture
def gateway():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _strict(text: str) -> list[dict[str, Any]]:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in what must be JSON: {text[:300]}")

    return [json.loads(line, parse_constant=refuse) for line in text.splitlines()]


def _usage(home: Path, *argv: str, prices: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    env["GATECELL_HOME"] = str(home)
    if prices is not None:
        env["GATECELL_PRICES"] = str(prices)
    return subprocess.run(
        [sys.executable, "-m", "gatecell", "usage", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_hostile_costs_are_never_kept_nor_summed_and_usage_json_is_strict(gateway, home):
    with Gateway(gateway, KEY, max_retries=0) as gw:
        said = [gw.chat("said", HI) for _ in range(2)]
        streamed = gw.chat("streamed", HI, stream=True)
        streamed.read()
        priced = gw.chat("priced", HI)
        fair = gw.chat("fair", HI)
    assert [reply.meta.cost for reply in said] == [None, None]  # 1e308 is no cost
    assert priced.meta.cost is None  # 1e303 a token is no price
    assert fair.meta.cost == pytest.approx((3 * 2.5 + 4 * 10) / 1e6)
    assert default_store().flush(30)
    logged = {row["model"]: row["cost"] for row in Store(settings().path, log=False).logs(n=0)}
    assert logged == {"said": None, "streamed": None, "priced": None, "fair": pytest.approx(4.75e-5)}
    prices = sqlite3.connect(settings().path).execute("SELECT model FROM model_prices WHERE model != ''")
    assert [model for (model,) in prices] == ["fair"]  # the hostile price was not kept

    done = _usage(home, "--json")
    assert done.returncode == 0, done.stderr
    costs = {row["model"]: row["cost"] for row in _strict(done.stdout)}
    assert costs["said"] is None and costs["fair"] == pytest.approx(4.75e-5)


def test_figures_an_older_gatecell_kept_are_checked_when_read_back(gateway, home, tmp_path):
    with Gateway(gateway, KEY, max_retries=0) as gw:
        for _ in range(2):
            gw.chat("fair", HI)
    assert default_store().flush(30)
    with sqlite3.connect(settings().path) as db:  # what an older gatecell kept
        db.execute("UPDATE exchanges SET cost = 1e308")  # two of them sum to inf
        db.execute("UPDATE model_prices SET input_cost_per_token = 1e303 WHERE model = 'fair'")
    done = _usage(home, "--json")
    assert done.returncode == 0, done.stderr
    [row] = _strict(done.stdout)
    assert row["cost"] is None and row["requests"] == 2
    assert "fair" not in {model for _, model in Store(settings().path, log=False).pricing().model_info}
    table = _usage(home)
    assert table.returncode == 0 and "inf" not in table.stdout.lower()


def test_a_prices_file_past_the_bound_is_one_line(home, tmp_path):
    for text in ('{"m": {"input": 1e400, "output": 1}}', '{"m": {"input": 1e300, "output": 1}}'):
        prices = tmp_path / "prices.json"
        prices.write_text(text)
        done = _usage(home, "--json", prices=prices)
        assert done.returncode == 1
        [line] = done.stderr.splitlines()
        assert line.startswith(
            f"gatecell: GATECELL_PRICES ({prices}): 'm' needs numbers 'input' and 'output'"
        )


def test_model_info_prices_are_bounded():
    assert model_info_prices(INFO) == {"fair": Price(2.5, 10.0)}
