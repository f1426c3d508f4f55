"""A streamed chat reply rendered live into a widget, from a background thread.

Every widget update is one iopub message, and the Jupyter server silently drops iopub
messages above 1,000/s, so updates are coalesced by time: at most one per `interval`
seconds, always with the latest text, and the final text always lands. Stop is immediate
for the user: the reply is finished at once and later fragments are ignored, while the
stream is closed so that the connection goes away too.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gatecell.notebook.display import limit_note

from ._base import panel_error, start_thread

if TYPE_CHECKING:
    from gatecell.gateway import Gateway

__all__ = ["Coalescer", "LiveReply", "token_counts"]


class Coalescer:
    """Calls `apply(value)` at most once per `interval` seconds with the latest value pushed.

    A value pushed inside the interval is applied by a timer when the interval ends, so a
    stream that pauses still shows everything that arrived. The interval stretches to five
    times what the last `apply` cost (rendering a long reply as Markdown is not free), so
    applying takes at most a fifth of the time. After `close(final)` nothing else is applied.
    """

    def __init__(self, apply: Callable[[Any], None], interval: float = 0.1) -> None:
        self._apply = apply
        self._interval = interval
        self._lock = threading.Lock()
        self._last = 0.0
        self._cost = 0.0  # seconds the last apply took
        self._pending: Any = None
        self._has_pending = False
        self._timer: threading.Timer | None = None
        self._closed = False
        self.applied = 0  # how many updates reached the widget

    def push(self, value: Any) -> None:
        with self._lock:
            if self._closed:
                return
            self._pending, self._has_pending = value, True
            wait = self._last + max(self._interval, 5 * self._cost) - time.monotonic()
            if wait <= 0:
                self._flush_locked()
            elif self._timer is None:
                self._timer = threading.Timer(wait, self._on_timer)
                self._timer.daemon = True
                self._timer.start()

    def close(self, final: Any) -> None:
        """Apply `final` now and ignore everything pushed afterwards."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._pending, self._has_pending = final, True
            self._flush_locked()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            if not self._closed:
                self._flush_locked()

    def _flush_locked(self) -> None:
        started = time.monotonic()
        if self._has_pending:
            self._apply(self._pending)
            self.applied += 1
            self._has_pending = False
        self._last = time.monotonic()
        self._cost = self._last - started


class LiveReply:
    """One chat request streamed in a thread into `render(text)`.

    `on_done(reply)` runs exactly once: when the stream ends, fails, or `stop()` is called
    (then in the caller's thread, at once). Timing and usage are kept for the panels' stats:
    `latency` (request to last fragment), `ttft` (request to first text), `usage`; and
    `reasoning` (a summary the model sent) and `cut` (a reply its max tokens ended).
    """

    def __init__(
        self,
        gateway: Gateway,
        request: dict[str, Any],
        render: Callable[[str], None],
        on_done: Callable[[LiveReply], None],
        *,
        interval: float = 0.1,
    ) -> None:
        self.gateway = gateway
        self.request = request
        self.text = ""
        self.error: str | None = None
        self.stopped = False
        self.done = False
        self.usage: Any = None
        self.reasoning: str | None = None
        """The reasoning summary or thinking the stream carried, if any."""
        self.cut: str | None = None
        """Why the reply is cut short when its finish reason says it hit max tokens (`limit_note`)."""
        self.started = 0.0
        self.first_text_at: float | None = None
        self.ended: float | None = None
        self._render = Coalescer(render, interval)
        self._on_done = on_done
        self._lock = threading.Lock()
        self._stream: Any = None
        self._thread: threading.Thread | None = None

    @property
    def latency(self) -> float | None:
        return None if self.ended is None else self.ended - self.started

    @property
    def ttft(self) -> float | None:
        return None if self.first_text_at is None else self.first_text_at - self.started

    @property
    def updates(self) -> int:
        """How many times the widget was updated (bounded by the coalescing interval)."""
        return self._render.applied

    def summary(self) -> str:
        """`1.20 s · first token 0.05 s · 12 prompt + 40 completion tokens`, from what is known."""
        parts = []
        if self.latency is not None:
            parts.append(f"{self.latency:.2f} s")
        if self.ttft is not None:
            parts.append(f"first token {self.ttft:.2f} s")
        prompt, completion = token_counts(self.usage)
        if completion is not None:
            parts.append(f"{prompt or 0} prompt + {completion} completion tokens")
        else:
            parts.append("tokens not reported")
        return " · ".join(parts)

    def start(self) -> LiveReply:
        self.started = time.monotonic()
        self._thread = start_thread(self._run, "stream")
        return self

    def stop(self) -> None:
        """Finish now with what arrived, and close the stream."""
        with self._lock:
            if self.done:
                return
            self.stopped = True
            stream = self._stream
        self._finish()
        if stream is not None:
            _close_quietly(stream)

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the request thread; True when it has ended."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _run(self) -> None:
        try:
            # Token counts of chat streams come when the client asks (Gateway(stream_usage=True)).
            stream: Any = self.gateway.chat(stream=True, **self.request)
            with self._lock:
                self._stream = stream
                stopped = self.stopped
            if stopped:
                _close_quietly(stream)
                return
            for fragment in stream:
                if self.stopped:
                    break
                if fragment and self.first_text_at is None:
                    self.first_text_at = time.monotonic()
                self.text += fragment
                self._render.push(self.text)
            self.usage = getattr(stream, "usage", None)
            self.reasoning = getattr(stream, "reasoning", None)
            self.cut = limit_note(stream)
        except Exception as err:  # shown in the panel; a thread has nobody to raise to
            if not self.stopped:
                self.error = panel_error(err, self.gateway)
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self.done:
                return
            self.done = True
            self.ended = time.monotonic()
        self._render.close(self.text)
        self._on_done(self)


def _close_quietly(stream: Any) -> None:
    # Closing a stream that another thread is reading may complain; it is closed all the same.
    with contextlib.suppress(Exception):
        stream.close()


def token_counts(usage: Any) -> tuple[int | None, int | None]:
    """(prompt, completion) token counts from a Usage model or a usage dict, if reported."""
    if usage is None:
        return None, None
    get = usage.get if isinstance(usage, dict) else lambda k: getattr(usage, k, None)
    prompt = get("prompt_tokens") or get("input_tokens")
    completion = get("completion_tokens") or get("output_tokens")
    return prompt, completion
