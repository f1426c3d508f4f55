"""Issue 20, item 1: a key a gateway echoes in a request id is never shown, raised or saved.

A hostile gateway on loopback (hostile_gateway.py) puts a key in ``x-request-id``: the
client's own key when it is not ``sk-`` shaped (an Azure-style hex key, a key of a gateway's
own making, in another letter case), or another service's key (Google's ``AIza…``). The
request id reaches ``str(e)``, ``repr(e)`` and ``e.request_id`` of an error, a result's
provenance, the notebook's one-line error, the ``--footer`` line and the display metadata
saved with a notebook: none may hold the key.
"""

from __future__ import annotations

import json

import hostile_gateway as evil
import nbformat
import pytest
from probes import pointed_at

from gatecell.gateway import Gateway
from gatecell.store import default_store
from gatecell.wire.transport.errors import APIError

AZURE = "3f2a9c4b7d1e4f60a8b5c2d9e7f1a3b4"  # 32 hex digits: nothing in its shape says "key"
GOOGLE = "AIzaSyD3xK" + "q7Wm2Lp9Rv4Tb8Nc1Zj6Hs0" + "Ye5Ua"  # another service's key
CUSTOM = "gw-live-Zq9XbT4mW2pL7vRkAbCd"  # a gateway's own key format

CASES = {  # the client's key, the request id the gateway sends back, the secrets in it
    "azure key echoed": (AZURE, f"req-{AZURE}", [AZURE]),
    "google key echoed": ("sk-client-" + "c" * 24, GOOGLE, [GOOGLE]),
    "own key in upper case": (CUSTOM, f"id {CUSTOM.upper()}", [CUSTOM]),
}


def _clean(text: str, secrets: list[str]) -> bool:
    folded = text.lower()
    return not any(secret.lower() in folded or secret.lower()[6:-4] in folded for secret in secrets)


@pytest.fixture
def echoing(request):
    """A hostile gateway echoing the case's request id, and the case."""
    key, request_id, secrets = CASES[request.param]
    server = evil.start(request_id=request_id)
    yield server, key, secrets
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("echoing", CASES, indirect=True)
def test_errors_and_results_never_hold_the_echoed_key(echoing):
    server, key, secrets = echoing
    messages = [{"role": "user", "content": "hi"}]
    with Gateway(base_url=server.base_url, api_key=key, log=False) as gw:
        with pytest.raises(APIError) as caught:
            gw.chat(model="hostile-error", messages=messages)
        error = caught.value
        assert error.request_id and error.request_id.startswith(("req-", "AIz", "id "))  # it is there...
        for shown in (str(error), repr(error), error.request_id, error.message, error.args[0]):
            assert _clean(shown, secrets), shown  # ...masked
        reply = gw.chat(model="hostile-chat", messages=messages)
        stream = gw.chat(model="hostile-chat", messages=messages, stream=True)
        stream.text  # noqa: B018 - read to its end
        for meta in (reply.meta, stream.meta):
            assert meta.request_id and _clean(meta.request_id, secrets) and _clean(repr(meta), secrets)


@pytest.fixture
def echoing_shell(echoing, ipshell, monkeypatch, tmp_path):
    """gatecell in the shell, pointed at the echoing gateway with the case's key."""
    server, key, secrets = echoing
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GATECELL_API_KEY", key)
    monkeypatch.setenv("GATECELL_HOME", str(tmp_path / "home"))
    with pointed_at(ipshell, server.base_url):
        yield secrets


@pytest.mark.parametrize("echoing", CASES, indirect=True)
def test_the_notebook_shows_and_keeps_no_echoed_key(echoing_shell, cell_runner):
    secrets = echoing_shell
    failed, captured = cell_runner("%chat -m hostile-error hi")
    assert not failed.success and captured.stderr.startswith("gatecell: 400")
    assert "(request id " in captured.stderr and _clean(captured.stderr, secrets), captured.stderr
    for cell in ("%%chat --footer -m hostile-chat\nhi", "%%chat --no-stream --footer -m hostile-chat\nhi"):
        result, captured = cell_runner(cell)
        assert result.success, result.error_in_exec
        final = captured.outputs[-1]
        assert "request " in final.data["text/plain"].rsplit("-- ", 1)[1]  # the footer names the request
        saved = json.dumps([{"data": o.data, "metadata": o.metadata} for o in captured.outputs])
        assert final.metadata["gatecell"]["request_id"] and _clean(saved, secrets), saved
        assert _clean(str(result.result.prov), secrets)


