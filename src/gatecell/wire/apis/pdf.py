"""A PDF's text, extracted under a budget, in a process that can be stopped.

pypdf reads a PDF whole in Python: a small file can make it work for hours (a page whose
compressed content stream holds a million text operators, forms drawn from forms), and an
unknown filter or a broken structure raises whatever pypdf raises (``NotImplementedError``,
``KeyError``...). A thread cannot be stopped, and a check between pages does not bound one
page (nor pypdf's parsing of a content stream before it visits any operator), so the text
is extracted in a worker process (``python -m gatecell.wire.apis.pdf``) that is killed when the
budget is spent or its caller stops waiting:

- ``GATECELL_PDF_MAX_PAGES`` (200): pages read, from the first;
- ``GATECELL_PDF_MAX_CHARS`` (1,000,000): characters of text kept, all pages together;
- ``GATECELL_PDF_MAX_SECONDS`` (20): seconds the extraction may take (the worker's CPU is
  capped a little above it by the system too, should this process die first).

At most as many workers run at once as the machine has processors (`WORKERS`): one more
waits for a free one, within its own budget. Text extracted before a limit is kept, and
`PdfText.stopped` is one line naming the budget
that stopped it ("text extraction stopped after 20 s (GATECELL_PDF_MAX_SECONDS): 3 of 12
pages read"). Whatever pypdf raises is `PdfError`, one line naming the exception, caught
at this boundary. Starting the worker costs a fraction of a second (it imports pypdf); the
caller's process never imports pypdf at all.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from gatecell.wire.transport.errors import InvalidRequest, cut, first_line
from gatecell.wire.transport.settings import env_number

__all__ = ["Budget", "PdfText", "PdfError", "budget", "pdf_text", "WORKERS"]

WORKERS = os.cpu_count() or 1
"""Workers running at once in this process (a local gateway's clients cannot start more)."""
_FREE = threading.BoundedSemaphore(WORKERS)
_CANCELLED = "text extraction stopped: the request was cancelled"


@dataclass(frozen=True)
class Budget:
    """What one extraction may spend.

    **Parameters:**

    * **pages** - pages read, from the first (``GATECELL_PDF_MAX_PAGES``, 200).
    * **chars** - characters of text kept (``GATECELL_PDF_MAX_CHARS``, 1,000,000).
    * **seconds** - wall-clock seconds (``GATECELL_PDF_MAX_SECONDS``, 20).
    """

    pages: int
    chars: int
    seconds: float


def budget() -> Budget:
    """The budget the environment sets now."""
    return Budget(
        env_number(None, "GATECELL_PDF_MAX_PAGES", 200),
        env_number(None, "GATECELL_PDF_MAX_CHARS", 1_000_000),
        env_number(None, "GATECELL_PDF_MAX_SECONDS", 20.0),
    )


@dataclass(frozen=True)
class PdfText:
    """What an extraction gave: ``pages`` the PDF has (None when the budget ran out before
    pypdf counted them), the ``texts`` of the pages read, in order, and ``stopped``, the one
    line naming the limit that ended it early (None when every page was read)."""

    pages: int | None
    texts: tuple[str, ...]
    stopped: str | None = None

    @property
    def chars(self) -> int:
        return sum(len(text) for text in self.texts)


class PdfError(InvalidRequest):
    """pypdf could not read the PDF: ``reason`` is what it raised, in one line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__("", f"pypdf cannot read it ({reason})")


def pdf_text(data: bytes, *, limits: Budget | None = None, stop: threading.Event | None = None) -> PdfText:
    """The text of the PDF ``data``, page by page, under ``limits`` (default: `budget`);
    ``stop`` set ends it at once (the local gateway's client went away). `PdfError` when
    pypdf cannot read it."""
    limits = limits or budget()
    deadline = time.monotonic() + limits.seconds
    while not _FREE.acquire(timeout=0.1):  # a free worker, within the budget
        if stop is not None and stop.is_set():
            return PdfText(None, (), _CANCELLED)
        if time.monotonic() >= deadline:
            return PdfText(None, (), _stopped(f"after {limits.seconds:g} s", "SECONDS", None, []))
    try:
        return _extract(data, limits, deadline, stop)
    finally:
        _FREE.release()


def _extract(data: bytes, limits: Budget, deadline: float, stop: threading.Event | None) -> PdfText:
    with tempfile.TemporaryFile() as source:  # stdin from a file: no pipe to fill or block on
        source.write(data)
        source.seek(0)
        worker = subprocess.Popen(
            [sys.executable, "-m", __name__, str(limits.pages), str(limits.chars), str(limits.seconds)],
            stdin=source,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_environment(),
        )
    try:
        return _collect(worker, limits, deadline, stop)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()
        assert worker.stdout is not None
        worker.stdout.close()


def _environment() -> dict[str, str]:
    """This process's environment, with this gatecell first on the path: the worker runs the
    same code, however this process found it."""
    package_root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


def _collect(
    worker: subprocess.Popen[bytes], limits: Budget, deadline: float, stop: threading.Event | None
) -> PdfText:
    lines: queue.Queue[bytes] = queue.Queue()
    assert worker.stdout is not None
    threading.Thread(target=_pump, args=(worker.stdout, lines), daemon=True).start()
    pages: int | None = None
    texts: list[str] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return PdfText(
                pages, tuple(texts), _stopped(f"after {limits.seconds:g} s", "SECONDS", pages, texts)
            )
        if stop is not None and stop.is_set():
            return PdfText(pages, tuple(texts), _CANCELLED)
        try:
            line = lines.get(timeout=min(left, 0.1))
        except queue.Empty:
            continue
        if not line:  # the worker is done
            break
        message = json.loads(line)
        if "error" in message:
            raise PdfError(cut(message["error"], 200))
        if "pages" in message:
            pages = message["pages"]
        else:
            texts.append(message["text"])
    if pages is None:  # ended without a word: stopped by the system (its CPU or memory cap)
        raise PdfError("its worker process was stopped by the system: over its CPU or memory cap")
    stopped = None
    if len(texts) < pages:
        full = sum(map(len, texts)) >= limits.chars
        where = f"at {limits.chars:,} characters" if full else f"at {limits.pages:,} pages"
        stopped = _stopped(where, "CHARS" if full else "PAGES", pages, texts)
    return PdfText(pages, tuple(texts), stopped)


def _pump(stream: IO[bytes], lines: queue.Queue[bytes]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(b"")


def _stopped(where: str, setting: str, pages: int | None, texts: list[str]) -> str:
    read = f"{len(texts)} of {pages} pages read" if pages is not None else "no page read"
    return f"text extraction stopped {where} (GATECELL_PDF_MAX_{setting}): {read}"


# -- the worker ------------------------------------------------------------------------------


def _work(pages: int, chars: int, seconds: float) -> None:
    """The bytes of a PDF on stdin; on stdout, one JSON line with its page count, then one
    per page read (its text, cut to the characters left), or one naming what pypdf raised."""
    _cap_self(seconds)
    data = sys.stdin.buffer.read()
    out = sys.stdout

    def say(message: dict[str, Any]) -> None:
        out.write(json.dumps(message) + "\n")
        out.flush()

    try:
        import io

        from pypdf import PdfReader

        reader = PdfReader(io.BytesIO(data))
        say({"pages": len(reader.pages)})
        left = chars
        for page in reader.pages[:pages]:
            text = (page.extract_text() or "")[:left]
            say({"text": text})
            left -= len(text)
            if left <= 0:
                break
    except Exception as exc:  # whatever pypdf raises (NotImplementedError...): the bytes are at fault
        name, said = type(exc).__name__, first_line(exc)
        say({"error": name if said == name else f"{name}: {said}"})


def _cap_self(seconds: float) -> None:
    """The system stops this worker too, should its parent die before it: CPU seconds a
    little past the budget, and memory (a content stream decompressed whole)."""
    try:
        import resource
    except ImportError:  # Windows
        return
    cpu = int(seconds) + 5
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    memory = 2 * 2**30
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or hard > memory:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))


if __name__ == "__main__":
    _work(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]))
