"""The cache key: what makes two requests the same, and the same key in every process."""

from __future__ import annotations

import json
import sys

from store_helpers import chat_body, clean_env, run_child

from gatecell.store import cache_key
from gatecell.store.keys import gateway_address

CHAT = "/v1/chat/completions"
GW = "http://127.0.0.1:8000"


def test_streamed_and_plain_requests_share_a_key():
    plain = cache_key(CHAT, "m", chat_body("hi", model="m"), GW)
    streamed = json.loads(chat_body("hi", model="m", stream=True))
    streamed["stream_options"] = {"include_usage": True}
    assert cache_key(CHAT, "m", streamed, GW) == plain
    gen = "/v1beta/models/m:generateContent"
    assert cache_key(gen.replace(":generate", ":streamGenerate") + "?alt=sse", "m", {"contents": []}, GW) == (
        cache_key(gen, "m", {"contents": []}, GW)
    )


def test_bytes_text_and_dict_in_any_key_order_share_a_key():
    body = {"model": "m", "temperature": 0.2, "messages": [{"role": "user", "content": "héllo"}]}
    reordered = dict(reversed(list(body.items())))
    keys = {
        cache_key(CHAT, "m", body, GW),
        cache_key(CHAT, "m", reordered, GW),
        cache_key(CHAT, "m", json.dumps(body), GW),
        cache_key(CHAT, "m", json.dumps(body, ensure_ascii=False).encode(), GW),
    }
    assert len(keys) == 1


def test_every_part_of_the_request_changes_the_key():
    base = cache_key(CHAT, "m", chat_body("hi", model="m"), GW)
    variants = [
        cache_key("/v1/responses", "m", chat_body("hi", model="m"), GW),
        cache_key(CHAT, "other", chat_body("hi", model="m"), GW),
        cache_key(CHAT, "m", chat_body("hi!", model="m"), GW),
        cache_key(CHAT, "m", chat_body("hi", model="m", temperature=0.5), GW),
        cache_key(CHAT, "m", chat_body("hi", model="m"), "http://127.0.0.1:8001"),
    ]
    assert base not in variants and len(set(variants)) == len(variants)


def test_gateway_address_keeps_no_credentials_and_one_spelling():
    assert (
        gateway_address("https://user:sk-secretsecret@gw.example:8443/v1/?key=abc#x")
        == "https://gw.example:8443"
    )
    same = {gateway_address(u) for u in ("http://h:1", "http://h:1/", "http://h:1/v1", "http://h:1/v1/")}
    assert same == {"http://h:1"}
    assert gateway_address("http://h:1/proxy/") == "http://h:1/proxy"
    assert gateway_address(None) == ""
    assert cache_key(CHAT, "m", b"{}", "http://u:p@h:1/v1") == cache_key(CHAT, "m", b"{}", "http://h:1")


def test_the_key_is_the_same_in_other_processes_whatever_their_hash_seed():
    here = cache_key(CHAT, "m", chat_body("same everywhere", model="m"), GW)
    script = f"""
        from gatecell.store import cache_key
        print(cache_key({CHAT!r}, "m", {chat_body("same everywhere", model="m")!r}, {GW!r}))
    """
    for seed in ("1", "2"):
        out = run_child(script, clean_env(PYTHONHASHSEED=seed))
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == here, sys.version
