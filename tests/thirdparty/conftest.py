"""LiteLLM's proxy, a real third-party gateway, started once per test session.

It runs from a venv of its own (``make litellm`` makes ``.venv-litellm``; or set
GATECELL_LITELLM_VENV), on a free loopback port, with a master key and prices for its chat
and reasoning models (`litellm_prices.PRICES`), offline: its model
cost map is the local copy (LITELLM_LOCAL_MODEL_COST_MAP), every outside address goes to a
closed loopback proxy port, and its models forward to the embedded local gateway of this
test process as an openai-compatible provider, so no prompt ever leaves the machine.

Without the venv these tests fail, saying how to make it; deselect them with
``-m "not litellm"``.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from litellm_prices import PRICES

ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = 120.0
_started: list[float] = []  # seconds from spawn to /health/liveliness, for the summary

# model name at LiteLLM -> (the local gateway's model, LiteLLM's mode)
MODELS = {
    "lite-chat": ("local-chat", "chat"),
    "lite-reasoner": ("local-reasoner", "responses"),
    "lite-image": ("local-image", "image_generation"),
    "lite-tts": ("local-tts", "audio_speech"),
}


@dataclass(frozen=True)
class LiteLLM:
    base_url: str
    key: str
    startup_seconds: float

    @property
    def env(self) -> dict[str, str]:
        """What points gatecell at this proxy."""
        return {"GATECELL_BASE_URL": self.base_url, "GATECELL_API_KEY": self.key}


def _venv() -> Path:
    venv = Path(os.environ.get("GATECELL_LITELLM_VENV") or ".venv-litellm")
    return venv if venv.is_absolute() else ROOT / venv


def _prices(name: str) -> str:
    if name not in PRICES:
        return ""
    per_input, per_output = PRICES[name]
    return f"""
      input_cost_per_token: {per_input}
      output_cost_per_token: {per_output}"""


def _config(upstream: str, upstream_key: str, master_key: str) -> str:
    models = "".join(
        f"""
  - model_name: {name}
    litellm_params:
      model: openai/{local}
      api_base: {upstream}/v1
      api_key: {upstream_key}{_prices(name)}
    model_info:
      mode: {mode}
      supports_reasoning: {str(mode == "responses").lower()}
      supports_response_schema: {str(name == "lite-chat").lower()}"""
        for name, (local, mode) in MODELS.items()
    )
    # /v1/messages goes through chat completions upstream (LiteLLM would pick /v1/responses).
    return f"""model_list:{models}
litellm_settings:
  use_chat_completions_url_for_anthropic_messages: true
general_settings:
  master_key: {master_key}
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def litellm(local_gateway, tmp_path_factory):
    exe = _venv() / "bin" / "litellm"
    if not exe.exists():
        pytest.fail(
            f"LiteLLM's proxy is not installed ({exe} missing): run `make litellm`, "
            "or deselect these tests with -m 'not litellm'",
            pytrace=False,
        )
    folder = tmp_path_factory.mktemp("litellm")
    master = "sk-master-" + secrets.token_urlsafe(16)
    config = folder / "config.yaml"
    config.write_text(_config(local_gateway.base_url, local_gateway.api_key.reveal(), master))
    port = _free_port()
    closed = f"http://127.0.0.1:{_free_port()}"  # nothing listens: a request meant to leave fails here
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_", "LITELLM_"))}
    env.update(
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HTTP_PROXY=closed,
        HTTPS_PROXY=closed,
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    log = (folder / "litellm.log").open("w")
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=folder,
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                if httpx.get(base_url + "/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() - started > STARTUP_TIMEOUT:
                tail = (folder / "litellm.log").read_text()[-2000:]
                pytest.fail(f"LiteLLM's proxy did not start:\n{tail}", pytrace=False)
            time.sleep(0.1)
        _started.append(time.monotonic() - started)
        yield LiteLLM(base_url, master, _started[-1])
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _summary() -> list[str]:
    return [f"LiteLLM's proxy: ready {seconds:.1f} s after it was started" for seconds in _started]


def pytest_sessionfinish(session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller prints it (tests/conftest.py)
        workeroutput["summary"] = _summary()


def pytest_terminal_summary(terminalreporter) -> None:
    for line in _summary():
        terminalreporter.write_line(line)
