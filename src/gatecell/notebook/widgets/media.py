"""The media panel: video, job-style image (imagine) and music, one progress bar per job.

These endpoints answer with a job that finishes later. Each submitted job gets a row with
its own progress bar and its own polling thread, so several jobs run side by side and the
kernel stays free; the results (Video, Image, Audio widgets) appear in the row when done.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from gatecell.wire.transport.errors import echo

from ._base import Panel, button, media_widget, panel_error, prompt_box, start_thread

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = ["MediaPanel", "JobView"]

KINDS = ("video", "imagine", "music")


class MediaPanel(Panel):
    """Submit media jobs and watch them finish.

    ``submit(kind, prompt, style=None)`` does what the button does and returns the job's
    row; ``views`` holds every row (``.job``, ``.error``, ``.media``, ``.wait()``).
    """

    kind = "video"
    name = "media"

    def __init__(
        self,
        gateway: Gateway | AsyncGateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        model: str | None = None,
        interval: float | None = None,
    ) -> None:
        super().__init__(gateway, models=models, model=model)
        self.interval = interval
        self.job_kind = widgets.ToggleButtons(options=KINDS, value="video", description="Kind")
        self.job_kind.add_class("gatecell-job-kind")
        self.style = widgets.Text(description="Style", placeholder="music style (optional)")
        self.style.add_class("gatecell-style")
        self.prompt = prompt_box("Describe the video, image or music")
        self.submit_button = button("Submit", "gatecell-submit", self.submit, primary=True)
        self.job_list = widgets.VBox().add_class("gatecell-jobs")
        self.job_kind.observe(lambda _: self._show_fields(), "value")
        self.children = (
            self.job_kind,
            widgets.HBox([self.model, self.style]),
            self.prompt,
            self.submit_button,
            self.status,
            self.job_list,
        )
        self.views: list[JobView] = []
        self._show_fields()

    def _show_fields(self) -> None:
        kind = self.job_kind.value
        self.model.layout.display = None if kind == "video" else "none"
        self.style.layout.display = None if kind == "music" else "none"

    def submit(
        self, kind: str | None = None, prompt: str | None = None, style: str | None = None
    ) -> JobView | None:
        kind = kind or self.job_kind.value
        prompt = self.prompt.value if prompt is None else prompt
        style = (self.style.value if style is None else style).strip() or None
        if kind not in KINDS:
            self.show_error(f"kind must be one of {', '.join(KINDS)}, not {echo(kind)}")
            return None
        if kind == "video" and not self.model.value:
            self.show_error("no model to ask: the gateway listed no video model")
            return None
        if not prompt.strip():
            self.show_error("the prompt is empty")
            return None
        view = JobView(self.gateway, kind, prompt, self.model.value, style, self.interval)
        self.views.insert(0, view)
        self.job_list.children = (view, *self.job_list.children)
        self.show_info(f"{kind} job submitted")
        return view.start()

    def wait(self, timeout: float | None = None) -> bool:
        return all(v.wait(timeout) for v in list(self.views))


class JobView(widgets.VBox):
    """One job: a title line, a progress bar updated after every poll, then its results."""

    def __init__(
        self,
        gateway: Gateway,
        kind: str,
        prompt: str,
        model: str | None,
        style: str | None,
        interval: float | None,
    ) -> None:
        self.gateway = gateway
        self.kind, self.prompt, self.video_model, self.style = kind, prompt, model, style
        self.interval = interval
        self.job: Any = None
        self.error: str | None = None
        self.media: list[Any] = []
        self.title = widgets.HTML(self._title("submitting")).add_class("gatecell-job-title")
        self.bar = widgets.FloatProgress(value=0, min=0, max=100, bar_style="info")
        self.bar.add_class("gatecell-job-progress")
        self.results = widgets.Box(layout=widgets.Layout(flex_flow="row wrap"))
        self.results.add_class("gatecell-job-results")
        super().__init__([self.title, self.bar, self.results])
        self.add_class("gatecell-job")
        self._thread: Any = None

    def start(self) -> JobView:
        self._thread = start_thread(self._run, f"job-{self.kind}")
        return self

    def wait(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def _title(self, status: str, detail: str = "") -> str:
        ident = f" {html.escape(self.job.id)}" if self.job is not None else ""
        extra = f" · {html.escape(detail)}" if detail else ""
        return (
            f"<b>{self.kind}</b>{ident} · <span class='gatecell-job-status'>{html.escape(status)}</span>"
            f"{extra} · <small>{html.escape(self.prompt[:60])}</small>"
        )

    def progress(self, job: Any) -> None:
        """on_progress: called after every poll."""
        self.job = job
        if job.progress is not None:
            self.bar.value = max(0.0, min(100.0, float(job.progress)))
            self.bar.description = f"{self.bar.value:.0f}%"
        self.title.value = self._title(job.status)

    def _run(self) -> None:
        gw = self.gateway
        try:
            if self.kind == "video":
                job = gw.video(self.video_model or "", self.prompt, wait=False)
            elif self.kind == "imagine":
                job = gw.imagine(self.prompt, wait=False)
            else:
                job = gw.music(self.prompt, style=self.style, wait=False)
            self.progress(job)
            job = gw.wait(job, on_progress=self.progress, interval=self.interval)
            self.progress(job)
            if job.status != "succeeded":
                return self._fail(job.error or f"the job ended {job.status}")
            self.media = list(job.media)
            self.results.children = tuple(media_widget(m) for m in self.media)
            self.bar.value, self.bar.bar_style, self.bar.description = 100, "success", "100%"
            self.title.value = self._title("succeeded", f"{len(self.media)} result(s)")
        except Exception as err:  # shown on the row; a thread has nobody to raise to
            self._fail(panel_error(err, gw))

    def _fail(self, line: str) -> None:
        self.error = line
        self.bar.bar_style = "danger"
        self.title.value = self._title("failed", line)
