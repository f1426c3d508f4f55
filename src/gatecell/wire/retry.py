"""When to try a request again, and how long to wait first (sans-IO).

The rules match the official SDKs (WIRE-NOTES): 408, 409, 429, 5xx and connection errors
are retried a bounded number of times, with exponential backoff and jitter, and a wait the
gateway asks for (``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date) is
honoured up to a cap. The sync and async clients share this; only their sleeps differ.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

__all__ = ["RetryPolicy", "retry_after", "RETRY_STATUSES"]

RETRY_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True)
class RetryPolicy:
    """``max_retries`` extra attempts; backoff ``base * 2**n`` capped at ``cap``, with jitter."""

    max_retries: int = 2
    base: float = 0.5
    cap: float = 8.0
    retry_after_cap: float = 60.0

    def retryable(self, status: int) -> bool:
        return status in RETRY_STATUSES or status >= 500

    def delay(
        self, attempt: int, headers: Mapping[str, str] | None = None, now: float | None = None
    ) -> float:
        """Seconds to wait before retry number ``attempt + 1`` (``attempt`` counts from 0)."""
        asked = retry_after(headers, now) if headers is not None else None
        if asked is not None:
            return min(asked, self.retry_after_cap)
        backoff = min(self.base * 2**attempt, self.cap)
        return backoff * (1 - 0.25 * random.random())


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a response asks for, in seconds, or None. ``now`` is a Unix time (for tests)."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(float(ms) / 1000, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(when.timestamp() - (time.time() if now is None else now), 0.0)
