"""The local gateway's forwarder against a hostile upstream (issue 9, items 6 and 7).

Every test runs a real local gateway on loopback in front of `HostileUpstream`, which records
what reaches it. What is proved: only SPEC endpoints (with WIRE-NOTES' embeddings and rerank)
and their job polls go upstream, with the right method; hop-by-hop headers, cookies and
address claims stay on their side; the upstream key (and any key shape, any case, cut
anywhere) never comes back; answers are relayed as they arrive, capped, and never made to look
whole when they are not.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import subprocess
import sys
import time
from urllib.parse import urlsplit

import httpx
import pytest
from hostile_upstream import FILLER, KEY, OTHER_KEY, split_pieces

KEY_SHAPE = re.compile(r"(?i)sk-[a-z0-9_-]{8,}")  # an unmasked key: masks are sk-****


def no_key_in(text: str) -> bool:
    return (
        KEY.lower() not in text.lower()
        and OTHER_KEY.lower() not in text.lower()
        and not KEY_SHAPE.search(text)
    )


def masked(data: bytes) -> bytes:
    """What the client should get: every key shape kept at its length, all but sk- masked."""
    return re.sub(rb"[sS][kK]-[A-Za-z0-9_\-]{8,}", lambda m: m[0][:3] + b"*" * (len(m[0]) - 3), data)


def message_of(r: httpx.Response) -> str:
    """The error message: the openai format, or the job format under /imgjob."""
    error = r.json()
    return error["description"] if "description" in error else error["error"]["message"]


def raw_request(base_url: str, method: str, target: str) -> tuple[int, bytes]:
    """Send `target` exactly as written (httpx would normalise dot segments and escapes)."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        body = (
            b'{"model": "ok", "messages": [{"role": "user", "content": "x"}]}' if method == "POST" else None
        )
        headers = {"authorization": "Bearer sk-front-caller-0123456789", "content-type": "application/json"}
        conn.request(method, target, body=body, headers=headers)
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


CHAT = {"messages": [{"role": "user", "content": "hi"}]}


# -- what may go upstream ----------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("DELETE", "/v1/files/file-abc123", 404),
        ("GET", "/api/user/self", 404),
        ("GET", "/v1/files", 404),
        ("POST", "/v1/moderations", 404),
        ("POST", "/v1/embeddings/batch", 404),
        ("GET", "/v1/dashboard/billing/usage", 404),
        ("POST", "/v1/videos/video_1/remix", 404),
        ("GET", "/imgjob/task/list", 404),
        # SPEC paths, but not with this method
        ("DELETE", "/v1/videos/video_remote", 405),
        ("PUT", "/v1/chat/completions", 405),
        ("GET", "/v1/chat/completions", 405),
        ("POST", "/v1/models", 405),
        ("GET", "/v1/embeddings", 405),  # WIRE-NOTES' embeddings and rerank: POST only
        ("PUT", "/v1/rerank", 405),
        ("DELETE", "/v1/models/remote-chat", 405),
        ("POST", "/imgjob/task/ok/fetch", 405),
    ],
)
def test_only_spec_endpoints_with_their_method_reach_upstream(front, upstream, method, path, status):
    gw = front()
    r = gw.http.request(method, path, json={"model": "ok", **CHAT} if method in ("POST", "PUT") else None)
    why = f"unknown route {method} {path}" if status == 404 else f"method {method} is not allowed"
    assert r.status_code == status and message_of(r).startswith(why)
    assert upstream.seen == []


