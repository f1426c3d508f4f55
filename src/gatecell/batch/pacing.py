"""How fast a batch may go: rate schedules for ``rpm`` and ``tpm``, a pause for the whole batch
after a 429, and a concurrency limit that backs off and creeps back up.

A rate is kept as a schedule (the generic cell rate algorithm): each request books its cost
(one request, or its estimated tokens) on a clock that advances ``cost / rate``, and waits
until its booking comes up. No burst is allowed, so over any stretch of time the achieved
rate is the asked one, and an estimate corrected afterwards (the usage that came back)
moves the clock back or forward. A 429 pauses the whole batch, not one row, halves the
concurrency, and slows the schedules by 2%: a gateway that counts the same limit in windows
of its own then sees the batch settle just under it.
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["Schedule", "Pacing"]

# A 429 despite the schedule: the gateway counts in windows of its own, where the jitter of
# a request's start can put one request too many. Each burst of 429s slows the schedules by
# this much, so the batch settles just under the gateway's limit.
_SLOWER = 1.02


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
    """The batch's pace: schedules, the 429 pause, and the adaptive concurrency limit."""

    def __init__(self, concurrency: int, rpm: float | None, tpm: float | None) -> None:
        self.max_concurrency = concurrency
        self.limit = concurrency  # requests allowed in flight now
        self.in_flight = 0
        self.requests = Schedule(rpm) if rpm else None
        self.tokens = Schedule(tpm) if tpm else None
        self.paused_until = 0.0  # time.monotonic; nothing is sent before it
        self.rate_limited = 0  # 429s seen
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
                start = now
                if self.requests is not None:
                    start = max(start, self.requests.book(1, now))
                if self.tokens is not None:
                    start = max(start, self.tokens.book(tokens, now))
                while start > now or self.paused_until > now:  # a 429 may come in meanwhile
                    await asyncio.sleep(max(start, self.paused_until) - now)
                    now = time.monotonic()
        except BaseException:
            self.release()
            raise
        return now

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

    def rate_limited_for(self, seconds: float, sent_at: float) -> None:
        """A 429 to a request sent at ``sent_at``: pause everything for ``seconds``, and halve
        the concurrency once per burst of 429s (those to requests sent after the last cut)."""
        self.rate_limited += 1
        now = time.monotonic()
        self.paused_until = max(self.paused_until, now + seconds)
        for schedule in (self.requests, self.tokens):
            if schedule is not None:
                schedule.not_before(self.paused_until)
                if sent_at >= self._cut_at:
                    schedule.slow_down(_SLOWER)
        if sent_at >= self._cut_at:
            self._cut_at = now
            self.limit = max(1, self.limit // 2)
            self._successes = 0

    def correct_tokens(self, delta: float) -> None:
        if self.tokens is not None:
            self.tokens.correct(delta)
