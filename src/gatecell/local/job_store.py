"""Job-style tasks (video, imagine, music): submitted, rendered in the background, polled.

A job renders in a worker thread (the job capacity of `Renders`, apart from the renders
callers wait for) as soon as a slot is free, while its visible state advances with time: a
job is pending, then queued, then running with a rising progress, and it completes once both
its nominal duration (the `job_seconds` option) has passed and the render has finished. The
pace is thus the same on a fast or a slow machine, and tests can make it short.

Bounds, so that no caller can make the gateway do unbounded work: at most `queue` jobs are
unfinished at once, `queue_per_owner` of them for one owner (more are refused with
`QueueFull`); at most `kept` jobs are listed, none older than `max_age`. A job leaves the
list with its file, and its file leaves the `MediaStore` with it: a job that says it
succeeded can always be fetched. A job that leaves before its render ends is stopped
through a `threading.Event` (it never starts, or stops between frames: a worker thread
cannot be cancelled from outside).

**On disk** (a ``folder``: ``gatecell serve`` and the embedded gateway), each job is also a
record, ``folder/jobs/<id>.json``, written when it is submitted and when it ends, and the
list is the folder: the bounds apply to it, and a job is found there when this process does
not know it, after a restart or when another gateway process (another kernel) made it. A
job found unfinished is still rendering if its gateway's `disk.Lease` is held; otherwise
that gateway is gone, and this one renders it again from its record (`job_kinds`), or says
plainly that it cannot. So no job vanishes with a restart: finished ones are served as
they were, unfinished ones finish. A job id is checked against the shape the gateway gives
ids before it comes near a path.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import math
import os
import re
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gatecell.wire.util.private import private_folder, read_private, write_private

from .backends._stop import Stopped, check
from .disk import Lease, sweep_temporary
from .job_kinds import Render, renderer
from .media_store import DAY, MediaStore
from .render import Renders

__all__ = ["JobRecord", "JobStore", "Phase", "QueueFull"]

Phase = Literal["pending", "queued", "running", "done", "failed"]
JOB_ID = re.compile(r"(?:video_)?[0-9a-f]{24}")  # what `submit` makes
_CANNOT_RESUME = (
    "the local gateway stopped while this job was rendering, and it cannot be rendered again ({}); "
    "submit it again"
)


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
    lease: str | None = None  # the `disk.Lease` of the gateway rendering it (on disk only)

    @property
    def ended(self) -> bool:
        return self.file is not None or self.error is not None

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
    """Submitted jobs by id (bounded), each rendering in the background; kept in ``folder``
    too when given."""

    def __init__(
        self,
        job_seconds: float,
        media: MediaStore,
        renders: Renders,
        *,
        kept: int = 1000,
        queue: int = 16,
        queue_per_owner: int = 8,
        max_age: float = 7 * DAY,
        folder: Path | None = None,
    ) -> None:
        self.job_seconds = job_seconds
        self.media = media
        self.renders = renders
        self._kept, self._queue, self._per_owner, self._max_age = kept, queue, queue_per_owner, max_age
        self._jobs: OrderedDict[str, JobRecord] = OrderedDict()
        self._by_file: dict[str, str] = {}
        self._running: dict[str, tuple[asyncio.Task, threading.Event]] = {}
        media.on_evict = self._file_evicted
        self._folder: Path | None = None
        self._lease: Lease | None = None
        if folder is not None:
            self._folder = private_folder(folder / "jobs")
            self._lease = Lease(folder / "leases")
            sweep_temporary(self._folder)
            self._sweep()

    def submit(
        self, kind: str, owner: str, prompt: str, meta: dict[str, Any], *, prefix: str = ""
    ) -> JobRecord:
        """Start a job whose render `job_kinds.renderer` makes from `meta`. Raises `QueueFull`
        when at a bound."""
        self._check_room(owner)
        job = JobRecord(
            id=prefix + secrets.token_hex(12),
            kind=kind,
            owner=owner,
            prompt=prompt,
            created=time.time(),
            duration=self.job_seconds,
            meta=meta,
        )
        render, mime, ext = renderer(
            job.kind, job.prompt, job.meta
        )  # before it is listed: a record that cannot render is a bug
        self._list(job)
        self._start(job, render, mime, ext)
        if self._folder is not None:
            self._sweep()
        else:
            while len(self._jobs) > self._kept:
                self._forget(next(iter(self._jobs)))
        return job

    def _list(self, job: JobRecord) -> None:
        self._jobs[job.id] = job
        if job.file is not None:
            self._by_file[job.file] = job.id

    def _start(self, job: JobRecord, render: Render, mime: str, ext: str) -> None:
        job.lease = self._lease.name if self._lease is not None else None
        self._save(job)
        stop = threading.Event()
        task = asyncio.get_running_loop().create_task(self._run(job, render, stop, mime, ext))
        self._running[job.id] = (task, stop)

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

    async def _run(self, job: JobRecord, render: Render, stop: threading.Event, mime: str, ext: str) -> None:
        try:
            data = await self.renders.job(_unless_stopped, render, stop)
        except Stopped:  # forgotten, or the gateway stops: a record on disk stays unfinished
            self._running.pop(job.id, None)
            return
        except Exception as exc:  # a failed render is a failed job, reported when polled
            job.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            if self._jobs.get(job.id) is not job:  # forgotten while it rendered
                self._running.pop(job.id, None)
                return
            job.file = self.media.put(data, mime, ext, job.owner)
            self._by_file[job.file] = job.id
        job.finished = time.time()
        self._running.pop(job.id, None)
        self._save(job)

    def get(self, kind: str, job_id: str, owner: str) -> JobRecord | None:
        """The job if it exists, is of `kind` and belongs to `owner`; None otherwise, alike."""
        job = self._jobs.get(job_id) or self._read(job_id)
        if job is None or job.kind != kind or job.owner != owner:
            return None
        if job.id not in self._jobs:
            job = self._adopt(job)
        if job.file is not None and not self.media.has(job.file, owner):  # gone with its file
            self._forget(job.id)
            return None
        return job

    def _adopt(self, job: JobRecord) -> JobRecord:
        """A record of the folder this process did not know: kept if it ended; left as it is
        while its gateway renders it; otherwise rendered here again (when there is room)."""
        if job.ended:
            self._list(job)
            return job
        assert self._lease is not None
        if self._lease.alive(job.lease) or len(self._running) >= self._queue:
            return job  # read again at the next poll
        try:
            render, mime, ext = renderer(job.kind, job.prompt, job.meta)
        except ValueError as exc:
            job.error, job.finished = _CANNOT_RESUME.format(exc), time.time()
            self._list(job)
            self._save(job)
            return job
        self._list(job)
        self._start(job, render, mime, ext)
        return job

    # -- the folder ---------------------------------------------------------------------

    def _path(self, job_id: str) -> Path:
        assert self._folder is not None
        return self._folder / f"{job_id}.json"

    def _save(self, job: JobRecord) -> None:
        """The record on disk, its time the job's creation (the folder sorts by it)."""
        if self._folder is None:
            return
        path = self._path(job.id)
        write_private(path, json.dumps(dataclasses.asdict(job)).encode())
        os.utime(path, (job.created, job.created))

    def _read(self, job_id: str) -> JobRecord | None:
        if self._folder is None or not JOB_ID.fullmatch(job_id):
            return None
        try:
            data = json.loads(read_private(self._path(job_id)))
            job = JobRecord(**data)
        except (OSError, ValueError, TypeError):  # none, not a record of ours, or another user's file
            return None
        return job if job.id == job_id else None

    def _sweep(self) -> None:
        """The folder's bounds: at most `kept` jobs, none older than `max_age` (by creation)."""
        assert self._folder is not None
        found = []
        for entry in os.scandir(self._folder):
            job_id = entry.name.removesuffix(".json")
            if entry.name.endswith(".json") and JOB_ID.fullmatch(job_id):
                with contextlib.suppress(OSError):
                    found.append((entry.stat(follow_symlinks=False).st_mtime, job_id))
        found.sort(reverse=True)
        cutoff = time.time() - self._max_age
        for rank, (created, job_id) in enumerate(found):
            if rank >= self._kept or created < cutoff:
                self._forget(job_id)

    # -- leaving ------------------------------------------------------------------------

    def _forget(self, job_id: str) -> None:
        """Drop a job: stop its render, drop its file and its record."""
        job = self._jobs.pop(job_id, None) or self._read(job_id)
        running = self._running.pop(job_id, None)
        if running is not None:
            running[1].set()
        if job is not None and job.file is not None:
            self._by_file.pop(job.file, None)
            self.media.drop(job.file, job.owner)
        if self._folder is not None:
            self._path(job_id).unlink(missing_ok=True)

    def _file_evicted(self, name: str) -> None:
        job_id = self._by_file.pop(name, None)
        if job_id is not None and job_id in self._jobs:
            self._forget(job_id)

    def close(self) -> None:
        """Stop every unfinished render (the gateway is shutting down) and give the lease
        up, so that the next gateway on the folder renders them again."""
        for _, stop in self._running.values():
            stop.set()
        if self._lease is not None:
            self._lease.release()


def _unless_stopped(render: Render, stop: threading.Event) -> bytes:
    """In the worker thread, once the job has its slot: a job stopped while it waited never
    renders at all; one stopped while rendering stops at the renderer's next check."""
    check(stop)
    return render(stop=stop)
