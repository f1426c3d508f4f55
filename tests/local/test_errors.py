"""Auth, statuses and error bodies, each in the endpoint's own format; no input gives a 500."""

from __future__ import annotations

import functools
import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CHAT = {"model": "local-chat", "messages": [{"role": "user", "content": "hi"}]}


def openai_error(r: httpx.Response) -> str:
    return r.json()["error"]["message"]


def test_missing_and_wrong_keys_are_401_in_each_format(local_gateway):
    base = local_gateway.base_url
    r = httpx.post(f"{base}/v1/chat/completions", json=CHAT)
    assert r.status_code == 401 and "API key" in openai_error(r)
    r = httpx.post(f"{base}/v1/messages", json=CHAT, headers={"x-api-key": "sk-wrong-000000000"})
    assert (
        r.status_code == 401
        and r.json()["error"]["type"] == "authentication_error"
        and r.json()["type"] == "error"
    )
    r = httpx.post(
        f"{base}/v1beta/models/local-chat:generateContent", json={}, headers={"x-goog-api-key": "sk-x"}
    )
    assert r.status_code == 401 and r.json()["error"]["status"] == "UNAUTHENTICATED"
    r = httpx.post(
        f"{base}/imgjob/submit/imagine", json={"prompt": "x"}, headers={"authorization": "Bearer sk-bad"}
    )
    assert r.status_code == 401 and r.json()["code"] == 401 and r.json()["description"]
    r = httpx.post(
        f"{base}/musicjob/submit/music", json={"prompt": "x"}, headers={"authorization": "Basic abc"}
    )
    assert r.status_code == 401 and r.json()["code"] == "error"


def test_native_key_headers_are_accepted_where_their_sdks_send_them(local_gateway):
    key = local_gateway.api_key.reveal()
    base = local_gateway.base_url
    body = {"model": "local-chat", "max_tokens": 8, "messages": [{"role": "user", "content": "say yes"}]}
    assert (
        httpx.post(f"{base}/v1/messages", json=body, headers={"x-api-key": key}).json()["content"][0]["text"]
        == "yes"
    )
    gen = {"contents": [{"parts": [{"text": "say yes"}]}]}
    r = httpx.post(
        f"{base}/v1beta/models/local-chat:generateContent", json=gen, headers={"x-goog-api-key": key}
    )
    assert r.json()["candidates"][0]["content"]["parts"][0]["text"] == "yes"
    # x-api-key is the messages endpoint's header, not a general one
    assert httpx.post(f"{base}/v1/chat/completions", json=CHAT, headers={"x-api-key": key}).status_code == 401


def test_a_prefix_of_the_key_is_not_the_key(local_gateway):
    key = local_gateway.api_key.reveal()
    for near in (key[:-1], key + "x", key.upper(), "sk-"):
        r = httpx.get(f"{local_gateway.base_url}/v1/models", headers={"authorization": f"Bearer {near}"})
        assert r.status_code == 401


def test_malformed_json_is_400(http):
    r = http.post(
        "/v1/chat/completions",
        content=b'{"model": "local-chat",',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 400 and "malformed JSON" in openai_error(r)
    r = http.post("/v1/chat/completions", content=b"[1, 2]")
    assert r.status_code == 400 and "JSON object" in openai_error(r)
    r = http.post("/v1/messages", content=b"nope")
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": -0.1}, "top_p"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages.0.role"),
        ({"model": None}, "model"),
        ({"max_tokens": 0}, "max_tokens"),
    ],
)
def test_a_broken_spec_rule_is_400_naming_the_field(http, change, field):
    r = http.post("/v1/chat/completions", json={**CHAT, **change})
    assert r.status_code == 400
    assert openai_error(r).startswith(f"{field}:")
    assert r.json()["error"]["param"] == field


def test_field_errors_on_the_other_endpoints(http):
    r = http.post("/v1/images/generations", json={"model": "local-image", "prompt": "x", "size": "big"})
    assert r.status_code == 400 and "size" in openai_error(r)
    r = http.post(
        "/v1/messages", json={"model": "local-chat", "messages": [{"role": "user", "content": "x"}]}
    )
    assert r.status_code == 400 and r.json()["error"]["message"].startswith("max_tokens:")
    r = http.post(
        "/v1/responses", json={"model": "local-reasoner", "input": "x", "reasoning": {"effort": "huge"}}
    )
    assert r.status_code == 400 and "reasoning.effort" in openai_error(r)
    r = http.post("/musicjob/submit/music", json={"prompt": "  "})
    assert r.status_code == 400 and r.json()["message"].startswith("prompt:")


