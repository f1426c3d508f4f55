"""The job flows of WIRE-NOTES: video (/v1/videos), job-style image (imgjob), music (musicjob).

Each submit answers at once with a task id; polling shows the task advancing through its
states with progress; the result is served by this gateway. A job's view reads its record's
``meta`` gently: a record read back from disk may come from another version. Ids unknown here are asked of the
upstream gateway when there is one (its jobs are polled through us too).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gatecell.wire.apis.spec import ImagineRequest, MusicRequest, VideoRequest

from ..backends import prompt_flags as flags
from ..errors import Fail, shown
from ..job_store import JobRecord, QueueFull
from ..registry import VIDEOS
from .common import check_length, json_response, model_endpoint, owner, read_json, runtime, validated
from .media import file_url, size_of

_VIDEO_STATUS = {
    "pending": "queued",
    "queued": "queued",
    "running": "in_progress",
    "done": "completed",
    "failed": "failed",
}
_TASK_STATUS = {
    "pending": "NOT_START",
    "queued": "SUBMITTED",
    "running": "IN_PROGRESS",
    "done": "SUCCESS",
    "failed": "FAILURE",
}


def _seconds(value: Any) -> str | None:
    """The video API's seconds, as a string ("4"); a record from disk may lack them."""
    return f"{value:g}" if isinstance(value, (int, float)) else None


def _ms(t: float | None) -> int | None:
    return int(t * 1000) if t else None


def polled(kind: str):
    """Decorate ``handler(request, job)`` of a poll path. A job is found only by the key that
    submitted it; to any other key it is unknown here, exactly like an id that never existed
    (asked of the upstream gateway when there is one, else 404), so existence is not revealed."""

    def wrap(handler: Callable[[Request, JobRecord], Awaitable[Response]]):
        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            rt = runtime(request)
            job = rt.jobs.get(kind, request.path_params["id"], owner(request))
            if job is not None:
                return await handler(request, job)
            if rt.upstream is not None:
                return await rt.upstream.forward(request, b"")
            raise Fail(404, f"no {kind} task with id {shown(request.path_params['id'])}")

        return run

    return wrap


def _submit(request: Request, kind: str, prompt: str, meta: dict[str, Any], prefix: str = "") -> JobRecord:
    """Start a job for the caller, rendered from ``meta`` (`job_kinds`); a full queue is a 429
    with Retry-After (in the path's format)."""
    try:
        return runtime(request).jobs.submit(kind, owner(request), prompt, meta, prefix=prefix)
    except QueueFull as exc:
        raise Fail(429, str(exc), code="queue_full", headers={"Retry-After": str(exc.retry_after)}) from None


def _number(data: dict, name: str, default: float, low: float, high: float) -> float:
    value = data.get(name, default)
    try:
        number = float(value)  # the video API sends seconds as a string ("4")
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, bool) or not low <= number <= high:
        raise Fail(400, f"{name} must be a number from {low:g} to {high:g}, got {shown(value)}", param=name)
    return number


# -- video ---------------------------------------------------------------------------------


@model_endpoint(VideoRequest, VIDEOS)
async def create_video(request: Request, req: VideoRequest, data: dict) -> Response:
    check_length("prompt", req.prompt)
    seconds = _number(data, "seconds", 2.0, 0.5, 12.0)
    size = data.get("size") or "320x240"
    width, height = (size_of(size) or (0, 0)) if isinstance(size, str) else (0, 0)
    if not (64 <= width <= 1280 and 64 <= height <= 1280) or width % 2 or height % 2:
        raise Fail(
            400, f"size must be WIDTHxHEIGHT with even sides from 64 to 1280, got {shown(size)}", param="size"
        )
    meta = {"model": req.model, "seconds": seconds, "size": f"{width}x{height}"}
    job = _submit(request, "video", req.prompt, meta, prefix="video_")
    return json_response(_video(job))


def _video(job: JobRecord) -> dict:
    phase, progress = job.phase()
    status = _VIDEO_STATUS[phase]
    return {
        "id": job.id,
        "object": "video",
        "model": job.meta.get("model"),
        "status": status,
        "progress": progress,
        "created_at": int(job.created),
        "completed_at": int(job.finished) if status == "completed" and job.finished else None,
        "expires_at": None,
        "prompt": job.prompt,
        "seconds": _seconds(job.meta.get("seconds")),
        "size": job.meta.get("size"),
        "remixed_from_video_id": None,
        "error": {"code": "render_failed", "message": job.error} if job.error else None,
    }