@pytest.mark.parametrize(
    "method, target",
    [
        ("GET", "/v1/videos/%2E%2E"),
        ("GET", "/v1/videos/..%2F..%2Fapi%2Fuser%2Fself"),
        ("GET", "/v1/videos/.%2E/content"),
        ("GET", "/imgjob/task/..%2F..%2Fapi%2Fuser%2Fself/fetch"),
        ("GET", "/musicjob/fetch/%2E%2E%5Capi"),
        ("GET", "/v1/models/..%2F..%2Fapi%2Fuser%2Fself"),
        ("POST", "/v1beta/models/..%2F..%2Fapi%2Fuser%2Fself:generateContent"),
        ("POST", "/v1/models/x%2F..%2F..%2Fv1%2Ffiles:generateContent"),
    ],
)
def test_escaped_paths_cannot_steer_a_forward(front, upstream, method, target):
    gw = front()
    status, _ = raw_request(gw.base_url, method, target)
    assert status in (400, 404)
    assert [t for t in upstream.targets() if t != "GET /v1/models"] == []  # a model lookup may list


def test_spec_endpoints_and_job_polls_are_forwarded_as_named_and_nothing_else(front, upstream):
    gw = front()
    for path in (
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/responses",
        "/v1/videos",
        "/v1/embeddings",  # WIRE-NOTES, not SPEC, but what gateways route
        "/v1/rerank",
    ):
        assert gw.http.post(path, json={"model": "ok", **CHAT}).json() == {"ok": True}
        assert gw.http.put(path, json={"model": "ok", **CHAT}).status_code == 405
    assert (
        gw.http.post("/v1beta/models/ok:streamGenerateContent?alt=sse", json={"contents": []}).status_code
        == 200
    )
    assert gw.http.post("/v1beta/files/ok:upload", json={}).status_code == 404
    for path in ("/v1/videos/ok", "/videos/ok/content", "/imgjob/task/ok/fetch", "/musicjob/fetch/ok"):
        assert gw.http.get(path).json() == {"ok": True}
        assert gw.http.delete(path).status_code == 405
        assert gw.http.get(path + "/more").status_code == 404
    assert gw.http.head("/v1/videos/ok/content").status_code == 200
    assert upstream.targets() == [
        "POST /v1/chat/completions",
        "POST /chat/completions",
        "POST /v1/responses",
        "POST /v1/videos",
        "POST /v1/embeddings",
        "POST /v1/rerank",
        "POST /v1beta/models/ok:streamGenerateContent?alt=sse",
        "GET /v1/videos/ok",
        "GET /videos/ok/content",
        "GET /imgjob/task/ok/fetch",
        "GET /musicjob/fetch/ok",
        "HEAD /v1/videos/ok/content",
    ]


def test_a_remote_model_is_looked_up_in_the_list_not_forwarded(front, upstream):
    gw = front()
    r = gw.http.get("/v1/models/remote-chat")
    assert r.status_code == 200 and r.json()["id"] == "remote-chat"
    assert no_key_in(r.text) and r.json()["owned_by"].startswith("team of sk-***")
    assert gw.http.get("/v1/models/not-there").status_code == 404
    assert upstream.targets() == ["GET /v1/models", "GET /v1/models"]


# -- headers, both ways --------------------------------------------------------------------


def test_hop_by_hop_cookies_and_address_claims_stay_with_the_client(front, upstream):
    gw = front()
    r = gw.http.post(
        "/v1/chat/completions",
        json={"model": "ok", **CHAT},
        headers={
            "connection": "keep-alive, x-hop-client",
            "x-hop-client": "for this hop only",
            "keep-alive": "timeout=5",
            "te": "trailers",
            "proxy-authorization": "Basic c2VjcmV0",
            "cookie": "session=caller",
            "forwarded": "for=203.0.113.7;proto=https",
            "x-forwarded-for": "203.0.113.7",
            "x-forwarded-host": "admin.internal",
            "x-forwarded-proto": "https",
            "x-real-ip": "203.0.113.7",
            "true-client-ip": "203.0.113.7",
            "via": "1.1 someone",
            "accept-encoding": "gzip, br",
            "x-request-tag": "keep-me",
        },
    )
    assert r.status_code == 200
    (seen,) = upstream.seen
    names = {n for n, _ in seen.headers}
    dropped = {
        "x-hop-client",
        "keep-alive",
        "te",
        "proxy-authorization",
        "cookie",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-host",
        "x-forwarded-proto",
        "x-real-ip",
        "true-client-ip",
        "via",
    }
    assert names & dropped == set()
    assert seen.header("authorization") == [f"Bearer {KEY}"]  # ours, never the caller's
    assert seen.header("accept-encoding") == ["identity"]  # bodies must come back readable
    assert seen.header("x-request-tag") == ["keep-me"] and seen.header("content-type") == ["application/json"]