def test_a_saved_notebook_holds_no_echoed_key(tmp_path, monkeypatch):
    """Run in a real kernel and saved as a user saves it: the file has no key in any case."""
    from nbclient import NotebookClient

    server = evil.start(request_id=f"{AZURE.upper()} {GOOGLE} {AZURE}")
    for name in [n for n in __import__("os").environ if n.startswith(("GATECELL_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATECELL_API_KEY", AZURE)
    monkeypatch.setenv("GATECELL_HOME", str(tmp_path / "home"))
    cells = [
        "%load_ext gatecell",
        f"%config Gatecell.base_url = {server.base_url!r}",
        "%%chat --footer -m hostile-chat\nhi",
        "r = %chat --no-stream --footer -m hostile-chat hi again",
        "r.prov",
        "%chat -m hostile-error hi",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    try:
        NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True).execute()
    finally:
        server.shutdown()
        server.server_close()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    text = path.read_text(encoding="utf-8")
    assert "request " in text and "gatecell: 400" in text  # the cells ran, footers and error shown
    assert _clean(text, [AZURE, GOOGLE]), text


def test_a_key_sent_as_json_escapes_is_stored_and_replayed_masked(tmp_path, monkeypatch):
    """Issue 20, item 4: the raw reply the cache replays held the key as ``\\u`` escapes."""
    monkeypatch.setenv("GATECELL_HOME", str(tmp_path / "home"))
    server = evil.start(escaped=True, reply=f"your key is {AZURE}, keep it safe")
    messages = [{"role": "user", "content": "what is my key?"}]
    try:
        with Gateway(base_url=server.base_url, api_key=AZURE, cache=True) as gw:
            live = gw.chat(model="hostile-chat", messages=messages)
            assert AZURE in live.choices[0].message.content  # the reply itself is the model's, shown whole
            again = gw.chat(model="hostile-chat", messages=messages)  # the lookup waits for the log
    finally:
        server.shutdown()
        server.server_close()
    assert default_store().flush(30)
    assert again.meta.cached and again.choices[0].message.content.startswith("your key is 3f2…")
    assert _clean(again.model_dump_json(), [AZURE])
    stored = b"".join(p.read_bytes() for p in (tmp_path / "home").glob("gatecell.db*"))
    escaped = "".join(f"\\u{ord(c):04x}" for c in AZURE)
    assert AZURE.encode() not in stored and escaped[:60].encode() not in stored


ECHOED_MODELS = [  # a model list that names the client's key, and another service's
    {"id": f"chat-{AZURE}", "object": "model", "owned_by": GOOGLE},
    {"id": "plain-model", "object": "model", "owned_by": "x", "note": f"key={AZURE.upper()}"},
]


@pytest.fixture
def listing(monkeypatch, tmp_path):
    """A hostile gateway whose model list echoes the client's key (Azure-shaped: nothing in
    its shape says "key") and a Google key."""
    server = evil.start(models=ECHOED_MODELS)
    for name in [n for n in __import__("os").environ if n.startswith(("GATECELL_", "OPENAI_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GATECELL_API_KEY", AZURE)
    monkeypatch.setenv("GATECELL_HOME", str(tmp_path / "home"))
    yield server
    server.shutdown()
    server.server_close()


def test_a_model_list_never_holds_the_echoed_key(listing, ipshell, cell_runner):
    with Gateway(base_url=listing.base_url, api_key=AZURE, log=False) as gw:
        models = gw.models()
    assert models.ids == ["chat-3f2…a3b4", "plain-model"]  # listed, each id masked where it held the key
    assert _clean(repr(models), [AZURE, GOOGLE]) and _clean(json.dumps(models.raw), [AZURE, GOOGLE])
    with pointed_at(ipshell, listing.base_url):
        result, captured = cell_runner("%gatecell models")
    assert result.success, result.error_in_exec
    shown = json.dumps([o.data for o in captured.outputs])
    assert "plain-model" in shown and _clean(shown, [AZURE, GOOGLE]), shown


def test_the_cli_model_list_never_holds_the_echoed_key(listing):
    import subprocess
    import sys

    env = {**__import__("os").environ, "GATECELL_BASE_URL": listing.base_url}
    done = subprocess.run(
        [sys.executable, "-m", "gatecell", "models"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "plain-model" in done.stdout, done.stderr
    assert _clean(done.stdout + done.stderr, [AZURE, GOOGLE]), done.stdout
