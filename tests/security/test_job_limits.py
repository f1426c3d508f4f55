"""Issue 9, item 5: job renders are bounded and never hold up the requests someone waits on.

- image, speech and chat answer while every job render is busy (they have capacity of their own);
- the unfinished jobs are bounded per key and overall: beyond that a submit is a 429 with
  Retry-After, in the endpoint's own error format;
- a job that is evicted stops rendering (or never starts);
- a job that says it succeeded can fetch its file for as long as it is listed.

The renders of video and music are a `Gate` here (tests/security/probes.py): it holds a
render "in progress" for as long as the test needs, which makes the ordering a fact.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from probes import bearer

A, B = "sk-alice-" + "a" * 24, "sk-bob-" + "b" * 26
VIDEO = {"model": "local-video", "size": "64x64", "seconds": 1}


def _until(condition, what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.02)


def test_image_speech_and_chat_never_wait_behind_job_renders(make_gateway, gate):
    gw = make_gateway(api_keys=[A], job_queue=8, job_queue_per_key=8)
    with httpx.Client(base_url=gw.base_url, headers=bearer(A), timeout=20) as client:
        videos = [client.post("/v1/videos", json={**VIDEO, "prompt": f"v{i}"}).json()["id"] for i in range(3)]
        for i in range(2):
            client.post("/musicjob/submit/music", json={"prompt": f"m{i}", "seconds": 1}).raise_for_status()
        gate.wait_started()
        image = client.post(
            "/v1/images/generations", json={"model": "local-image", "prompt": "x", "size": "64x64"}
        )
        speech = client.post("/v1/audio/speech", json={"model": "local-tts", "voice": "alloy", "input": "hi"})
        chat = client.post(
            "/v1/chat/completions",
            json={"model": "local-chat", "messages": [{"role": "user", "content": "1+1"}]},
        )
        # ... all answered while the job renders are provably still held:
        assert not gate.open.is_set() and gate.started
        assert all(client.get(f"/v1/videos/{v}").json()["status"] != "completed" for v in videos)
        assert image.status_code == speech.status_code == chat.status_code == 200
        assert chat.json()["choices"][0]["message"]["content"] == "1+1 = 2"
        gate.open.set()
        _until(lambda: client.get(f"/v1/videos/{videos[-1]}").json()["status"] == "completed", "the videos")


def test_the_job_queue_is_bounded_per_key_and_overall(make_gateway, gate):
    gw = make_gateway(api_keys=[A, B], job_queue=3, job_queue_per_key=2, job_seconds=0.1)
    alice = httpx.Client(base_url=gw.base_url, headers=bearer(A), timeout=20)
    bob = httpx.Client(base_url=gw.base_url, headers=bearer(B), timeout=20)
    with alice, bob:
        assert alice.post("/v1/videos", json={**VIDEO, "prompt": "a1"}).status_code == 200
        assert alice.post("/musicjob/submit/music", json={"prompt": "a2", "seconds": 1}).status_code == 200
        full = alice.post("/imgjob/submit/imagine", json={"prompt": "a3"})  # Alice's third: per key
        assert (
            full.status_code == 429 and full.json()["code"] == 429 and "per key" in full.json()["description"]
        )
        assert int(full.headers["retry-after"]) >= 1
        bobs = bob.post("/v1/videos", json={**VIDEO, "prompt": "b1"})
        assert bobs.status_code == 200  # the overall bound (3) is not reached yet
        for path, body, error in [
            ("/musicjob/submit/music", {"prompt": "b2", "seconds": 1}, lambda r: r.json()["code"] == "error"),
            (
                "/v1/videos",
                {**VIDEO, "prompt": "b3"},
                lambda r: r.json()["error"]["type"] == "rate_limit_error",
            ),
        ]:
            refused = bob.post(path, json=body)
            assert refused.status_code == 429 and error(refused), refused.text
            assert int(refused.headers["retry-after"]) >= 1
        gate.open.set()
        _until(lambda: bob.get(f"/v1/videos/{bobs.json()['id']}").json()["status"] == "completed", "b1")
        _until(lambda: not gw.runtime.jobs._running, "every job to finish")
        assert alice.post("/imgjob/submit/imagine", json={"prompt": "a3"}).json()["code"] == 1


def test_an_evicted_job_stops_rendering_or_never_starts(make_gateway, gate):
    gw = make_gateway(api_keys=[A], jobs_kept=2, job_queue=8, job_queue_per_key=8, job_seconds=0.1)
    with httpx.Client(base_url=gw.base_url, headers=bearer(A), timeout=20) as client:

        def submit(prompt: str) -> str:
            return client.post("/v1/videos", json={**VIDEO, "prompt": prompt}).json()["id"]

        v1 = submit("v1")
        gate.wait_started()  # v1 renders
        submit("v2")
        v3 = submit("v3")  # only two jobs are kept: v1 is evicted while it renders...
        _until(lambda: gate.stopped == ["v1"], "v1 to stop")  # ... and stops
        assert client.get(f"/v1/videos/{v1}").status_code == 404
        gate.wait_started()  # v2, in the slot v1 left
        # v4 evicts v2 (rendering), v5 evicts v3. Between the two submits v3 is still listed and
        # may take the slot v2 left; then it is an evicted render like v2 and must stop too.
        v4, v5 = submit("v4"), submit("v5")
        evicted = ("v1", "v2", "v3")

        def every_evicted_render_stopped() -> bool:
            return [v for v in gate.started if v in evicted] == gate.stopped

        _until(every_evicted_render_stopped, f"v2 (and v3 if it began) to stop {gate.started} {gate.stopped}")
        gate.open.set()
        for v in (v4, v5):
            _until(lambda v=v: client.get(f"/v1/videos/{v}").json()["status"] == "completed", v)
        assert client.get(f"/v1/videos/{v3}").status_code == 404
    assert [v for v in gate.started if v != "v3"] == ["v1", "v2", "v4", "v5"]
    assert gate.stopped[:2] == ["v1", "v2"] and every_evicted_render_stopped()  # v4, v5 ran to the end


def test_the_video_renderer_stops_between_frames(monkeypatch):
    from gatecell.local.backends import image, video
    from gatecell.local.backends._stop import Stopped

    stop, frames = threading.Event(), []
    draw = image.draw

    def counted(*args, **kwargs):
        frames.append(1)
        if len(frames) == 3:
            stop.set()
        return draw(*args, **kwargs)

    monkeypatch.setattr(image, "draw", counted)
    with pytest.raises(Stopped):
        video.render("a long clip", 10.0, 64, 64, stop=stop)  # 120 frames
    assert len(frames) == 3


def test_a_job_that_says_success_keeps_its_file(make_gateway):
    """Files and jobs leave together: the media store is small here, and images made on the
    side push job files out; every job still listed as SUCCESS can fetch its file."""
    from gatecell.local.backends import image, prompt_flags

    one = len(image.render("job 0", *prompt_flags.size_for({})))  # about what each job's PNG weighs
    gw = make_gateway(
        api_keys=[A], media_bytes=one * 7 // 2, job_queue=16, job_queue_per_key=16, job_seconds=0
    )
    with httpx.Client(base_url=gw.base_url, headers=bearer(A), timeout=30) as client:
        ids = [
            client.post("/imgjob/submit/imagine", json={"prompt": f"job {i}"}).json()["result"]
            for i in range(6)
        ]
        _until(lambda: not gw.runtime.jobs._running, "the renders")
        for i in range(4):
            body = {
                "model": "local-image",
                "prompt": f"side {i}",
                "size": "256x256",
                "response_format": "url",
            }
            assert client.post("/v1/images/generations", json=body).status_code == 200
        listed = evicted = 0
        for job_id in ids:
            polled = client.get(f"/imgjob/task/{job_id}/fetch")
            if polled.status_code == 404:
                evicted += 1
                continue
            assert polled.json()["status"] == "SUCCESS"
            listed += 1
            file = client.get(polled.json()["imageUrl"])
            assert file.status_code == 200 and file.content.startswith(b"\x89PNG"), job_id
        assert evicted and listed and listed + evicted == 6
