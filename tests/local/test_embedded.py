"""The in-process starter, the server entry point and key hygiene."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import httpx

from gatecell.local import embedded, server
from gatecell.local.config import Config, keys_from


def test_start_is_once_per_process(local_gateway):
    again = embedded.start(pace=5.0)
    assert again is local_gateway
    assert local_gateway.base_url.startswith("http://127.0.0.1:") and not local_gateway.base_url.endswith(
        "/v1"
    )
    assert local_gateway.api_key.reveal().startswith("sk-local-")
    assert local_gateway.api_key.reveal() not in repr(local_gateway)


def test_keys_from_the_environment(monkeypatch):
    monkeypatch.setenv("GATECELL_LOCAL_KEYS", " sk-one-111111111 ,sk-two-222222222,")
    config = Config.create()
    assert [k.reveal() for k in config.api_keys] == ["sk-one-111111111", "sk-two-222222222"]
    assert not config.generated_key
    assert keys_from(["sk-x-0123456789ab"])[0].reveal() == "sk-x-0123456789ab"
    monkeypatch.delenv("GATECELL_LOCAL_KEYS")
    fresh = Config.create()
    assert fresh.generated_key and fresh.api_keys[0].reveal().startswith("sk-local-")
    assert server.new_key() != server.new_key()


def test_every_configured_key_works(make_gateway):
    gw = make_gateway(api_keys="sk-first-000000000,sk-second-00000000")
    for key in ("sk-first-000000000", "sk-second-00000000"):
        assert (
            httpx.get(f"{gw.base_url}/v1/models", headers={"authorization": f"Bearer {key}"}).status_code
            == 200
        )


def test_log_filter_masks_keys():
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s "GET /v1beta/x?key=%s"',
        ("1.2.3.4", "sk-secret-abcdefgh1234"),
        None,
    )
    assert server._Redact().filter(record)
    assert record.args[0] == "1.2.3.4"  # formatters that unpack the arguments still can
    assert "sk-secret-abcdefgh1234" not in record.getMessage() and "1234" in record.getMessage()


def test_serve_prints_a_generated_key_and_logs_none(tmp_path):
    """`serve()` in a child process: the generated key is printed once, and request logs never show it."""
    script = textwrap.dedent(
        """
        import socket, sys, threading, time, httpx
        from gatecell.local import server
        s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
        def hit():
            for _ in range(200):
                try:
                    httpx.get(f"http://127.0.0.1:{port}/health"); break
                except httpx.HTTPError:
                    time.sleep(0.05)
            httpx.get(f"http://127.0.0.1:{port}/v1/models?key=sk-leaky-0123456789",
                      headers={"authorization": "Bearer sk-nope-0000000000"})
            import os; os._exit(0)
        threading.Thread(target=hit, daemon=True).start()
        server.serve(port=port, log_level="info", access_log=True)
        """
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    out = done.stdout + done.stderr
    keys = [w for w in out.split() if w.startswith("sk-local-")]
    assert len(keys) == 1, out
    assert "GET /v1/models" in out and "sk-leaky-0123456789" not in out
    assert "Traceback" not in out and "Logging error" not in out


def test_options_fall_back_to_the_environment(monkeypatch):
    monkeypatch.setenv("GATECELL_LOCAL_PACE", "0.25")
    monkeypatch.setenv("GATECELL_LOCAL_JOB_SECONDS", "1.5")
    monkeypatch.setenv("GATECELL_LOCAL_MAX_BODY", "4096")
    config = Config.create("sk-env-000000000")
    assert (config.pace, config.job_seconds, config.max_body) == (0.25, 1.5, 4096)
    assert Config.create("sk-env-000000000", pace=0.0).pace == 0.0
    monkeypatch.setenv("GATECELL_LOCAL_PACE", "slow")
    try:
        Config.create("sk-env-000000000")
    except ValueError as exc:
        assert "GATECELL_LOCAL_PACE" in str(exc)
    else:
        raise AssertionError("a non-numeric pace was accepted")


def test_embedded_gateway_shuts_down_cleanly_at_exit():
    script = textwrap.dedent(
        """
        import httpx
        from gatecell.local.embedded import start
        gw = start()
        key = gw.api_key.reveal()
        messages = [{"role": "user", "content": "count to 50"}]
        body = {"model": "local-chat", "stream": True, "messages": messages}
        with httpx.stream("POST", gw.base_url + "/v1/chat/completions", json=body,
                          headers={"authorization": "Bearer " + key}) as r:
            next(r.iter_lines())  # leave a stream open at exit
            print("served", r.status_code)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "served 200"
    assert "Traceback" not in done.stderr and "sk-local-" not in done.stderr
