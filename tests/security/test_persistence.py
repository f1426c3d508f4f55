"""Issue 10, item 4: the local gateway's jobs and files outlive it, and stay their key's.

Gateways on one data folder, stopped and started as a restart does: finished jobs and
their files are served again; a job rendering when its gateway stopped is rendered by the
next one; a job another gateway is rendering is left to it; a record that cannot be
rendered again fails in words. On disk, files and records belong to the key's owner id
(never the key), their names are the gateway's tokens, folders are 0700 and files 0600;
eviction by count and age applies to the folder.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
from probes import bearer, serving

from gatecell.local.auth import owner_of
from gatecell.local.disk import Lease
from gatecell.local.job_store import JOB_ID
from gatecell.local.media_store import NAME

A, B = "sk-alice-" + "a" * 24, "sk-bob-" + "b" * 26
VIDEO = {"model": "local-video", "size": "64x64", "seconds": 1}
POLLS = {"video": "/v1/videos/{}", "imagine": "/imgjob/task/{}/fetch", "music": "/musicjob/fetch/{}"}
DONE = {
    "video": lambda b: b["status"] == "completed",
    "imagine": lambda b: b["status"] == "SUCCESS",
    "music": lambda b: b["data"]["status"] == "SUCCESS",
}


def _client(base_url: str, key: str = A) -> httpx.Client:
    return httpx.Client(base_url=base_url, headers=bearer(key), timeout=30)


def _until(poll, done, what: str, limit: float = 60.0):
    deadline = time.monotonic() + limit
    while True:
        body = poll()
        if done(body):
            return body
        assert time.monotonic() < deadline, f"gave up waiting: {what} ({body})"
        time.sleep(0.05)


def _submit_all(client: httpx.Client) -> dict[str, str]:
    ids = {
        "video": client.post("/v1/videos", json={**VIDEO, "prompt": "waves"}).json()["id"],
        "imagine": client.post("/imgjob/submit/imagine", json={"prompt": "a castle --ar 1:1"}).json()[
            "result"
        ],
        "music": client.post("/musicjob/submit/music", json={"prompt": "a tune", "seconds": 1}).json()[
            "data"
        ],
    }
    return ids


def _files(client: httpx.Client, ids: dict[str, str]) -> dict[str, bytes]:
    """Every job's finished file, by kind, fetched by path (the URLs name the old port)."""
    bodies = {
        kind: _until(lambda k=kind: client.get(POLLS[k].format(ids[k])).json(), DONE[kind], kind)
        for kind in ids
    }
    paths = {
        "video": POLLS["video"].format(ids["video"]) + "/content",
        "imagine": httpx.URL(bodies["imagine"]["imageUrl"]).path,
        "music": httpx.URL(bodies["music"]["data"]["data"][0]["audio_url"]).path,
    }
    out = {}
    for kind, path in paths.items():
        got = client.get(path)
        assert got.status_code == 200, (kind, got.text)
        out[kind] = got.content
    return out


def test_finished_jobs_and_files_are_served_after_a_restart(make_gateway, tmp_path):
    data = tmp_path / "data"
    first = make_gateway(api_keys=[A], data=data, job_seconds=0)
    with _client(first.base_url) as client:
        ids = _submit_all(client)
        before = _files(client, ids)
        image = client.post(
            "/v1/images/generations",
            json={"model": "local-image", "prompt": "a kite", "size": "64x64", "response_format": "url"},
        ).json()["data"][0]["url"]
        picture = client.get(httpx.URL(image).path).content
    first.stop()
    again = make_gateway(api_keys=[A], data=data, job_seconds=0)
    assert again.base_url != first.base_url
    with _client(again.base_url) as client:
        assert _files(client, ids) == before
        assert client.get(httpx.URL(image).path).content == picture


def test_a_job_rendering_when_its_gateway_stops_is_rendered_by_the_next(make_gateway, gate, tmp_path):
    data = tmp_path / "data"
    first = make_gateway(api_keys=[A], data=data, job_seconds=0)
    with _client(first.base_url) as client:
        job = client.post("/v1/videos", json={**VIDEO, "prompt": "interrupted"}).json()["id"]
        gate.wait_started()
    first.stop()  # a restart: the render is stopped, the job is unfinished on disk
    _until(lambda: gate.stopped, lambda stopped: stopped == ["interrupted"], "the render to stop")
    again = make_gateway(api_keys=[A], data=data, job_seconds=0)
    with _client(again.base_url) as client:
        assert client.get(f"/v1/videos/{job}").json()["status"] == "in_progress"  # not a 404
        gate.wait_started()  # the next gateway rendered it again ...
        assert gate.started == ["interrupted", "interrupted"]
        gate.open.set()
        _until(lambda: client.get(f"/v1/videos/{job}").json(), DONE["video"], "the resumed job")
        assert client.get(f"/v1/videos/{job}/content").status_code == 200  # ... to the end


