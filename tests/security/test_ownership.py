"""Issue 9, item 9: jobs and their files belong to the key that created them.

Two keys on one gateway: key B's video, imagine and music jobs and its generated files are
unknown to key A (404, the very answer an id that never existed gets, so existence is not
revealed) and to a keyless caller (401). The stores keep an owner id derived from the key,
never the key. The client still shows media from URLs: it sends its key to its own gateway.
"""

from __future__ import annotations

import time

import httpx
import pytest
from probes import bearer

from gatecell.gateway import Gateway
from gatecell.wire.transport.errors import NotFoundError

A, B = "sk-alice-" + "a" * 24, "sk-bob-" + "b" * 26


def _wait(client: httpx.Client, path: str, done) -> dict:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        body = client.get(path).json()
        if done(body):
            return body
        time.sleep(0.05)
    raise AssertionError(f"{path} did not finish")


@pytest.fixture
def two_keys(make_gateway):
    gw = make_gateway(api_keys=[A, B], job_seconds=0.2)
    with (
        httpx.Client(base_url=gw.base_url, headers=bearer(A), timeout=30) as alice,
        httpx.Client(base_url=gw.base_url, headers=bearer(B), timeout=30) as bob,
    ):
        yield gw, alice, bob


POLLS = {"video": "/v1/videos/{}", "imagine": "/imgjob/task/{}/fetch", "music": "/musicjob/fetch/{}"}


def _bobs_things(bob: httpx.Client) -> tuple[dict[str, str], dict[str, str]]:
    """Bob's finished jobs (ids by kind) and everything of his to fetch (paths and URLs)."""
    video = bob.post(
        "/v1/videos", json={"model": "local-video", "prompt": "b", "size": "64x64", "seconds": 1}
    )
    imagine = bob.post("/imgjob/submit/imagine", json={"prompt": "bob's picture --ar 1:1"})
    music = bob.post("/musicjob/submit/music", json={"prompt": "bob's tune", "seconds": 1})
    image = bob.post(
        "/v1/images/generations",
        json={"model": "local-image", "prompt": "b", "size": "64x64", "response_format": "url"},
    )
    ids = {"video": video.json()["id"], "imagine": imagine.json()["result"], "music": music.json()["data"]}
    paths = {kind: POLLS[kind].format(job_id) for kind, job_id in ids.items()}
    _wait(bob, paths["video"], lambda b: b["status"] == "completed")
    shot = _wait(bob, paths["imagine"], lambda b: b["status"] == "SUCCESS")
    song = _wait(bob, paths["music"], lambda b: b["data"]["status"] == "SUCCESS")
    paths["video content"] = paths["video"] + "/content"
    paths["imagine file"] = shot["imageUrl"]
    paths["music file"] = song["data"]["data"][0]["audio_url"]
    paths["image file"] = image.json()["data"][0]["url"]
    return ids, paths


def test_another_key_cannot_see_jobs_or_files(two_keys):
    gw, alice, bob = two_keys
    _, things = _bobs_things(bob)
    for what, path in things.items():
        assert bob.get(path).status_code == 200, what  # the owner can
        theirs = alice.get(path)
        assert theirs.status_code == 404, (what, theirs.status_code, theirs.text)
        assert httpx.get(httpx.URL(gw.base_url).join(path)).status_code == 401, what


def test_someone_elses_job_looks_exactly_like_no_job(two_keys):
    _, alice, bob = two_keys
    ids, things = _bobs_things(bob)
    for kind, job_id in ids.items():
        never = job_id[:-6] + ("000000" if not job_id.endswith("000000") else "111111")
        theirs, nobodys = alice.get(POLLS[kind].format(job_id)), alice.get(POLLS[kind].format(never))
        assert theirs.status_code == nobodys.status_code == 404
        assert theirs.text.replace(job_id, "ID") == nobodys.text.replace(never, "ID")
    url = things["image file"]
    theirs, nobodys = alice.get(url), alice.get(url[: url.rindex("/") + 1] + "A" * 24 + ".png")
    assert theirs.status_code == nobodys.status_code == 404 and theirs.text == nobodys.text


def test_the_stores_hold_an_owner_id_never_the_key(two_keys):
    gw, _, bob = two_keys
    _bobs_things(bob)
    jobs = list(gw.runtime.jobs._jobs.values())
    files = list(gw.runtime.media._files.values())
    assert len(jobs) == 3 and len(files) == 4
    owners = {j.owner for j in jobs} | {f.owner for f in files}
    assert len(owners) == 1
    for record in [*jobs, *files]:
        assert B not in repr(record) and A not in repr(record)
        assert B[-20:] not in repr(record)


def test_the_client_still_loads_media_from_its_gateways_urls(two_keys):
    """`Media` fetched through `gatecell.gateway` sends the key to its own gateway."""
    gw, _, _ = two_keys
    with Gateway(base_url=gw.base_url, api_key=B) as client:
        job = client.imagine("a kite --ar 1:1", wait=True, timeout=30)
        assert job.media and job.media[0].data.startswith(b"\x89PNG")
        image = client.image("local-image", "a kite", size="64x64", response_format="url")
        assert image.images[0].url and image.images[0].data.startswith(b"\x89PNG")
    with Gateway(base_url=gw.base_url, api_key=A) as stranger, pytest.raises(NotFoundError):
        stranger.job(job.id, kind="imagine")