def test_unknown_model_is_404_in_each_format(http, local_gateway):
    r = http.post("/v1/chat/completions", json={**CHAT, "model": "gpt-nothing"})
    assert r.status_code == 404 and "gpt-nothing" in openai_error(r)
    r = http.post("/v1/messages", json={**CHAT, "model": "claude-nothing", "max_tokens": 5})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    key = {"x-goog-api-key": local_gateway.api_key.reveal()}
    r = httpx.post(
        f"{local_gateway.base_url}/v1beta/models/gem-nothing:generateContent",
        json={"contents": [{"parts": [{"text": "x"}]}]},
        headers=key,
    )
    assert r.status_code == 404 and r.json()["error"]["status"] == "NOT_FOUND"


def test_a_model_on_the_wrong_endpoint_is_400_naming_the_right_one(http):
    r = http.post("/v1/chat/completions", json={**CHAT, "model": "local-image"})
    assert r.status_code == 400 and "/v1/images/generations" in openai_error(r)
    r = http.post("/v1/chat/completions", json={**CHAT, "model": "local-reasoner"})
    assert r.status_code == 400 and "/v1/responses" in openai_error(r)


def test_unknown_route_404_and_wrong_method_405(http):
    r = http.post("/v1/nothing/here", json={})
    assert r.status_code == 404 and "unknown route" in openai_error(r)
    r = http.get("/v1/chat/completions")
    assert r.status_code == 405 and r.headers["allow"] == "POST" and "POST" in openai_error(r)
    r = http.delete("/v1/messages")
    assert r.status_code == 405 and r.json()["type"] == "error"


def test_body_over_the_cap_is_413(make_gateway):
    gw = make_gateway(max_body=2048)
    headers = {"authorization": f"Bearer {gw.api_key.reveal()}"}
    big = {**CHAT, "messages": [{"role": "user", "content": "x" * 5000}]}
    r = httpx.post(f"{gw.base_url}/v1/chat/completions", json=big, headers=headers)
    assert r.status_code == 413 and "2048" in r.json()["error"]["message"]

    def chunked():  # no Content-Length: the cap is enforced while reading
        yield b'{"model": "local-chat", "messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"y" * 500
        yield b'"}]}'

    r = httpx.post(f"{gw.base_url}/v1/messages", content=chunked(), headers=headers)
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
    small = httpx.post(f"{gw.base_url}/v1/chat/completions", json=CHAT, headers=headers)
    assert small.status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/chat/completions",
        "/messages",
        "/responses",
        "/images/generations",
        "/audio/speech",
        "/videos",
        "/models",
    ],
)
def test_the_unversioned_base_serves_the_same_endpoints(http, path):
    bodies = {
        "/chat/completions": CHAT,
        "/messages": {**CHAT, "max_tokens": 10},
        "/responses": {"model": "local-reasoner", "input": "1+1"},
        "/images/generations": {"model": "local-image", "prompt": "a dot", "size": "64x64"},
        "/audio/speech": {"model": "local-tts", "voice": "echo", "input": "ok"},
        "/videos": {"model": "local-video", "prompt": "a dot", "size": "64x64", "seconds": 1},
    }
    r = http.get(path) if path == "/models" else http.post(path, json=bodies[path])
    assert r.status_code == 200, r.text


def test_unversioned_generate_content(local_gateway):
    r = httpx.post(
        f"{local_gateway.base_url}/models/local-chat:generateContent",
        json={"contents": [{"parts": [{"text": "what is 1+2"}]}]},
        headers={"x-goog-api-key": local_gateway.api_key.reveal()},
    )
    assert r.json()["candidates"][0]["content"]["parts"][0]["text"] == "1+2 = 3"


