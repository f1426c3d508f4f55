"""Issue 9, item 1: nothing without a valid key gets past the gateway, least of all upstream.

Only ``GET /health`` and ``HEAD /health``, exactly, answer without a key; paths are matched
exactly, and a path that could mean something else after decoding or normalising (``..``,
``%2F``, ``%2E``, a backslash, a control character) is refused with 400 before routing. The
upstream here records every request it gets: a keyless request must never be among them,
since the gateway would send it on with the upstream's own key.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from probes import UPSTREAM_KEY, bearer, raw

KEY = "sk-guard-" + "k" * 24
CHAT = json.dumps({"model": "remote-model", "messages": [{"role": "user", "content": "hi"}]}).encode()

PROBES = [
    ("POST", "/healthz"),
    ("GET", "/healthz"),
    ("POST", "/health"),
    ("GET", "/health/"),
    ("GET", "/HEALTH"),
    ("GET", "/files/a/b"),
    ("GET", "/files/x"),
    ("POST", "/health/../v1/chat/completions"),
    ("POST", "/files/x/../../v1/chat/completions"),
    ("POST", "/files/x/%2e%2e/%2e%2e/v1/chat/completions"),
    ("POST", "/health%2F..%2Fv1/chat/completions"),
    ("POST", "/v1/chat/completions"),
    ("GET", "/v1/models"),
    ("GET", "/v1/models/remote-model"),
    ("DELETE", "/v1/files/file-1"),
    ("GET", "/api/user/self"),
    ("POST", "/v1beta/models/remote:generateContent"),
    ("GET", "/v1/videos/video_remote"),
    ("GET", "/imgjob/task/remote/fetch"),
]


@pytest.fixture
def guarded(make_gateway, recorder, monkeypatch):
    monkeypatch.setenv("TEST_GUARD_UPSTREAM_KEY", UPSTREAM_KEY)
    gw = make_gateway(api_keys=[KEY], upstream=recorder.base_url, upstream_key_env="TEST_GUARD_UPSTREAM_KEY")
    return gw


def test_the_recorder_does_see_what_a_keyed_request_forwards(guarded, recorder):
    """The control: with the key, a remote model's request does reach the upstream (with its key)."""
    status, _ = raw(guarded.base_url, "POST", "/v1/chat/completions", bearer(KEY), CHAT)
    assert status == 200
    assert [s.raw_path for s in recorder.seen] == [b"/v1/chat/completions"]
    assert recorder.seen[0].headers["authorization"] == f"Bearer {UPSTREAM_KEY}"


@pytest.mark.parametrize(("method", "path"), PROBES)
@pytest.mark.parametrize("credential", [None, "sk-wrong-" + "w" * 24, ""])
def test_no_keyless_request_reaches_the_upstream(guarded, recorder, method, path, credential):
    headers = {} if credential is None else bearer(credential)
    status, body = raw(guarded.base_url, method, path, headers, CHAT if method == "POST" else b"")
    assert status in (400, 401), (status, body)
    assert recorder.seen == []
    assert b"recorder" not in body


def test_exactly_get_and_head_health_are_open(guarded, recorder):
    assert raw(guarded.base_url, "GET", "/health") == (200, b'{"status":"ok"}')
    assert raw(guarded.base_url, "HEAD", "/health")[0] == 200
    for method in ("POST", "OPTIONS", "PUT", "DELETE"):
        assert raw(guarded.base_url, method, "/health")[0] == 401, method
    assert recorder.seen == []


@pytest.mark.parametrize(
    "path",
    [
        "/health/../v1/chat/completions",
        "/v1/chat/../chat/completions",
        "/v1/./chat/completions",
        "/v1%2Fchat/completions",
        "/v1/chat%2fcompletions",
        "/v1/%2E%2E/v1/chat/completions",
        "/v1/chat/completions%00",
        "/v1/chat/completions%0a",
        "/v1\\chat\\completions",
        "/v1/chat/completions%5c",
        "/v1/chat/%252e%252e/completions",
        "/files/x%252Fy",
    ],
)
def test_tricky_paths_are_400_even_with_the_key(guarded, recorder, path):
    status, body = raw(guarded.base_url, "POST", path, bearer(KEY), CHAT)
    assert status == 400, (status, body)
    assert "plain path" in json.loads(body)["error"]["message"]
    assert recorder.seen == []


_SEGMENTS = st.sampled_from(
    ["health", "healthz", "files", "v1", "v1beta", "chat", "completions", "models", "messages", "x",
     "..", ".", "%2e%2e", "%2E", "%2F", "%2f", "%5C", "%00", "%252e", "imgjob", "task", "fetch",
     "videos", "", "\\"]
)  # fmt: skip
_METHODS = st.sampled_from(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=_METHODS, segments=st.lists(_SEGMENTS, min_size=1, max_size=6), query=st.booleans())
def test_any_path_without_a_key_is_never_forwarded(guarded, recorder, method, segments, query):
    path = "/" + "/".join(segments) + ("?alt=sse&key=x" if query else "")
    status, _ = raw(guarded.base_url, method, path, {}, CHAT if method in ("POST", "PUT", "PATCH") else b"")
    if segments == ["health"] and method in ("GET", "HEAD"):
        assert status == 200
    else:
        assert status in (400, 401), (method, path, status)
    assert recorder.seen == []
