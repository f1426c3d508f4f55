"""The progress of a batch: a tqdm bar (``tqdm.auto``: a widget in a notebook, text in a
terminal) with rows done, failed, from the log, tokens, rate and ETA.

The engine only counts; this reads the counts every `interval` seconds (the live Markdown's
``GATECELL_UPDATE_INTERVAL``, 0.1 s by default), so the bar costs the rows nothing.
"""

from __future__ import annotations

from typing import Any

from gatecell.wire.transport.settings import env_number

__all__ = ["BatchBar"]


class BatchBar:
    """The bar of one batch (see the module); ``update`` reads the engine's counts, counted
    in ``unit`` (plural: the bar reads "0 rows")."""

    def __init__(self, engine: Any, enabled: bool, desc: str = "map", unit: str = "rows") -> None:
        self.engine = engine
        self.interval = max(env_number(None, "GATECELL_UPDATE_INTERVAL", 0.1), 0.02)
        self._bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=engine.total, unit=f" {unit}", desc=desc, mininterval=self.interval)
        self._shown: tuple[int, ...] = ()

    def update(self) -> None:
        bar = self._bar
        if bar is None:
            return
        engine = self.engine
        counts = (engine.done, engine.failed, engine.cached, engine.tokens)
        if counts == self._shown:
            return
        self._shown = counts
        done, failed, cached, tokens = counts
        bar.set_postfix_str(f"failed={failed} cached={cached} tokens={tokens:,}", refresh=False)
        bar.update(done + failed - bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self.update()
            self._bar.close()