# Strings include lone surrogates (json.dumps writes them as \ud800 escapes, as a hostile
# client would); nesting goes past what a recursive walk survives; numbers past int->str limits.
_text = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=20)
_deep = st.integers(30, 990).map(lambda depth: functools.reduce(lambda inner, _: [inner], range(depth), "x"))
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)
_HUGE = "*".join(["999999**64"] * 18)
_fields = st.fixed_dictionaries(
    {},
    optional={
        k: _json | _deep | st.sampled_from(v)
        for k, v in {
            "model": ["local-chat", "local-reasoner", "local-image", "local-tts", "local-video", "x"],
            "messages": [
                [{"role": "user", "content": "hi"}],
                [{"role": "user", "content": ["a"]}],
                [{"role": "user", "content": f"what is {_HUGE}"}],
                [{"role": "user", "content": "count to " + "9" * 5000}],
                [{"role": "user", "content": "hello" + "." * 5000 + "#"}],
                [
                    {
                        "role": "user",
                        "content": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["x"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
                    }
                ],
            ],
            "system": ["be brief", "\ud800"],
            "stream": [True, False],
            "max_tokens": [1, 0, -1, 10**12],
            "input": ["hi", ["a"], [{"role": "user", "content": 3}], _HUGE],
            "prompt": [
                "a cat --ar 99:1",
                "--ar",
                "x --seed -1",
                "--aspect 0:0 y",
                "x" * 9000,
                "--seed " + "9" * 5000,
            ],
            "size": ["64x64", "0x0", "99999x99999", "65x65", "9" * 5000 + "x64", "\u00b24x64"],
            "voice": ["alloy", "zzz"],
            "response_format": ["wav", "mp3", "url", ["x"], {"a": 1}],
            "contents": [[{"parts": [{"text": "x"}]}], [{"parts": []}], "x", [{"parts": [{"text": _HUGE}]}]],
            "seconds": ["1", "nan", -1, 1e9, "9" * 5000],
            "style": ["jazz", 3, "x" * 300],
            "reasoning": [{"effort": "low"}, {"effort": 3}, "high"],
            "stream_options": [{"include_usage": True}, "x"],
            "generationConfig": [{"maxOutputTokens": 0}, {"maxOutputTokens": "x"}, []],
            "systemInstruction": ["be brief"],
            "n": [2, "1"],
        }.items()
    },
)
_paths = st.sampled_from(
    [
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/responses",
        "/v1/images/generations",
        "/v1/audio/speech",
        "/v1/videos",
        "/imgjob/submit/imagine",
        "/musicjob/submit/music",
        "/v1beta/models/local-chat:generateContent",
        "/v1beta/models/local-chat:streamGenerateContent?alt=sse",
        "/v1beta/models/:",
        "/v1/videos/%00/content",
        "/imgjob/task/../fetch",
        "/v1/videos/x%ED%A0%80",
        "/musicjob/fetch/%F0%9F%98%80",
        "/files/%ED%A0%80.png",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=_paths, body=_fields | _json | st.binary(max_size=64))
def test_no_input_produces_a_500(local_gateway, path, body):
    key = local_gateway.api_key.reveal()
    headers = {"authorization": f"Bearer {key}", "x-goog-api-key": key, "content-type": "application/json"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    r = httpx.post(f"{local_gateway.base_url}{path}", content=content, headers=headers, timeout=30)
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.headers["content-type"].startswith("application/json")
        assert "Traceback" not in r.text


@pytest.fixture
def roomy_gateway(make_gateway):
    """A gateway of the test's own (hypothesis shares it across examples), with room for jobs."""
    return make_gateway(job_queue=1000, job_queue_per_key=1000, job_seconds=0)


_GENERATE = "/v1beta/models/local-chat:generateContent"
_MESSAGES = {**CHAT, "max_tokens": 9}
_REASON = {"model": "local-reasoner", "input": "hi"}
_CONTENTS = {"contents": [{"parts": [{"text": "hi"}]}]}
_PART = ("contents", 0, "parts", 0, "text")
_STREAMED = _GENERATE.replace("generate", "streamGenerate") + "?alt=sse"
_IMAGE = {"model": "local-image", "prompt": "x", "size": "64x64"}
_VIDEO = {"model": "local-video", "prompt": "x", "size": "64x64", "seconds": 1}
_MUSIC = {"prompt": "x", "seconds": 1}
# (path, a valid body, where in it a hostile value goes)
_SLOTS = [
    ("/v1/chat/completions", CHAT, ("messages", 0, "content")),
    ("/v1/chat/completions", {**CHAT, "stream": True}, ("messages", 0, "content")),
    ("/v1/chat/completions", CHAT, ("model",)),
    ("/v1/messages", _MESSAGES, ("system",)),
    ("/v1/messages", _MESSAGES, ("messages", 0, "content")),
    ("/v1/messages", {**_MESSAGES, "stream": True}, ("system",)),
    ("/v1/responses", _REASON, ("input",)),
    ("/v1/responses", _REASON, ("instructions",)),
    ("/v1/responses", {**_REASON, "stream": True}, ("input",)),
    (_GENERATE, _CONTENTS, _PART),
    (_GENERATE, _CONTENTS, ("systemInstruction",)),
    (_STREAMED, _CONTENTS, _PART),
    ("/v1/images/generations", _IMAGE, ("prompt",)),
    ("/v1/images/generations", _IMAGE, ("size",)),
    ("/v1/audio/speech", {"model": "local-tts", "voice": "alloy", "input": "hi"}, ("input",)),
    ("/v1/videos", _VIDEO, ("prompt",)),
    ("/v1/videos", _VIDEO, ("size",)),
    ("/imgjob/submit/imagine", {"prompt": "x"}, ("prompt",)),
    ("/musicjob/submit/music", _MUSIC, ("prompt",)),
    ("/musicjob/submit/music", _MUSIC, ("style",)),
]
_POLLS = {
    "/v1/videos": lambda r: f"/v1/videos/{r['id']}",
    "/imgjob/submit/imagine": lambda r: f"/imgjob/task/{r['result']}/fetch",
    "/musicjob/submit/music": lambda r: f"/musicjob/fetch/{r['data']}",
}
_HOSTILE = (
    _text
    | _deep
    | _json
    | st.sampled_from(
        [
            f"what is {_HUGE}",
            "count to " + "9" * 5000,
            "9" * 5000 + "x64",
            "\u00b24x64",
            "hello" + "." * 3000 + "#",
            "x" * 9000,
            "a cat --seed " + "9" * 5000,
            "say \ud800",
        ]
    )
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(slot=st.sampled_from(_SLOTS), value=_HOSTILE, embed=st.booleans())
def test_one_hostile_value_in_a_valid_request_is_never_a_500(roomy_gateway, slot, value, embed):
    """A valid request of each endpoint with one field replaced by (or, for text, extended with)
    a hostile value; a job it starts must poll without a 500 too."""
    gw = roomy_gateway
    path, valid, where = slot
    body = json.loads(json.dumps(valid))
    holder = functools.reduce(lambda inner, key: inner[key], where[:-1], body)
    old = holder.get(where[-1]) if isinstance(holder, dict) else holder[where[-1]]
    holder[where[-1]] = old + value if embed and isinstance(old, str) and isinstance(value, str) else value
    headers = {"authorization": f"Bearer {gw.keys[0]}", "x-goog-api-key": gw.keys[0]}
    with httpx.Client(base_url=gw.base_url, headers=headers, timeout=60) as client:
        r = client.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})
        assert r.status_code < 500, r.text[:500]
        if r.status_code == 200 and path in _POLLS:
            polled = client.get(_POLLS[path](r.json()))
            assert polled.status_code < 500, polled.text[:500]


def test_pace_header_is_checked(http):
    r = http.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-gatecell-pace": "fast"})
    assert r.status_code == 400 and "x-gatecell-pace" in openai_error(r)
    r = http.post("/v1/chat/completions", json={**CHAT, "stream": True}, headers={"x-gatecell-pace": "0"})
    assert r.status_code == 200 and r.text.endswith("data: [DONE]\n\n")


def test_a_client_leaving_mid_stream_does_not_hurt_the_gateway(http):
    body = {**CHAT, "stream": True, "messages": [{"role": "user", "content": "count to 100"}]}
    with http.stream("POST", "/v1/chat/completions", json=body, headers={"x-gatecell-pace": "0.05"}) as r:
        first = next(line for line in r.iter_lines() if line.startswith("data: "))
    assert '"role":"assistant"' in first
    assert http.post("/v1/chat/completions", json=CHAT).status_code == 200


def test_an_unexpected_failure_is_a_clean_500_logged_without_the_key(
    http, local_gateway, monkeypatch, caplog
):
    from gatecell.local.backends import chatbot as chat

    def broken(*args, **kwargs):
        raise RuntimeError(f"backend exploded near {local_gateway.api_key.reveal()}")

    monkeypatch.setattr(chat, "answer", broken)
    with caplog.at_level("ERROR", logger="gatecell.local"):
        r = http.post("/v1/chat/completions", json=CHAT)
        m = http.post("/v1/messages", json={**CHAT, "max_tokens": 5})
    assert r.status_code == 500 and openai_error(r) == "internal error in the local gateway (RuntimeError)"
    assert m.status_code == 500 and m.json()["type"] == "error"
    assert "Traceback" not in r.text + m.text
    assert "backend exploded" in caplog.text and local_gateway.api_key.reveal() not in caplog.text


def test_form_bodies_are_refused_with_a_clear_message(http):
    r = http.post("/v1/videos", data={"model": "local-video", "prompt": "x"})
    assert r.status_code == 400 and "application/json" in openai_error(r)
