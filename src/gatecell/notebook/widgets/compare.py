"""The comparison panel: one prompt streamed from several models side by side, at once.

Each model gets its own thread and column, its reply rendered as Markdown like the chat
panel's and followed as it grows; under each column the latency, the time to the first
token and the token counts the gateway reported. All columns share one gateway
(httpx's connection pool is safe across threads).
"""

from __future__ import annotations

import functools
import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from gatecell.notebook.markdown import ALERT, MUTED

from ._base import Panel, button, follower, keyed, prompt_box, text_html
from ._live import LiveReply, token_counts
from .chat import sampling, sampling_controls

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = ["ComparePanel"]


class ComparePanel(Panel):
    """Stream one prompt from the selected models side by side.

    ``run(prompt, models)`` does what the Compare button does; ``results`` maps each model
    of the last run to its text, error, latency, ttft and token counts.
    """

    name = "compare"

    def __init__(
        self,
        gateway: Gateway | AsyncGateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        selected: Sequence[str] | None = None,
        interval: float = 0.1,
    ) -> None:
        super().__init__(gateway, models=models)
        self.interval = interval
        ids = list(self.model.options)
        self.choices = widgets.SelectMultiple(
            options=ids,
            value=tuple(selected) if selected else tuple(ids[:2]),
            description="Models",
            rows=min(max(len(ids), 2), 6),
        ).add_class("gatecell-compare-models")
        self.temperature, self.top_p, self.max_tokens = sampling_controls()
        self.prompt = prompt_box("One prompt for every selected model (Ctrl+Enter compares)")
        self.run_button = button("Compare", "gatecell-compare-run", self.run, primary=True)
        self.stop_button = button("Stop", "gatecell-stop", self.stop, disabled=True)
        self.columns = widgets.HBox().add_class("gatecell-compare-columns")
        self.children = (
            widgets.HBox([self.choices, self.max_tokens]),
            widgets.HBox([self.temperature, self.top_p]),
            self.prompt,
            widgets.HBox([self.run_button, self.stop_button]),
            self.columns,
            self.status,
            keyed(self.prompt, self.run, "gatecell-compare-run"),
        )
        self.replies: dict[str, LiveReply] = {}

    @property
    def busy(self) -> bool:
        return any(not r.done for r in self.replies.values())

    @property
    def results(self) -> dict[str, dict[str, Any]]:
        out = {}
        for model, r in self.replies.items():
            prompt_tokens, completion_tokens = token_counts(r.usage)
            out[model] = {
                "text": r.text,
                "error": r.error,
                "stopped": r.stopped,
                "latency": r.latency,
                "ttft": r.ttft,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
            }
        return out

    def run(self, prompt: str | None = None, models: Sequence[str] | None = None) -> dict[str, LiveReply]:
        """Start streaming `prompt` from every model in `models` (default: the selection)."""
        prompt = self.prompt.value if prompt is None else prompt
        models = list(self.choices.value if models is None else models)
        if self.busy:
            self.show_error("a comparison is still streaming: press Stop first")
            return {}
        if not prompt.strip():
            self.show_error("the prompt is empty")
            return {}
        if not models:
            self.show_error("select at least one model")
            return {}
        try:
            fields = sampling(self.temperature.value, self.top_p.value, self.max_tokens.value)
        except ValueError as err:
            self.show_error(str(err))
            return {}
        self.show_info(f"streaming from {len(models)} models…")
        self.run_button.disabled, self.stop_button.disabled = True, False
        columns, self.replies = [], {}
        for model in dict.fromkeys(models):
            column = _Column(model)
            columns.append(column)
            self.replies[model] = LiveReply(
                self.gateway,
                {"model": model, "messages": [{"role": "user", "content": prompt}], **fields},
                column.show,
                functools.partial(self._done, column=column),
                interval=self.interval,
            )
        self.columns.children = tuple(columns)
        for reply in self.replies.values():
            reply.start()
        return self.replies

    def stop(self) -> None:
        for reply in list(self.replies.values()):
            reply.stop()

    def wait(self, timeout: float | None = None) -> bool:
        return all(r.join(timeout) for r in list(self.replies.values()))

    def _done(self, reply: LiveReply, column: _Column) -> None:
        column.finish(reply)
        if not self.busy:
            self.run_button.disabled, self.stop_button.disabled = False, True
            failed = [m for m, r in self.replies.items() if r.error]
            stopped = [m for m, r in self.replies.items() if r.stopped]
            cut = [m for m, r in self.replies.items() if r.cut]
            if failed:
                self.show_error(f"{len(failed)} of {len(self.replies)} failed: {', '.join(failed)}")
            elif stopped:
                self.show_info(f"stopped: {len(stopped)} of {len(self.replies)} had not finished")
            elif cut:
                self.show_info(f"done; cut at the token limit: {', '.join(cut)}")
            else:
                self.show_info("done")


class _Column(widgets.VBox):
    """One model's reply, with its stats underneath."""

    def __init__(self, model: str) -> None:
        self.header = widgets.HTML(f"<b>{html.escape(model)}</b>")
        self.body = widgets.HTMLMath(text_html("", markdown=True)).add_class("gatecell-compare-text")
        self.stats = widgets.HTML("…").add_class("gatecell-compare-stats")
        super().__init__(
            [self.header, follower(self.body), self.stats],
            layout=widgets.Layout(flex="1 1 0", min_width="220px", margin="0 8px 0 0"),
        )
        self.add_class("gatecell-compare-column")

    def show(self, text: str) -> None:
        self.body.value = text_html(text, markdown=True)

    def finish(self, reply: LiveReply) -> None:
        if reply.error:
            line = f'<span style="color:{ALERT}">{html.escape(reply.error)}</span>'
        else:
            note = " (stopped)" if reply.stopped else f" ({reply.cut})" if reply.cut else ""
            line = f'<span style="color:{MUTED}">{html.escape(reply.summary())}{note}</span>'
        self.stats.value = line