def test_an_echoed_key_is_masked_and_hop_by_hop_answers_are_dropped(front):
    gw = front()
    r = gw.http.post("/v1/chat/completions", json={"model": "echo", **CHAT})
    assert r.status_code == 401
    assert no_key_in(r.text) and r.json()["error"]["message"].startswith("key sk-******")
    assert int(r.headers["content-length"]) == len(r.content)
    for name, value in r.headers.multi_items():
        assert no_key_in(name) and no_key_in(value), name
    names = {n.lower() for n in r.headers}
    assert (
        names & {"set-cookie", "set-cookie2", "x-hop-private", "proxy-authenticate", "upgrade", "trailer"}
        == set()
    )
    assert r.headers.get("keep-alive") != "timeout=5"  # the upstream's hop, not ours
    assert r.headers["x-request-id"] == "req-upstream-1"  # an ordinary header passes
    assert (
        r.headers["x-echo-key"].startswith("Bearer sk-***")
        and "invalid_token" in r.headers["www-authenticate"]
    )


def test_keys_cut_across_reads_are_masked_at_every_offset(front):
    gw = front()
    r = gw.http.post("/v1/chat/completions", json={"model": "split", **CHAT})
    assert r.status_code == 200
    assert r.content == masked(b"".join(split_pieces()))
    assert no_key_in(r.text)


def test_keys_in_a_content_length_body_cut_across_reads_are_masked(front):
    gw = front()
    r = gw.http.post("/v1/chat/completions", json={"model": "split-length", **CHAT})
    assert r.status_code == 400 and int(r.headers["content-length"]) == len(r.content)
    assert no_key_in(r.text) and r.json()["error"]["message"].startswith("bad key SK-****")


def test_keys_in_streamed_events_are_masked(front):
    gw = front()
    with gw.http.stream("POST", "/v1/chat/completions", json={"model": "split-sse", **CHAT}) as r:
        assert r.headers["content-type"] == "text/event-stream"
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    content = json.loads(lines[0][6:])["choices"][0]["delta"]["content"]
    assert content == "your key is sk-" + "*" * (len(KEY) - 3)


def test_a_compressed_answer_that_hides_a_key_is_refused(front):
    gw = front()
    r = gw.http.post("/v1/chat/completions", json={"model": "gzip", **CHAT})
    assert r.status_code == 502 and "content coding" in r.json()["error"]["message"]
    assert no_key_in(r.text)


def test_the_merged_model_list_is_masked(front):
    gw = front()
    entries = {m["id"]: m for m in gw.http.get("/v1/models").json()["data"]}
    assert "local-chat" in entries and entries["remote-chat"]["owned_by"].startswith("team of sk-***")
    assert no_key_in(json.dumps(entries))


# -- size: streamed, capped, never made to look whole ------------------------------------------


MiB = 1 << 20


@pytest.mark.parametrize(
    "framing, max_relay, block",
    [("length", MiB, 64 << 10), ("chunked", 1000, 64 << 10)],
    ids=["declared-length", "first-piece"],
)
def test_over_the_cap_before_anything_was_sent_is_a_502(front, upstream, framing, max_relay, block):
    upstream.add_huge("huge", 2 * MiB, framing, block)
    gw = front(max_relay=max_relay)
    r = gw.http.get("/imgjob/task/huge/fetch")
    assert r.status_code == 502
    assert r.json()["description"] == f"upstream answer over the {max_relay} byte relay cap"  # the job format


