"""Issue 9, item 15: keys stay out of ``ps``, and the URLs a gateway hands out are its own.

``--api-key`` remains, but ``--help`` says it shows in ``ps`` and points to the safe ways: the
GATECELL_LOCAL_KEYS variable and a key file (``--api-key-file``, GATECELL_LOCAL_KEY_FILE).
File URLs in responses come from the configured public URL or the address the client
connected to, never from the request's Host header, which any client can forge.
"""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
import pytest
from probes import bearer, serving

from gatecell.local.config import Config

KEY = "sk-file-" + "f" * 24
FORGED = {"host": "evil.example:666", "x-forwarded-host": "evil.example", "x-forwarded-proto": "https"}


def test_serve_help_says_where_keys_are_safe():
    out = subprocess.run(
        [sys.executable, "-m", "gatecell", "serve", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    flat = " ".join(out.split())
    assert "--api-key-file PATH" in out and "GATECELL_LOCAL_KEY_FILE" in flat
    assert "GATECELL_LOCAL_KEYS" in flat and " ps" in flat


def test_serve_takes_its_keys_from_a_file_and_not_the_command_line(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"# my gateway's keys\n\n  {KEY}  \nsk-second-{'2' * 20}\n")
    keys.chmod(0o600)
    with serving("--api-key-file", str(keys)) as (proc, base):
        for key in (KEY, f"sk-second-{'2' * 20}"):
            assert httpx.get(f"{base}/v1/models", headers=bearer(key)).status_code == 200
        assert httpx.get(f"{base}/v1/models", headers=bearer("# my gateway's keys")).status_code == 401
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            assert KEY.encode() not in f.read()
    with serving(env={"GATECELL_LOCAL_KEY_FILE": str(keys)}) as (_, base):
        assert httpx.get(f"{base}/v1/models", headers=bearer(KEY)).status_code == 200


def test_a_bad_key_file_is_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.write_text("\n# nothing\n")
    empty.chmod(0o600)
    for path in (empty, tmp_path / "missing"):
        done = subprocess.run(
            [sys.executable, "-m", "gatecell", "serve", "--api-key-file", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.count("\n") == 1 and str(path) in done.stderr


def test_explicit_keys_replace_the_environments(tmp_path, monkeypatch):
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n")
    keys.chmod(0o600)
    monkeypatch.setenv("GATECELL_LOCAL_KEYS", "sk-env-" + "e" * 20)
    assert [k.reveal() for k in Config.create(api_key_file=keys).api_keys] == [KEY]
    monkeypatch.setenv("GATECELL_LOCAL_KEY_FILE", str(keys))
    assert [k.reveal() for k in Config.create().api_keys] == ["sk-env-" + "e" * 20, KEY]


def _file_urls(base_url: str, key: str, headers: dict[str, str]) -> list[str]:
    """The URLs of an image, an imagine job and a music job, asked for with `headers`."""
    with httpx.Client(base_url=base_url, headers={**bearer(key), **headers}, timeout=30) as client:
        image = client.post(
            "/v1/images/generations",
            json={"model": "local-image", "prompt": "x", "size": "64x64", "response_format": "url"},
        )
        shot = client.post("/imgjob/submit/imagine", json={"prompt": "x"}).json()["result"]
        song = client.post("/musicjob/submit/music", json={"prompt": "x", "seconds": 1}).json()["data"]
        urls = [image.json()["data"][0]["url"]]
        for _ in range(600):
            polled = client.get(f"/imgjob/task/{shot}/fetch").json()
            tune = client.get(f"/musicjob/fetch/{song}").json()["data"]
            if polled["status"] == "SUCCESS" and tune["status"] == "SUCCESS":
                return [*urls, polled["imageUrl"], tune["data"][0]["audio_url"]]
            time.sleep(0.05)
        raise AssertionError("the jobs did not finish")


def test_file_urls_ignore_a_forged_host(make_gateway):
    gw = make_gateway(api_keys=[KEY], job_seconds=0)
    urls = _file_urls(gw.base_url, KEY, FORGED)
    assert len(urls) == 3
    for url in urls:
        assert url.startswith(f"{gw.base_url}/files/"), url
        assert httpx.get(url, headers=bearer(KEY)).status_code == 200


@pytest.mark.parametrize("public", ["https://gateway.example/", "http://10.0.0.5:8000/v1"])
def test_file_urls_use_the_configured_public_url(make_gateway, monkeypatch, public):
    monkeypatch.setenv("GATECELL_LOCAL_PUBLIC_URL", public)
    gw = make_gateway(api_keys=[KEY], job_seconds=0)
    root = public.rstrip("/").removesuffix("/v1")
    for url in _file_urls(gw.base_url, KEY, FORGED):
        assert url.startswith(f"{root}/files/"), url
