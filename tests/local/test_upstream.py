"""A gateway in front of others: remote models forwarded, streams relayed as they arrive."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from neutral import UPSTREAM_KEY, Neutral

from gatecell.local.embedded import run_in_thread


@pytest.fixture
def chain(make_gateway, monkeypatch):
    """client -> front gateway -> back gateway -> neutral upstream."""
    neutral = Neutral()
    neutral_url, stop = run_in_thread(neutral.app)
    monkeypatch.setenv("TEST_NEUTRAL_KEY", UPSTREAM_KEY)
    back = make_gateway(
        api_keys=["sk-back-key-0123456789"], upstream=neutral_url, upstream_key_env="TEST_NEUTRAL_KEY"
    )
    monkeypatch.setenv("TEST_BACK_KEY", back.api_key.reveal())
    front = make_gateway(upstream=f"{back.base_url}/v1", upstream_key_env="TEST_BACK_KEY")
    yield neutral, front
    neutral.gate.set()
    stop()


def test_remote_model_is_forwarded_with_the_upstream_key(chain):
    neutral, front = chain
    with openai.OpenAI(
        base_url=f"{front.base_url}/v1", api_key=front.api_key.reveal(), max_retries=0
    ) as client:
        reply = client.chat.completions.create(
            model="remote-chat", messages=[{"role": "user", "content": "ping"}]
        )
        local = client.chat.completions.create(
            model="local-chat", messages=[{"role": "user", "content": "1+1"}]
        )
    assert reply.choices[0].message.content == "remote says ping"
    assert local.choices[0].message.content == "1+1 = 2"
    assert neutral.seen_auth == [f"Bearer {UPSTREAM_KEY}"]  # never the caller's key


def test_streams_are_relayed_event_by_event(chain):
    neutral, front = chain
    headers = {"authorization": f"Bearer {front.api_key.reveal()}"}
    body = {"model": "remote-chat", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    with httpx.stream(
        "POST", f"{front.base_url}/v1/chat/completions", json=body, headers=headers, timeout=15
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = r.iter_lines()
        first = next(line for line in lines if line.startswith("data: "))
        # the upstream is holding its second event: the first got here on its own
        assert json.loads(first[6:])["choices"][0]["delta"]["content"] == "first"
        neutral.gate.set()
        rest = [line for line in lines if line.startswith("data: ")]
    assert rest[-1] == "data: [DONE]"
    assert [json.loads(x[6:])["choices"][0]["delta"]["content"] for x in rest[:-1]] == [" second", " third"]


def test_upstream_errors_pass_through_with_their_status(chain):
    _, front = chain
    headers = {"authorization": f"Bearer {front.api_key.reveal()}"}
    r = httpx.post(
        f"{front.base_url}/v1/chat/completions",
        headers=headers,
        json={"model": "remote-busy", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 429 and r.headers["retry-after"] == "3"
    assert r.json()["error"]["message"] == "slow down"


def test_models_merge_the_upstream_list(chain):
    _, front = chain
    headers = {"authorization": f"Bearer {front.api_key.reveal()}"}
    ids = [m["id"] for m in httpx.get(f"{front.base_url}/v1/models", headers=headers).json()["data"]]
    assert ids.count("local-chat") == 1 and "remote-chat" in ids


def test_remote_job_ids_are_polled_upstream(chain):
    _, front = chain
    headers = {"authorization": f"Bearer {front.api_key.reveal()}"}
    r = httpx.get(f"{front.base_url}/v1/videos/video_remote", headers=headers)
    assert r.status_code == 200 and r.json()["progress"] == 50


def test_the_front_still_checks_its_own_key(chain):
    _, front = chain
    r = httpx.post(
        f"{front.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {UPSTREAM_KEY}"},
        json={"model": "remote-chat", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 401


def test_unreachable_upstream_is_502(make_gateway):
    front = make_gateway(upstream="http://127.0.0.1:9")
    r = httpx.post(
        f"{front.base_url}/v1/chat/completions",
        headers={"authorization": f"Bearer {front.api_key.reveal()}"},
        json={"model": "remote-chat", "messages": [{"role": "user", "content": "x"}]},
    )
    assert r.status_code == 502 and "unreachable" in r.json()["error"]["message"]
