"""Job-style tasks (video, imagine, music): submitted, rendered in the background, polled.

A job renders in a worker thread as soon as it is submitted, while its visible state advances
with time: a job is pending, then queued, then running with a rising progress, and it
completes once both its nominal duration (the `job_seconds` option) has passed and the render
has finished. The pace is thus the same on a fast or a slow machine, and tests can make it
short. Results go to the `MediaStore`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .media_store import MediaStore
from .render import render_in_thread

__all__ = ["JobRecord", "JobStore", "Phase"]

Phase = Literal["pending", "queued", "running", "done", "failed"]


@dataclass
class JobRecord:
    id: str
    kind: str
    prompt: str
    created: float
    duration: float
    meta: dict[str, Any] = field(default_factory=dict)
    file: str | None = None  # MediaStore name of the result
    error: str | None = None
    finished: float | None = None

    def phase(self, now: float | None = None) -> tuple[Phase, int]:
        """The job's visible state and progress (0..100) at `now`."""
        if self.error is not None:
            return "failed", 100
        elapsed = (now if now is not None else time.time()) - self.created
        frac = elapsed / self.duration if self.duration > 0 else 1.0
        if frac >= 1.0 and self.file is not None:
            return "done", 100
        if frac < 0.05:
            return "pending", 0
        if frac < 0.15:
            return "queued", 0
        return "running", max(1, min(99, int(frac * 100)))


class JobStore:
    """Submitted jobs by id (bounded), each rendering in the background."""

    def __init__(self, job_seconds: float, media: MediaStore, limit: int = 1000) -> None:
        self.job_seconds = job_seconds
        self.media = media
        self._jobs: OrderedDict[str, JobRecord] = OrderedDict()
        self._limit = limit
        self._tasks: set[asyncio.Task] = set()

    def submit(
        self,
        kind: str,
        prompt: str,
        render: Callable[[], bytes],
        *,
        mime: str,
        ext: str,
        prefix: str = "",
        meta: dict[str, Any] | None = None,
    ) -> JobRecord:
        job = JobRecord(
            id=prefix + secrets.token_hex(12),
            kind=kind,
            prompt=prompt,
            created=time.time(),
            duration=self.job_seconds,
            meta=meta or {},
        )
        self._jobs[job.id] = job
        while len(self._jobs) > self._limit:
            self._jobs.popitem(last=False)
        task = asyncio.get_running_loop().create_task(self._run(job, render, mime, ext))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job: JobRecord, render: Callable[[], bytes], mime: str, ext: str) -> None:
        try:
            data = await render_in_thread(render)
        except Exception as exc:  # a failed render is a failed job, reported when polled
            job.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            job.file = self.media.put(data, mime, ext)
        job.finished = time.time()

    def get(self, kind: str, job_id: str) -> JobRecord | None:
        job = self._jobs.get(job_id)
        return job if job is not None and job.kind == kind else None
