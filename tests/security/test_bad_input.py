"""Issue 9, item 12: inputs that gave a 500 (or a stream cut mid-way) give a 4xx instead.

Each in the endpoint's own error format: an arithmetic result too long to print, content
nested 900 deep (content parts are refused for their shape), a lone surrogate (``\\ud800``)
in a prompt or a name (a string the gateway would later have to encode: in a reply, a job's
poll, a seed or a caption), numbers too long to convert. The hypothesis test in
tests/local/test_errors.py draws such values too.
"""

from __future__ import annotations

import json

import httpx
import pytest

HUGE = "*".join(["999999**64"] * 18)  # about 6,500 digits
SURROGATE = "a \ud800 b"


def _nest(depth: int, leaf: object = "hi") -> object:
    for _ in range(depth):
        leaf = [leaf]
    return leaf


def _post(gw, path: str, body: dict) -> httpx.Response:
    key = gw.api_key.reveal()
    headers = {"authorization": f"Bearer {key}", "x-goog-api-key": key, "content-type": "application/json"}
    return httpx.post(f"{gw.base_url}{path}", content=json.dumps(body).encode(), headers=headers, timeout=30)


def _message(r: httpx.Response) -> str:
    """The error message in whichever format the endpoint answers."""
    body = r.json()
    error = body.get("error")
    if isinstance(error, dict):
        return error["message"]
    return body.get("description") or body.get("message")


def _user(text: object) -> list[dict]:
    return [{"role": "user", "content": text}]


CASES = [
    ("/v1/chat/completions", {"model": "local-chat", "messages": _user(f"what is {HUGE}")}, "1000 digits"),
    ("/v1/messages", {"model": "local-chat", "max_tokens": 9, "messages": _user(HUGE)}, "1000 digits"),
    ("/v1/responses", {"model": "local-reasoner", "input": HUGE}, "1000 digits"),
    (
        "/v1beta/models/local-chat:generateContent",
        {"contents": [{"parts": [{"text": HUGE}]}]},
        "1000 digits",
    ),
    (
        "/v1/messages",
        {"model": "local-chat", "max_tokens": 9, "system": _nest(900), "messages": _user("hi")},
        "nested",
    ),
    # content nested 900 deep is refused for its shape: a part is an object, never a list
    ("/v1/messages", {"model": "local-chat", "max_tokens": 9, "messages": _user(_nest(900))}, "object"),
    (
        "/v1/responses",
        {"model": "local-reasoner", "input": [{"role": "user", "content": _nest(900)}]},
        "object",
    ),
    (
        "/v1beta/models/local-chat:generateContent",
        {"contents": [{"parts": [{"text": "hi"}]}], "systemInstruction": _nest(900)},
        "nested",
    ),
    ("/v1/chat/completions", {"model": "local-chat", "messages": _user(SURROGATE)}, "surrogate"),
    (
        "/v1/chat/completions",
        {"model": "local-chat", "stream": True, "messages": _user(SURROGATE)},
        "surrogate",
    ),
    ("/v1/chat/completions", {"model": SURROGATE, "messages": _user("hi")}, "surrogate"),
    (
        "/v1/messages",
        {"model": "local-chat", "max_tokens": 9, "messages": _user([{"text": SURROGATE}])},
        "surrogate",
    ),
    ("/v1/images/generations", {"model": "local-image", "prompt": SURROGATE, "size": "64x64"}, "surrogate"),
    ("/v1/videos", {"model": "local-video", "prompt": SURROGATE, "size": "64x64"}, "surrogate"),
    ("/v1/audio/speech", {"model": "local-tts", "voice": "alloy", "input": SURROGATE}, "surrogate"),
    ("/imgjob/submit/imagine", {"prompt": SURROGATE}, "surrogate"),
    ("/musicjob/submit/music", {"prompt": SURROGATE, "seconds": 1}, "surrogate"),
    ("/musicjob/submit/music", {"prompt": "rain", "style": SURROGATE, "seconds": 1}, "surrogate"),
    ("/musicjob/submit/music", {"prompt": "rain", "metadata": {SURROGATE: 1}, "seconds": 1}, "surrogate"),
    ("/v1/images/generations", {"model": "local-image", "prompt": "x", "size": "9" * 5000 + "x64"}, "size"),
    ("/v1/videos", {"model": "local-video", "prompt": "x", "size": "9" * 5000 + "x64"}, "size"),
    ("/v1/videos", {"model": "local-video", "prompt": "x", "size": "\u00b24x64"}, "size"),
    ("/imgjob/submit/imagine", {"prompt": "x" * 9000}, "8192"),
    ("/v1/videos", {"model": "local-video", "prompt": "x" * 9000}, "8192"),
]


@pytest.mark.parametrize(("path", "body", "says"), CASES, ids=[f"{p} {s}" for p, _, s in CASES])
def test_bad_input_is_a_4xx_in_the_endpoints_format(local_gateway, path, body, says):
    r = _post(local_gateway, path, body)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert r.headers["content-type"].startswith("application/json")
    assert says in _message(r), r.text[:300]


def test_a_refused_job_leaves_nothing_to_poll(make_gateway):
    """Before, imagine and music accepted a surrogate prompt, and every later poll was a 500."""
    gw = make_gateway(job_seconds=0)
    for path in ("/imgjob/submit/imagine", "/musicjob/submit/music"):
        r = _post(gw, path, {"prompt": SURROGATE, "seconds": 1})
        assert r.status_code == 400 and "surrogate" in _message(r), r.text
    assert not gw.runtime.jobs._jobs


def test_counting_to_a_huge_number_is_an_answer(local_gateway):
    r = _post(
        local_gateway,
        "/v1/chat/completions",
        {"model": "local-chat", "messages": _user("count to " + "9" * 5000)},
    )
    assert r.status_code == 200 and "more counting" in r.json()["choices"][0]["message"]["content"]


def test_a_surrogate_pair_is_text(local_gateway):
    """Escaped pairs (an emoji from a client that writes ASCII JSON) are fine: only lone halves are not."""
    r = _post(
        local_gateway, "/v1/chat/completions", {"model": "local-chat", "messages": _user("say \U0001f600")}
    )
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "\U0001f600"
