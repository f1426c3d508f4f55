"""The job flows: submit, poll through the states with progress, fetch the result."""

from __future__ import annotations

import io
import time
import wave

import httpx
import pytest

from gatecell.local.backends import prompt_flags as imagine


def poll(http: httpx.Client, path: str, status_of, done: set[str], limit: float = 20.0) -> list[dict]:
    seen, deadline = [], time.monotonic() + limit
    while time.monotonic() < deadline:
        body = http.get(path).json()
        seen.append(body)
        if status_of(body) in done:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"{path} did not finish: {seen[-1]}")


def test_video_job_progresses_to_a_playable_mp4(http):
    created = http.post(
        "/v1/videos",
        json={"model": "local-video", "prompt": "a paper boat", "seconds": "1", "size": "160x120"},
    )
    video = created.json()
    assert created.status_code == 200 and video["object"] == "video" and video["status"] == "queued"
    early = http.get(f"/v1/videos/{video['id']}/content")
    assert early.status_code == 400 and "not ready" in early.json()["error"]["message"]
    states = poll(http, f"/v1/videos/{video['id']}", lambda b: b["status"], {"completed", "failed"})
    statuses = [s["status"] for s in states]
    assert statuses[-1] == "completed" and "in_progress" in statuses
    progress = [s["progress"] for s in states]
    assert progress == sorted(progress) and progress[-1] == 100
    content = http.get(f"/v1/videos/{video['id']}/content")
    assert content.headers["content-type"] == "video/mp4" and content.content[4:8] == b"ftyp"


def test_imagine_applies_aspect_ratio_and_serves_the_image(http):
    from PIL import Image

    submitted = http.post(
        "/imgjob/submit/imagine", json={"prompt": "a lighthouse at dusk --ar 16:9 --seed 7"}
    ).json()
    assert submitted["code"] == 1 and submitted["result"]
    states = poll(
        http, f"/imgjob/task/{submitted['result']}/fetch", lambda b: b["status"], {"SUCCESS", "FAILURE"}
    )
    statuses = [s["status"] for s in states]
    assert statuses[-1] == "SUCCESS" and "IN_PROGRESS" in statuses
    assert set(statuses) <= {"NOT_START", "SUBMITTED", "IN_PROGRESS", "SUCCESS"}
    assert states[-1]["progress"] == "100%" and all(s["progress"].endswith("%") for s in states)
    assert states[-1]["promptEn"] == "a lighthouse at dusk"
    assert states[-1]["properties"]["flags"] == {"ar": "16:9", "seed": "7"}
    image = Image.open(io.BytesIO(http.get(states[-1]["imageUrl"]).content))
    assert image.size == imagine.size_for({"ar": "16:9"}) and image.size[0] > image.size[1]


def test_imagine_refuses_a_bad_flag(http):
    r = http.post("/imgjob/submit/imagine", json={"prompt": "a cat --ar wide"})
    assert r.status_code == 400 and "--ar" in r.json()["description"]


def test_music_job_serves_audio(http):
    submitted = http.post(
        "/musicjob/submit/music", json={"prompt": "rain on a tin roof", "style": "lofi", "seconds": 1}
    ).json()
    assert submitted["code"] == "success"
    states = poll(
        http, f"/musicjob/fetch/{submitted['data']}", lambda b: b["data"]["status"], {"SUCCESS", "FAILURE"}
    )
    final = states[-1]["data"]
    assert final["status"] == "SUCCESS" and final["progress"] == "100%"
    clip = final["data"][0]
    assert clip["tags"] == "lofi"
    with wave.open(io.BytesIO(http.get(clip["audio_url"]).content)) as w:
        assert w.getnframes() > 0


@pytest.mark.parametrize("path", ["/v1/videos/video_nope", "/imgjob/task/nope/fetch", "/musicjob/fetch/nope"])
def test_unknown_task_is_404(http, path):
    assert http.get(path).status_code == 404


def test_generated_files_need_the_key(http, local_gateway):
    assert http.get("/files/guess.png").status_code == 404
    assert httpx.get(f"{local_gateway.base_url}/files/guess.png").status_code == 401


@pytest.mark.parametrize(
    ("prompt", "clean", "flags"),
    [
        ("a cat --ar 3:2", "a cat", {"ar": "3:2"}),
        ("--aspect 9:16 tall tower --tile", "tall tower", {"ar": "9:16", "tile": ""}),
        ("plain prompt", "plain prompt", {}),
    ],
)
def test_flag_parsing(prompt, clean, flags):
    assert imagine.parse(prompt) == (clean, flags)


def test_sizes_follow_the_ratio():
    assert imagine.size_for({}) == (768, 768)
    w, h = imagine.size_for({"ar": "9:16"})
    assert h == 768 and abs(w / h - 9 / 16) < 0.02
    with pytest.raises(ValueError):
        imagine.size_for({"ar": "100:1"})
