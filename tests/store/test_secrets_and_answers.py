"""Issue 20, items 4, 6 and 13 (the store's side): the log keeps no secret, in any column, in
any form; and a cache row dated in the future, or holding an empty reply, answers nothing.

Each secret below was stored verbatim before: other services' keys, a password assigned in a
prompt, a connection string, the client's key base64-encoded or split across lines, a key a
gateway sent as JSON ``\\u`` escapes in the raw reply, a key in the gateway's base URL (its
path), in a model name or a media type. What is checked is the database file's bytes, with
its write-ahead log, and what ``gatecell logs --json`` prints.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
from pathlib import Path

from store_helpers import chat_body, run_cli

from gatecell.store import Store, cache_key
from gatecell.wire.util.secret import Secret

CHAT = "/v1/chat/completions"
CLIENT = Secret("gw-live-Zq9XbT4mW2pL7vRkAbCdEf")  # the client's key: no shape to go by
GITHUB = "ghp_" + "Ef3" * 12
GOOGLE = "AIzaSyD3xKq7Wm2Lp9Rv4Tb8Nc1Zj6Hs0Ye5Ua"
SLACK = "xoxb-1234567890-1234567890-" + "Vw1" * 8
PASSWORD = "pa55-hunter2-word"
DB_PASSWORD = "pg-s3cret-pw"


def _file_bytes(path: Path) -> bytes:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # some rows in the file, any others in -wal
    return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))


def _pieces(secret: str) -> list[bytes]:
    """The secret and its middle (a mask keeps at most a few characters of each end)."""
    return [secret.encode(), secret[4:-4].encode()]


def test_no_column_keeps_a_secret_in_any_form(store: Store, home: Path):
    key = CLIENT.reveal()
    encoded = base64.b64encode(f"user:{key}".encode()).decode()
    escaped = "".join(f"\\u{ord(c):04x}" for c in key)
    prompt = (
        f"my tokens: {GITHUB} {GOOGLE} {SLACK}\n"
        f"password = '{PASSWORD}'\n"
        f"engine = create_engine('postgresql://admin:{DB_PASSWORD}@db.example/app')\n"
        f"Authorization: Basic {encoded}\n"
        f"wrapped: {key[:12]}\n   {key[12:]}"
    )
    store.record_exchange(
        CHAT,
        f"model-{GITHUB}",
        chat_body(prompt, model="m", metadata={"api_key": "short-but-named"}),
        response=f'{{"choices": [{{"message": {{"content": "{escaped}"}}}}]}}'.encode(),
        text=f"the key is {key}",
        reasoning=f"it said {SLACK}",
        error=f"401: GET https://gw.example/v1?api_key={key}&x=1",
        request_id=f"req-{GOOGLE}",
        api=f"chat-{GITHUB}",
        gateway=f"https://gw.example/{key}/v1",
        media=b"\x89PNG",
        media_type=f"image/png; k={GOOGLE}",
        usage={"prompt_tokens": 1, "note": SLACK},
        secrets=(CLIENT,),
    )
    store.record_job(
        "video",
        f"job-{GOOGLE}",
        gateway=f"https://gw.example/{key}",
        model=f"vid-{GITHUB}",
        prompt=f"waves, password={PASSWORD}",
        state=f"running {SLACK}",
        error=f"failed for {key}",
        body={"token": key, "nested": [f"Bearer {GITHUB}"]},
        secrets=(CLIENT,),
    )
    assert store.flush(30)
    [row] = store.logs()
    assert row["response"].startswith("the key is gw-…") and row["messages"]  # written, masked
    stored = _file_bytes(store.path)
    printed = run_cli("logs", "--json", home=home).stdout + run_cli("jobs", "--json", home=home).stdout
    assert "the key is" in printed and "job-" in printed  # the commands printed the rows
    secrets = (key, GITHUB, GOOGLE, SLACK, PASSWORD, DB_PASSWORD, encoded.rstrip("=")[8:], "short-but-named")
    for secret in secrets:
        for piece in _pieces(secret):
            assert piece not in stored, secret
            assert piece.decode() not in printed, secret
    assert escaped[6:60].encode() not in stored  # the escaped form neither


def test_a_cache_row_dated_in_the_future_answers_nothing(store: Store):
    body = chat_body("what is 2+2?", model="m")
    key = cache_key(CHAT, "m", body, "http://gw:1")
    store.record_exchange(
        CHAT, "m", body, text="planted: 5", gateway="http://gw:1", at=time.time() + 365 * 86400
    )
    assert store.flush(30)
    assert store.lookup(key) is None and key not in (store.answer_keys() or set())
    store.record_exchange(CHAT, "m", body, text="4", gateway="http://gw:1", at=time.time() - 1)
    assert store.flush(30)
    found = store.lookup(key)
    assert found is not None and found.text == "4" and key in (store.answer_keys() or set())
    assert json.loads(json.dumps(found.text)) == "4"


def test_an_empty_reply_answers_nothing(store: Store):
    """Issue 20, item 13 (the store's side): a map row answered empty was never sent again."""
    empty, tools = chat_body("say nothing", model="m"), chat_body("call a tool", model="m")
    empty_body = {"choices": [{"message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    tool_body = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    store.record_exchange(CHAT, "m", empty, text="", response=empty_body, gateway="http://gw:1")
    store.record_exchange(
        CHAT, "m", chat_body("stream", model="m", stream=True), text=None, gateway="http://gw:1"
    )
    store.record_exchange(CHAT, "m", tools, text=None, response=tool_body, gateway="http://gw:1")
    assert store.flush(30)
    assert store.lookup(cache_key(CHAT, "m", empty, "http://gw:1")) is None
    assert store.lookup(cache_key(CHAT, "m", chat_body("stream", model="m"), "http://gw:1")) is None
    found = store.lookup(cache_key(CHAT, "m", tools, "http://gw:1"))
    assert found is not None and found.response == tool_body  # a tool call is a reply
