"""The ``gatecell`` command, run as a real subprocess against real gateways on loopback."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import httpx
import pytest

from gatecell.connect import NOTICE

CLI = [sys.executable, "-m", "gatecell"]


def run(
    *args: str, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    return subprocess.run(
        [*CLI, *args], env={**base, **(env or {})}, input=input, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def gateway_env(local_gateway) -> dict[str, str]:
    return {"GATECELL_BASE_URL": local_gateway.base_url, "GATECELL_API_KEY": local_gateway.api_key.reveal()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_chat_streams_the_same_text_as_a_whole_reply(gateway_env):
    streamed = run("chat", "Name three colours.", env=gateway_env)
    whole = run("chat", "--no-stream", "Name three colours.", env=gateway_env)
    assert streamed.returncode == 0, streamed.stderr
    assert whole.returncode == 0, whole.stderr
    assert streamed.stdout.strip()
    assert streamed.stdout == whole.stdout


def test_chat_reads_stdin_and_uses_system_prompt(gateway_env):
    plain = run("chat", "-", env=gateway_env, input="hello there")
    with_system = run("chat", "-s", "Answer like a pirate.", "-", env=gateway_env, input="hello there")
    assert plain.returncode == 0 and with_system.returncode == 0
    assert plain.stdout.strip() and plain.stdout != with_system.stdout


def test_models_lists_the_local_models(gateway_env):
    out = run("models", env=gateway_env)
    assert out.returncode == 0, out.stderr
    ids = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    assert {"local-chat", "local-reasoner"} <= ids


def test_wrong_key_is_one_line_without_the_key(gateway_env):
    bad = "sk-wrong-" + "x" * 24
    out = run("chat", "hi", env={**gateway_env, "GATECELL_API_KEY": bad})
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert "401" in lines[0] and "Traceback" not in out.stderr
    assert bad not in out.stderr + out.stdout


def test_out_of_range_temperature_is_refused_before_any_request():
    closed = f"http://127.0.0.1:{free_port()}"  # nothing listens: a request would fail differently
    out = run(
        "chat", "-t", "3", "hi", env={"GATECELL_BASE_URL": closed, "GATECELL_API_KEY": "sk-" + "a" * 30}
    )
    assert out.returncode == 1
    assert out.stderr.strip() == "gatecell: temperature: must be between 0 and 2, got 3.0"


def test_unreachable_gateway_is_one_line():
    closed = f"http://127.0.0.1:{free_port()}"
    out = run("models", env={"GATECELL_BASE_URL": closed})
    assert out.returncode == 1
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_without_settings_the_embedded_gateway_answers_and_says_so_once():
    out = run("chat", "--no-stream", "hello")
    assert out.returncode == 0, out.stderr
    (line,) = out.stderr.splitlines()
    url = re.search(r"http://127\.0\.0\.1:\d+", line).group(0)
    assert line == NOTICE.format(url=url)
    assert "I am local-chat" in out.stdout


def test_a_model_the_gateway_does_not_serve_gets_one_line_naming_those_it_does(gateway_env):
    explicit = run("chat", "-m", "no-such-model", "hi", env=gateway_env)
    default = run("chat", "hi", env={**gateway_env, "GATECELL_MODEL": "no-such-model"})
    for out, how in ((explicit, "choose one with -m MODEL"), (default, "-m MODEL or GATECELL_MODEL")):
        assert out.returncode == 1
        (line,) = out.stderr.splitlines()
        assert line.startswith(
            "gatecell: 404 from POST /v1/chat/completions: model 'no-such-model' not found"
        )
        assert "the gateway does not serve 'no-such-model'; it serves local-chat" in line
        assert line.endswith(how) and "local-image" not in line  # chat models, those that fit, first


def test_serve_answers_with_the_given_key_and_refuses_others():
    port, key = free_port(), "sk-cli-" + "k" * 24
    base = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    proc = subprocess.Popen(
        [*CLI, "serve", "--port", str(port), "--api-key", key, "--log-level", "warning"],
        env=base,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1/models"
        deadline = time.monotonic() + 30
        while True:
            try:
                ok = httpx.get(url, headers={"Authorization": f"Bearer {key}"})
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "gatecell serve did not start"
                time.sleep(0.1)
        assert ok.status_code == 200
        assert any(m["id"] == "local-chat" for m in ok.json()["data"])
        assert httpx.get(url, headers={"Authorization": "Bearer sk-other-" + "o" * 20}).status_code == 401
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_serve_help_names_the_relay_cap_and_its_variable():
    out = run("serve", "--help").stdout
    assert "--max-relay BYTES" in out and "GATECELL_LOCAL_MAX_RELAY" in out


def test_lab_serves_the_tutorials_and_its_kernels_use_its_local_gateway(tmp_path, kernel_cells):
    """The README's main command: JupyterLab on notebooks/, its kernels pointed at one local
    gateway that they know as such (``%gatecell config``; the first magic says so once)."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GATECELL_", "OPENAI_"))}
    runtime = tmp_path / "rt"
    env = {**base, "JUPYTER_RUNTIME_DIR": str(runtime), "JUPYTER_CONFIG_DIR": str(tmp_path / "cfg")}
    proc = subprocess.Popen(
        [*CLI, "lab", "--port", str(port), "--no-browser", "--IdentityProvider.token=gatecell-test"],
        env=env,
        cwd=tmp_path,  # not a checkout: the tutorials are found where gatecell runs from
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    api = f"http://127.0.0.1:{port}/api"
    headers = {"Authorization": "token gatecell-test"}
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                listing = httpx.get(f"{api}/contents", headers=headers)
                if listing.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "gatecell lab did not start"
            time.sleep(0.3)
        names = {item["name"] for item in listing.json()["content"]}
        assert "01-quickstart.ipynb" in names
        kernel = httpx.post(f"{api}/kernels", headers=headers, json={"name": "python3"}).json()
        shown = kernel_cells(
            runtime / f"kernel-{kernel['id']}.json",
            "import os; print(os.environ.get('GATECELL_BASE_URL'))",
            "%load_ext gatecell",
            "%gatecell config",
            "%chat hello",
            "%chat hello again",
        )
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    notice = next(line for line in out.splitlines() if line.startswith("gatecell: "))
    url = re.search(r"http://127\.0\.0\.1:\d+", notice).group(0)
    assert notice == NOTICE.format(url=url)  # the lab process chose the local gateway, and said so
    assert all(cell["ok"] for cell in shown), shown
    assert shown[0]["stdout"] == "None\n"  # the kernels are not told of a configured gateway...
    config = shown[2]["text"]
    assert f"{url} (local gateway of gatecell lab)" in config and "the local gateway's own" in config
    assert shown[3]["stderr"] == ""  # ...and use the lab's, saying so once, in a display of its own
    assert shown[3]["displays"][0]["data"]["text/plain"] == NOTICE.format(url=url)
    assert "local-chat" in shown[3]["text"]
    assert shown[4]["stderr"] == "" and shown[4]["text"]