def test_a_job_another_gateway_is_rendering_is_left_to_it(make_gateway, gate, tmp_path):
    """Two kernels' embedded gateways on one folder: each sees the other's jobs, and a job
    is rendered once, by the gateway that holds it."""
    data = tmp_path / "data"
    one = make_gateway(api_keys=[A], data=data, job_seconds=0)
    two = make_gateway(api_keys=[A], data=data, job_seconds=0)
    with _client(one.base_url) as first, _client(two.base_url) as second:
        job = first.post("/musicjob/submit/music", json={"prompt": "shared", "seconds": 1}).json()["data"]
        gate.wait_started()
        for _ in range(5):
            assert second.get(f"/musicjob/fetch/{job}").json()["data"]["status"] == "IN_PROGRESS"
        assert gate.started == ["shared"]  # the second gateway did not render it too
        gate.open.set()
        body = _until(lambda: second.get(f"/musicjob/fetch/{job}").json(), DONE["music"], "the shared job")
        assert second.get(httpx.URL(body["data"]["data"][0]["audio_url"]).path).status_code == 200
    assert gate.started == ["shared"]


def test_a_lease_ends_with_its_process_however_it_ends(tmp_path):
    leases = tmp_path / "leases"
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from gatecell.local.disk import Lease
        lease = Lease(Path({str(leases)!r}))
        print(lease.name, flush=True)
        time.sleep(120)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        name = child.stdout.readline().strip()
        mine = Lease(leases)
        assert mine.alive(name) and (leases / f"{name}.lock").exists()
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        assert not mine.alive(name)  # released by the system with the process
        assert not (leases / f"{name}.lock").exists()
        mine.release()
        assert not Lease(leases).alive(mine.name)
    finally:
        child.kill()
        child.wait(30)


def test_a_record_that_cannot_be_rendered_again_fails_in_words(make_gateway, tmp_path):
    data = tmp_path / "data"
    (data / "jobs").mkdir(parents=True)
    job_id = "video_" + "0" * 24
    record = {
        "id": job_id,
        "kind": "video",
        "owner": owner_of(A.encode()),
        "prompt": "from an older gateway",
        "created": time.time() - 60,
        "duration": 1.0,
        "meta": {"model": "local-video"},  # no size, no seconds: nothing to render from
    }
    (data / "jobs" / f"{job_id}.json").write_text(json.dumps(record))
    gw = make_gateway(api_keys=[A], data=data)
    with _client(gw.base_url) as client:
        body = client.get(f"/v1/videos/{job_id}").json()
    assert body["status"] == "failed"
    message = body["error"]["message"]
    assert "stopped while this job was rendering" in message and "submit it again" in message


def test_on_disk_jobs_and_files_are_their_keys_alone(make_gateway, tmp_path):
    data = tmp_path / "data"
    first = make_gateway(api_keys=[A, B], data=data, job_seconds=0)
    with _client(first.base_url, B) as bob:
        ids = _submit_all(bob)
        _files(bob, ids)
    first.stop()
    again = make_gateway(api_keys=[A, B], data=data, job_seconds=0)
    with _client(again.base_url, A) as alice, _client(again.base_url, B) as bob:
        files = _files(bob, ids)  # Bob's, after the restart ...
        for kind, job_id in ids.items():
            assert alice.get(POLLS[kind].format(job_id)).status_code == 404  # ... and only Bob's
        assert alice.get(POLLS["video"].format(ids["video"]) + "/content").status_code == 404
        bodies = {kind: bob.get(POLLS[kind].format(ids[kind])).json() for kind in ("imagine", "music")}
        for url in (bodies["imagine"]["imageUrl"], bodies["music"]["data"]["data"][0]["audio_url"]):
            assert alice.get(httpx.URL(url).path).status_code == 404
    assert all(files.values())
    everything = b"".join(p.read_bytes() for p in data.rglob("*") if p.is_file())
    for key in (A, B):
        assert key.encode() not in everything and key[-20:].encode() not in everything
    assert {p.name for p in (data / "files").iterdir()} == {owner_of(B.encode())}


def test_names_on_disk_are_the_gateways_tokens_and_private(make_gateway, tmp_path):
    data = tmp_path / "data"
    gw = make_gateway(api_keys=[A], data=data, job_seconds=0)
    with _client(gw.base_url) as client:
        prompt = "../../escape/ me.png --ar 1:1"  # a client's words never name a file
        ids = {
            "imagine": client.post("/imgjob/submit/imagine", json={"prompt": prompt}).json()["result"],
            "music": client.post("/musicjob/submit/music", json={"prompt": "../x", "seconds": 1}).json()[
                "data"
            ],
        }
        _files(
            client, {**ids, "video": client.post("/v1/videos", json={**VIDEO, "prompt": "../v"}).json()["id"]}
        )
        for name in ("A" * 24 + ".png", "not-a-token.png", "A" * 24 + ".json", "-" * 24 + ".png"):
            assert client.get(f"/files/{name}").status_code == 404
        for tricky in ("..%2F..%2Fjobs", ".." + "A" * 22 + ".png"):
            assert client.get(f"/files/{tricky}").status_code == 400  # refused before routing
    for path in data.rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert all(JOB_ID.fullmatch(p.stem) for p in (data / "jobs").iterdir())
    assert all(NAME.fullmatch(p.name) for p in (data / "files").rglob("*") if p.is_file())
    assert not (tmp_path / "escape").exists()