def test_over_the_cap_after_the_answer_began_cuts_the_connection(front, upstream):
    upstream.add_huge("huge", 2 * MiB, "chunked", 64 << 10)
    gw = front(max_relay=MiB)
    received = 0
    with pytest.raises(httpx.RemoteProtocolError):
        with gw.http.stream("GET", "/v1/videos/huge/content") as r:
            assert r.status_code == 200
            for data in r.iter_raw():
                received += len(data)
    assert 0 < received <= MiB


def test_an_answer_exactly_at_the_cap_goes_through_whole(front, upstream):
    upstream.add_huge("huge", MiB, "length", 64 << 10)
    gw = front(max_relay=MiB)
    r = gw.http.get("/v1/videos/huge/content")
    assert r.status_code == 200 and len(r.content) == MiB and r.content.startswith(FILLER)


def test_the_cap_comes_from_the_environment(front, upstream, monkeypatch):
    monkeypatch.setenv("GATECELL_LOCAL_MAX_RELAY", str(MiB))
    upstream.add_huge("huge", 2 * MiB, "length")
    gw = front()
    assert gw.http.get("/v1/videos/huge/content").status_code == 502


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_an_answer_that_breaks_off_is_cut_not_ended(front, upstream, framing):
    upstream.add_huge("cut", 4 * MiB, framing, 64 << 10, cut_at=256 << 10)
    gw = front()
    received = 0
    with pytest.raises(httpx.RemoteProtocolError):
        with gw.http.stream("GET", "/v1/videos/cut/content") as r:
            for data in r.iter_raw():
                received += len(data)
    assert received <= 256 << 10


def test_a_client_that_leaves_stops_the_relay(front, upstream):
    size = 512 * MiB
    gw = front()
    for framing in ("length", "chunked"):
        upstream.add_huge(framing, size, framing)
        upstream.hung_up.clear()
        with gw.http.stream("GET", f"/v1/videos/{framing}/content") as r:
            assert r.status_code == 200
            next(r.iter_raw())
        # the gateway hangs up on the upstream in turn, long before the answer is over
        assert upstream.hung_up.wait(60), framing
        assert upstream.abandoned[framing] < size // 2


def _kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith(field + ":")))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads /proc")
def test_a_huge_answer_is_relayed_in_bounded_memory(upstream):
    """256 MiB through `gatecell serve` (its own process): its peak RSS grows by far less."""
    size = 256 * MiB
    upstream.add_huge("huge-length", size, "length")
    upstream.add_huge("huge-chunked", size, "chunked")
    upstream.add_huge("over", size + 1, "length")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "sk-front-caller-0123456789"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    env["GATECELL_UPSTREAM_KEY"] = KEY
    argv = [sys.executable, "-m", "gatecell", "serve", "--port", str(port), "--api-key", key]
    argv += ["--upstream", upstream.url, "--max-relay", str(size), "--log-level", "warning"]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"authorization": f"Bearer {key}"}, timeout=120
        ) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.get("/health")
                    break
                except httpx.TransportError:
                    assert proc.poll() is None and time.monotonic() < deadline, "gatecell serve did not start"
                    time.sleep(0.1)
            assert client.get("/v1/videos/ok/content").json() == {"ok": True}  # warm: pool, code paths
            before = _kib(proc.pid, "VmRSS")
            for name in ("huge-length", "huge-chunked"):
                received = 0
                with client.stream("GET", f"/v1/videos/{name}/content") as r:
                    assert r.status_code == 200
                    for data in r.iter_raw():
                        received += len(data)
                assert received == size
            peak = _kib(proc.pid, "VmHWM")
            assert client.get("/v1/videos/over/content").status_code == 502  # --max-relay holds
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert (peak - before) * 1024 < 64 * MiB, f"peak RSS grew by {(peak - before) // 1024} MiB"
