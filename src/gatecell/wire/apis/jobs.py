"""Job-style tasks (imagine, music, video): where to poll, and what a job body says.

SPEC shows the submit endpoints but no way to retrieve a result (SPEC 4 note 6), so the
polling paths are settings (`JobPaths`) whose defaults follow the gateways these
endpoints come from (WIRE-NOTES). The recognisers accept the imgjob and musicjob
conventions and the video object, and map their many status words onto four: queued,
running, succeeded, failed. A body of unknown shape still becomes a `Job` with ``.raw``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gatecell.wire.transport.errors import InvalidRequest, JobError, echo
from gatecell.wire.transport.exchange import Program, Sleep
from gatecell.wire.transport.results import Job

__all__ = ["JobPaths", "KINDS", "path_segment", "submitted_id", "job_state", "wait_program"]

KINDS = ("imagine", "music", "video")


@dataclass(frozen=True)
class JobPaths:
    """Submit and poll paths, relative to the gateway root. ``{id}`` is the task id."""

    imagine_submit: str = "/imgjob/submit/imagine"
    imagine_fetch: str = "/imgjob/task/{id}/fetch"
    music_submit: str = "/musicjob/submit/music"
    music_fetch: str = "/musicjob/fetch/{id}"
    video_submit: str = "/v1/videos"
    video_fetch: str = "/v1/videos/{id}"
    video_content: str = "/v1/videos/{id}/content"

    def submit(self, kind: str) -> str:
        return getattr(self, f"{_kind(kind)}_submit")

    def fetch(self, kind: str, job_id: str) -> str:
        return getattr(self, f"{_kind(kind)}_fetch").format(id=path_segment(job_id))


def path_segment(job_id: str) -> str:
    """A job id as one path segment: percent-encoded, so that whatever a gateway or a user
    gave (``../admin``, ``a?b#c``) can change neither the path nor the query."""
    if not job_id or job_id in (".", "..") or len(job_id) > 1024:
        raise InvalidRequest("id", f"not a job id: {echo(job_id)}")
    return quote(job_id, safe="-._~")


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise InvalidRequest("kind", f"must be one of {', '.join(KINDS)}; got {echo(kind)}")
    return kind


_STATUS = {
    **dict.fromkeys(
        ("not_start", "submitted", "queued", "pending", "waiting", "created", "submit"), "queued"
    ),
    **dict.fromkeys(
        ("in_progress", "running", "processing", "streaming", "started", "generating"), "running"
    ),
    **dict.fromkeys(("success", "succeeded", "completed", "complete", "done", "finished"), "succeeded"),
    **dict.fromkeys(
        ("failure", "failed", "error", "cancelled", "canceled", "cancel", "timeout", "banned", "expired"),
        "failed",
    ),
}
_IMGJOB_ACCEPTED = {1: "running", 21: "running", 22: "queued"}  # 21 already exists, 22 queued


def submitted_id(kind: str, body: Any) -> str:
    """The task id of a submit answer; a refusal (imgjob code 23/24..., music code != success)
    raises `JobError` with the gateway's description."""
    if isinstance(body, dict):
        code = body.get("code")
        if isinstance(code, int) and not isinstance(code, bool) and "result" in body:
            if code in _IMGJOB_ACCEPTED and body.get("result"):
                return str(body["result"])
            raise JobError(
                f"{kind} submit refused (code {code}): {body.get('description') or 'no description'}",
                job=body,
            )
        if isinstance(code, str) and "data" in body:
            if code.lower() == "success" and isinstance(body["data"], (str, int)):
                return str(body["data"])
            if code.lower() != "success":
                raise JobError(
                    f"{kind} submit refused ({code}): {body.get('message') or 'no message'}", job=body
                )
        inner = body.get("data")
        for source in (body, inner if isinstance(inner, dict) else {}):
            for key in ("id", "task_id", "taskId", "result"):
                if isinstance(source.get(key), (str, int)) and source[key] != "":
                    return str(source[key])
    if isinstance(body, str) and body.strip():
        return body.strip()
    raise JobError(f"{kind} submit answered without a task id: {str(body)[:200]}", job=body)


def _progress(value: Any) -> float | None:
    if isinstance(value, str):
        value = value.strip().rstrip("%")
    try:
        return max(0.0, min(100.0, float(value)))
    except (TypeError, ValueError):
        return None


def _error_text(body: dict[str, Any]) -> str | None:
    for key in ("failReason", "fail_reason", "error", "error_message"):
        value = body.get(key)
        if isinstance(value, dict):
            value = value.get("message") or value.get("code")
        if value:
            return str(value)
    return None


def _urls(body: dict[str, Any]) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    if isinstance(body.get("imageUrl"), str) and body["imageUrl"]:
        found.append((body["imageUrl"], None))
    for item in body.get("imageUrls") or []:
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and (url, None) not in found:
            found.append((url, None))
    for item in body.get("data") or [] if isinstance(body.get("data"), list) else []:
        if isinstance(item, dict):
            for key in ("audio_url", "video_url", "image_url", "url"):
                if isinstance(item.get(key), str) and item[key]:
                    found.append((item[key], None))
                    break
    return found


def job_state(kind: str, job_id: str, body: Any, paths: JobPaths) -> Job:
    """A `Job` from a submit or poll body of any of the known shapes (or none)."""
    inner = body
    if isinstance(body, dict) and isinstance(body.get("code"), str) and isinstance(body.get("data"), dict):
        inner = body["data"]  # musicjob envelope
    if not isinstance(inner, dict):
        return Job(kind, job_id, "queued", raw=body)
    word = str(inner.get("status") or inner.get("state") or "").lower()
    status = _STATUS.get(word, "running" if word else "queued")
    if (
        isinstance(body, dict)
        and isinstance(body.get("code"), str)
        and body["code"].lower() not in ("success", "ok")
    ):
        status = "failed"
    error = _error_text(inner) if status == "failed" else None
    if status == "failed" and error is None:
        error = str(
            inner.get("message")
            or (body.get("message") if isinstance(body, dict) else None)
            or f"status {word or 'failed'}"
        )
    progress = _progress(inner.get("progress"))
    if status == "succeeded":
        progress = 100.0
    urls = _urls(inner)
    if kind == "video" and status == "succeeded" and not urls:
        urls = [(paths.video_content.format(id=path_segment(job_id)), "video/mp4")]
    return Job(kind, job_id, status, progress, body, error, media_urls=urls)


def wait_program(
    poll: Callable[[Job], Generator[Any, Any, Job]],
    job: Job,
    on_progress: Callable[[Job], Any] | None,
    timeout: float,
    interval: float,
) -> Program:
    """Poll until the job is done; fail with `JobError` if it failed or ran out of time."""
    deadline = time.monotonic() + timeout
    while not job.done:
        left = deadline - time.monotonic()
        if left <= 0:
            raise JobError(
                f"{job.kind} job {job.id} did not finish within {timeout:g} s "
                f"(last status {job.status}, progress {job.progress})",
                job=job,
            )
        yield Sleep(min(interval, left))
        job = yield from poll(job)
        if on_progress is not None:
            on_progress(job)
    if job.status == "failed":
        raise JobError(f"{job.kind} job {job.id} failed: {job.error}", job=job)
    return job