def test_the_folder_keeps_at_most_kept_jobs_with_their_files(make_gateway, tmp_path):
    data = tmp_path / "data"
    gw = make_gateway(api_keys=[A], data=data, job_seconds=0, jobs_kept=2)
    with _client(gw.base_url) as client:
        ids = []
        for i in range(3):
            ids.append(
                client.post("/imgjob/submit/imagine", json={"prompt": f"picture {i}"}).json()["result"]
            )
            _until(lambda j=ids[-1]: client.get(f"/imgjob/task/{j}/fetch").json(), DONE["imagine"], "a job")
        assert client.get(f"/imgjob/task/{ids[0]}/fetch").status_code == 404
        assert all(client.get(f"/imgjob/task/{j}/fetch").status_code == 200 for j in ids[1:])
    assert sorted(p.stem for p in (data / "jobs").iterdir()) == sorted(ids[1:])
    assert len([p for p in (data / "files").rglob("*") if p.is_file()]) == 2  # the first job's file went too


def test_jobs_and_files_older_than_max_age_are_dropped(make_gateway, tmp_path):
    data = tmp_path / "data"
    first = make_gateway(api_keys=[A], data=data, job_seconds=0)
    with _client(first.base_url) as client:
        ids = _submit_all(client)
        _files(client, ids)
    first.stop()
    old = time.time() - 3 * 3600  # made three hours ago ...
    for path in data.rglob("*"):
        if path.is_file() and path.suffix != ".lock":
            os.utime(path, (old, old))
    again = make_gateway(api_keys=[A], data=data, job_seconds=0, max_age=3600)  # ... kept one hour
    with _client(again.base_url) as client:
        for kind, job_id in ids.items():
            assert client.get(POLLS[kind].format(job_id)).status_code == 404
    assert not [p for p in data.rglob("*") if p.is_file() and p.parent.name != "leases"]


def test_gatecell_serve_keeps_its_jobs_in_data(tmp_path):
    """The real CLI: ``gatecell serve --data DIR`` twice, a job made by the first is served
    by the second; and the option and the age limit are in ``--help``."""
    data = tmp_path / "served"
    env = {
        "GATECELL_LOCAL_KEYS": A,
        "GATECELL_HOME": str(tmp_path / "home"),
        "GATECELL_LOCAL_JOB_SECONDS": "0",
    }
    with serving("--data", str(data), env=env) as (_, base), _client(base) as client:
        job = client.post("/imgjob/submit/imagine", json={"prompt": "kept --ar 1:1"}).json()["result"]
        first = _until(lambda: client.get(f"/imgjob/task/{job}/fetch").json(), DONE["imagine"], "the job")
        picture = client.get(httpx.URL(first["imageUrl"]).path).content
    with serving("--data", str(data), env=env) as (_, base), _client(base) as client:
        body = client.get(f"/imgjob/task/{job}/fetch").json()
        assert body["status"] == "SUCCESS"
        assert client.get(httpx.URL(body["imageUrl"]).path).content == picture
    assert not (tmp_path / "home" / "local").exists()  # --data, not the default folder
    shown = subprocess.run(
        [sys.executable, "-m", "gatecell", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert (
        "--data DIR" in shown
        and "GATECELL_LOCAL_DATA" in shown
        and "GATECELL_LOCAL_MAX_AGE" in " ".join(shown.split())
    )


# -- the embedded gateway's own key ---------------------------------------------------------


def _embedded_key(home: Path) -> subprocess.CompletedProcess[str]:
    script = "from gatecell.local import embedded; print(embedded.start().api_key.reveal())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATECELL_")}
    return subprocess.run(
        [sys.executable, "-c", script],
        env={**env, "GATECELL_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_embedded_gateway_keeps_one_private_key_across_restarts(tmp_path):
    home = tmp_path / "home"
    first, second = _embedded_key(home), _embedded_key(home)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    key = first.stdout.strip()
    assert key.startswith("sk-local-") and second.stdout.strip() == key
    key_file = home / "local-key"
    assert key_file.read_text().strip() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(home.stat().st_mode) == 0o700
    assert (home / "local" / "jobs").is_dir()  # its jobs are kept next to the log


def test_a_key_file_others_may_read_is_replaced(tmp_path):
    home = tmp_path / "home"
    first = _embedded_key(home).stdout.strip()
    (home / "local-key").chmod(0o644)
    replaced = _embedded_key(home)
    assert replaced.returncode == 0
    assert replaced.stdout.strip() != first and first not in replaced.stderr
    (line,) = replaced.stderr.splitlines()
    assert "is not a private file of this user" in line and "new key" in line
    assert stat.S_IMODE((home / "local-key").stat().st_mode) == 0o600
    assert _embedded_key(home).stdout.strip() == replaced.stdout.strip()  # and kept from then on
