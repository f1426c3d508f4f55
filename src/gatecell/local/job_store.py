"""Job-style tasks (video, imagine, music): submitted, rendered in the background, polled.

A job renders in a worker thread (the job capacity of `Renders`, apart from the renders
callers wait for) as soon as a slot is free, while its visible state advances with time: a
job is pending, then queued, then running with a rising progress, and it completes once both
its nominal duration (the `job_seconds` option) has passed and the render has finished. The
pace is thus the same on a fast or a slow machine, and tests can make it short.

Bounds, so that no caller can make the gateway do unbounded work: at most `queue` jobs are
unfinished at once, `queue_per_owner` of them for one owner (more are refused with
`QueueFull`); at most `kept` jobs are listed. A job leaves the list with its file, and its
file leaves the `MediaStore` with it: a job that says it succeeded can always be fetched.
A job that leaves before its render ends is stopped through a `threading.Event` (it never
starts, or stops between frames: a worker thread cannot be cancelled from outside). Each job
is a plain record (owner, prompt, state, file name) apart from the running task, so a durable
store can keep the records as they are.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from .backends._stop import Stopped, check
from .media_store import MediaStore
from .render import Renders

__all__ = ["JobRecord", "JobStore", "Phase", "QueueFull"]

Phase = Literal["pending", "queued", "running", "done", "failed"]


@dataclass
class JobRecord:
    id: str
    kind: str
    owner: str  # `auth.owner_of` the key that submitted it, never the key
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


class QueueFull(Exception):
    """Too many unfinished jobs; `retry_after` is a fair wait in seconds."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class JobStore:
    """Submitted jobs by id (bounded), each rendering in the background."""

    def __init__(
        self,
        job_seconds: float,
        media: MediaStore,
        renders: Renders,
        *,
        kept: int = 1000,
        queue: int = 16,
        queue_per_owner: int = 8,
    ) -> None:
        self.job_seconds = job_seconds
        self.media = media
        self.renders = renders
        self._kept, self._queue, self._per_owner = kept, queue, queue_per_owner
        self._jobs: OrderedDict[str, JobRecord] = OrderedDict()
        self._by_file: dict[str, str] = {}
        self._running: dict[str, tuple[asyncio.Task, threading.Event]] = {}
        media.on_evict = self._file_evicted

    def submit(
        self,
        kind: str,
        owner: str,
        prompt: str,
        render: Callable[..., bytes],
        *,
        mime: str,
        ext: str,
        prefix: str = "",
        meta: dict[str, Any] | None = None,
    ) -> JobRecord:
        """Start a job; `render(stop=event)` makes its bytes. Raises `QueueFull` when at a bound."""
        self._check_room(owner)
        job = JobRecord(
            id=prefix + secrets.token_hex(12),
            kind=kind,
            owner=owner,
            prompt=prompt,
            created=time.time(),
            duration=self.job_seconds,
            meta=meta or {},
        )
        self._jobs[job.id] = job
        stop = threading.Event()
        task = asyncio.get_running_loop().create_task(self._run(job, render, stop, mime, ext))
        self._running[job.id] = (task, stop)
        while len(self._jobs) > self._kept:
            self._forget(next(iter(self._jobs)))
        return job

    def _check_room(self, owner: str) -> None:
        retry = max(1, math.ceil(self.job_seconds))
        if len(self._running) >= self._queue:
            raise QueueFull(
                f"this gateway already has {len(self._running)} unfinished jobs (its limit); "
                f"try again in {retry} s",
                retry,
            )
        mine = sum(1 for job_id in self._running if self._jobs[job_id].owner == owner)
        if mine >= self._per_owner:
            raise QueueFull(
                f"you already have {mine} unfinished jobs (the limit per key); try again in {retry} s", retry
            )

    async def _run(
        self, job: JobRecord, render: Callable[..., bytes], stop: threading.Event, mime: str, ext: str
    ) -> None:
        try:
            data = await self.renders.job(_unless_stopped, render, stop)
        except Stopped:
            return
        except Exception as exc:  # a failed render is a failed job, reported when polled
            job.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            if self._jobs.get(job.id) is job:  # not forgotten while it rendered
                job.file = self.media.put(data, mime, ext, job.owner)
                self._by_file[job.file] = job.id
        finally:
            job.finished = time.time()
            self._running.pop(job.id, None)

    def get(self, kind: str, job_id: str, owner: str) -> JobRecord | None:
        """The job if it exists, is of `kind` and belongs to `owner`; None otherwise, alike."""
        job = self._jobs.get(job_id)
        return job if job is not None and job.kind == kind and job.owner == owner else None

    def _forget(self, job_id: str) -> None:
        """Drop a job: stop its render, drop its file."""
        job = self._jobs.pop(job_id)
        running = self._running.pop(job_id, None)
        if running is not None:
            running[1].set()
        if job.file is not None:
            self._by_file.pop(job.file, None)
            self.media.drop(job.file)

    def _file_evicted(self, name: str) -> None:
        job_id = self._by_file.pop(name, None)
        if job_id is not None and job_id in self._jobs:
            self._forget(job_id)

    def close(self) -> None:
        """Stop every unfinished render (the gateway is shutting down)."""
        for _, stop in self._running.values():
            stop.set()


def _unless_stopped(render: Callable[..., bytes], stop: threading.Event) -> bytes:
    """In the worker thread, once the job has its slot: a job stopped while it waited never
    renders at all; one stopped while rendering stops at the renderer's next check."""
    check(stop)
    return render(stop=stop)