@polled("video")
async def get_video(request: Request, job: JobRecord) -> Response:
    return json_response(_video(job))


@polled("video")
async def video_content(request: Request, job: JobRecord) -> Response:
    rt = runtime(request)
    variant = request.query_params.get("variant", "video")
    if variant != "video":
        raise Fail(
            400,
            f"variant {shown(variant)} is not available from local-video; use variant=video",
            param="variant",
        )
    phase, progress = job.phase()
    if phase == "failed":
        raise Fail(400, f"video {job.id} failed: {job.error}")
    if phase != "done":
        raise Fail(400, f"video {job.id} is not ready yet ({_VIDEO_STATUS[phase]}, {progress}%)")
    found = rt.media.get(job.file or "", job.owner)
    if found is None:
        raise Fail(404, f"the content of video {job.id} has expired")
    return Response(found.data, media_type="video/mp4")


# -- job-style image -----------------------------------------------------------------------


async def submit_imagine(request: Request) -> Response:
    body, data = await read_json(request)
    req = await validated(ImagineRequest, body, data)
    check_length("prompt", req.prompt)
    try:
        prompt, options = flags.parse(req.prompt)
        width, height = flags.size_for(options)
    except ValueError as exc:
        raise Fail(400, f"prompt: {exc}", param="prompt") from None
    if not prompt:
        raise Fail(400, "prompt: must hold a description besides its --flags", param="prompt")
    meta = {"clean": prompt, "flags": options, "width": width, "height": height}
    job = _submit(request, "imagine", req.prompt, meta)
    return json_response({"code": 1, "description": "Submit success", "result": job.id, "properties": {}})


@polled("imagine")
async def fetch_imagine(request: Request, job: JobRecord) -> Response:
    phase, progress = job.phase()
    done = phase == "done"
    return json_response(
        {
            "id": job.id,
            "action": "IMAGINE",
            "prompt": job.prompt,
            "promptEn": job.meta.get("clean", job.prompt),
            "description": f"/imagine {job.prompt}",
            "state": "",
            "submitTime": _ms(job.created),
            "startTime": _ms(job.created) if phase not in ("pending", "queued") else None,
            "finishTime": _ms(job.finished) if done or phase == "failed" else None,
            "imageUrl": file_url(request, job.file) if done and job.file else None,
            "status": _TASK_STATUS[phase],
            "progress": f"{progress}%",
            "failReason": job.error,
            "properties": {
                "flags": job.meta.get("flags", {}),
                "width": job.meta.get("width"),
                "height": job.meta.get("height"),
            },
        }
    )


# -- job-style music -----------------------------------------------------------------------


async def submit_music(request: Request) -> Response:
    body, data = await read_json(request)
    req = await validated(MusicRequest, body, data)
    check_length("prompt", req.prompt)
    check_length("style", req.style, 200)
    seconds = _number(data, "seconds", 4.0, 1.0, 30.0)
    job = _submit(request, "music", req.prompt, {"style": req.style, "seconds": seconds})
    return json_response({"code": "success", "message": "", "data": job.id})


@polled("music")
async def fetch_music(request: Request, job: JobRecord) -> Response:
    phase, progress = job.phase()
    done = phase == "done"
    clips = []
    if done and job.file:
        clips.append(
            {
                "id": job.id,
                "title": " ".join(job.prompt.split()[:8]),
                "audio_url": file_url(request, job.file),
                "image_url": None,
                "tags": job.meta.get("style") or "",
                "duration": job.meta.get("seconds"),
                "prompt": job.prompt,
                "status": "complete",
            }
        )
    task = {
        "task_id": job.id,
        "action": "MUSIC",
        "status": _TASK_STATUS[phase],
        "fail_reason": job.error or "",
        "submit_time": int(job.created),
        "start_time": int(job.created) if phase not in ("pending", "queued") else 0,
        "finish_time": int(job.finished) if (done or phase == "failed") and job.finished else 0,
        "progress": f"{progress}%",
        "data": clips,
    }
    return json_response({"code": "success", "message": "", "data": task})
