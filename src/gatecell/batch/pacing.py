"""How fast a batch may go: rate schedules for ``rpm`` and ``tpm``, a pause for the whole batch
after a 429, and a concurrency limit that backs off and creeps back up.

A rate is kept as a schedule (the generic cell rate algorithm): each request books its cost
(one request, or its estimated tokens) on a clock that advances ``cost / rate``, and waits
until its booking comes up. No burst is allowed, so over any stretch of time the achieved
rate is the asked one, and an estimate corrected afterwards (the usage that came back)
moves the clock back or forward. A 429 pauses the whole batch, not one row, halves the
concurrency, and slows the schedules by 2%: a gateway that counts the same limit in windows
of its own then sees the batch settle just under it.

What a gateway asks is bounded (`pause_for`): a pause lasts at least `MIN_PAUSE` (``Retry-After:
0`` would otherwise have a row sent again at once, twenty times over) and at most the client's
``retry_after_cap``, whatever the header says (``inf``, a date a year away). And the batch's
patience bounds the pauses together: once they would add up past it, a 429 no longer pauses
anything and its row fails, so a gateway that keeps saying "later" cannot hold a batch forever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from gatecell.wire.transport.http import retry_after

__all__ = ["Schedule", "Pacing", "pause_for", "MIN_PAUSE"]

# A 429 despite the schedule: the gateway counts in windows of its own, where the jitter of
# a request's start can put one request too many. Each burst of 429s slows the schedules by
# this much, so the batch settles just under the gateway's limit.
_SLOWER = 1.02

MIN_PAUSE = 0.5  # seconds a 429 pauses the batch at least, whatever it asks
_BACKOFF_CAP = 30.0  # the longest pause of our own, when a 429 says nothing


def pause_for(headers: Mapping[str, str], attempt: int, cap: float) -> float:
    """The pause for a row's ``attempt``-th 429 (from 1): the wait the gateway asks
    (``retry-after-ms``, ``Retry-After`` in seconds or as a date: `wire.http.retry_after`),
    else 2, 4, 8... seconds up to 30; in any case at most ``cap`` (the client's
    ``retry_after_cap``) and at least `MIN_PAUSE`, which wins over a smaller cap."""
    asked = retry_after(headers)
    if asked is None:
        asked = min(2.0**attempt, _BACKOFF_CAP)
    return max(min(asked, cap), MIN_PAUSE)


class Schedule:
    """``per_minute`` units (requests or tokens) per minute, booked in order."""

    __slots__ = ("per_unit", "_next")

    def __init__(self, per_minute: float) -> None:
        self.per_unit = 60.0 / per_minute  # seconds each unit takes
        self._next = 0.0  # when the next booking starts (time.monotonic)

    def book(self, cost: float, now: float) -> float:
        """Book ``cost`` units; the time at which they may be spent."""
        start = max(self._next, now)
        self._next = start + cost * self.per_unit
        return start

    def correct(self, delta: float) -> None:
        """``delta`` more units were spent than booked (fewer when negative)."""
        self._next += delta * self.per_unit

    def not_before(self, when: float) -> None:
        self._next = max(self._next, when)

    def slow_down(self, factor: float) -> None:
        self.per_unit *= factor


class Pacing:
    """The batch's pace: schedules, the 429 pause, and the adaptive concurrency limit.

    **Parameters:** ``concurrency``, requests in flight at most; ``rpm``, ``tpm``, requests and
    tokens per minute at most (None: no limit); ``patience``, seconds the 429 pauses may add
    up to (`rate_limited_for`).
    """

    def __init__(
        self, concurrency: int, rpm: float | None, tpm: float | None, patience: float = float("inf")
    ) -> None:
        self.max_concurrency = concurrency
        self.limit = concurrency  # requests allowed in flight now
        self.in_flight = 0
        self.requests = Schedule(rpm) if rpm else None
        self.tokens = Schedule(tpm) if tpm else None
        self.paused_until = 0.0  # time.monotonic; nothing is sent before it
        self.rate_limited = 0  # 429s seen
        self.patience = patience
        self.waited = 0.0  # seconds the batch has been paused by 429s, overlapping pauses counted once
        self._cut_at = 0.0  # when the limit was last cut: a 429 to a request sent before it counts no more
        self._successes = 0
        self._waiters: list[asyncio.Future[None]] = []

    async def acquire(self, tokens: float) -> float:
        """Wait for a slot, the pause, and the schedules; return the send time (monotonic)."""
        while self.in_flight >= self.limit:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        self.in_flight += 1
        try:
            now = time.monotonic()
            if self.paused_until > now:
                await asyncio.sleep(self.paused_until - now)
                now = time.monotonic()
            if self.requests is not None or self.tokens is not None:
                start = self._book(tokens, now)
                while start > now or self.paused_until > now:
                    # A 429 came in meanwhile, pausing past this booking: book again after the
                    # pause, or every request booked within it would go at its end in one burst.
                    if self.paused_until > start:
                        start = self._book(tokens, self.paused_until)
                    await asyncio.sleep(start - now)
                    now = time.monotonic()
        except BaseException:
            self.release()
            raise
        return now

    def _book(self, tokens: float, now: float) -> float:
        """Book a request of ``tokens`` on the schedules; when it may go (monotonic)."""
        start = now
        if self.requests is not None:
            start = max(start, self.requests.book(1, now))
        if self.tokens is not None:
            start = max(start, self.tokens.book(tokens, now))
        return start

    def release(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _wake(self) -> None:
        """Wake as many waiters as there are free slots (each checks again when it runs)."""
        for _ in range(min(self.limit - self.in_flight, len(self._waiters))):
            waiter = self._waiters.pop(0)
            if not waiter.done():
                waiter.set_result(None)

    def succeeded(self) -> None:
        """One more answer: after as many answers as the limit, the limit grows by one."""
        if self.limit < self.max_concurrency:
            self._successes += 1
            if self._successes >= self.limit:
                self._successes = 0
                self.limit += 1
                self._wake()

    def rate_limited_for(self, seconds: float, sent_at: float) -> bool:
        """A 429 to a request sent at ``sent_at``: pause everything for ``seconds``, and halve
        the concurrency once per burst of 429s (those to requests sent after the last cut).
        False, and nothing paused, when that pause would take `waited` past the patience."""
        self.rate_limited += 1
        now = time.monotonic()
        until = max(self.paused_until, now + seconds)
        longer = until - max(self.paused_until, now)  # what this pause adds to the one under way
        if self.waited + longer > self.patience:
            return False
        self.waited += longer
        self.paused_until = until
        for schedule in (self.requests, self.tokens):
            if schedule is not None:
                schedule.not_before(self.paused_until)
                if sent_at >= self._cut_at:
                    schedule.slow_down(_SLOWER)
        if sent_at >= self._cut_at:
            self._cut_at = now
            self.limit = max(1, self.limit // 2)
            self._successes = 0
        return True

    def correct_tokens(self, delta: float) -> None:
        if self.tokens is not None:
            self.tokens.correct(delta)
