"""Keeping the outcomes a client reports, through its hooks (as the log does)."""

from __future__ import annotations

from typing import Any

from gatecell.wire.calls import Hooks, Outcome


class Recorder(Hooks):
    """A client's hooks, with every outcome they hear kept in ``outcomes``."""

    def __init__(self, inner: Hooks) -> None:
        self.inner = inner
        self.outcomes: list[Outcome] = []

    def started(self, call: Any) -> Any:
        return self.inner.started(call)

    def ended(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.inner.ended(outcome)

    def job_kind(self, job_id: str) -> str | None:
        return self.inner.job_kind(job_id)


def recording(gw: Any) -> Recorder:
    """Keep every outcome ``gw`` reports from now on; the recorder holds them."""
    gw.hooks = recorder = Recorder(gw.hooks)
    return recorder
