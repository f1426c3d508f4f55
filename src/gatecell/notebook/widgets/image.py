"""The image panel: a prompt, a model and a size in, a gallery of results out."""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from gatecell.wire.transport.errors import echo

from ._base import Panel, button, latency_text, media_widget, prompt_box

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = ["ImagePanel"]

SIZES = ("256x256", "512x512", "1024x1024", "1024x1792", "1792x1024")
"""Common sizes, offered when the gateway lists none for the model."""
SIZE_KEYS = ("sizes", "supported_sizes", "image_sizes")
"""Where a /v1/models entry may list its sizes."""
_SIZE = re.compile(r"^[1-9][0-9]*x[1-9][0-9]*$")


class ImagePanel(Panel):
    """Generate images; the newest result comes first in the gallery.

    ``generate(prompt)`` does what the button does; ``images`` holds every image made
    (Media: ``.data``, ``.mime``, ``.save(path)``), ``result`` the last ImageResult.
    """

    kind = "image"
    name = "image"

    def __init__(
        self,
        gateway: Gateway | AsyncGateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        model: str | None = None,
        size: str = "512x512",
    ) -> None:
        super().__init__(gateway, models=models, model=model)
        self.size = widgets.Combobox(value=size, description="Size", ensure_option=False)
        self.size.add_class("gatecell-size")
        self.offer(self.size, SIZE_KEYS, SIZES)
        self.prompt = prompt_box("Describe the image")
        self.generate_button = button("Generate", "gatecell-generate", self.generate, primary=True)
        self.gallery = widgets.Box(layout=widgets.Layout(flex_flow="row wrap")).add_class("gatecell-gallery")
        self.children = (
            widgets.HBox([self.model, self.size]),
            self.prompt,
            self.generate_button,
            self.status,
            self.gallery,
        )
        self.images: list[Any] = []
        self.result: Any = None

    def generate(self, prompt: str | None = None) -> None:
        prompt = self.prompt.value if prompt is None else prompt
        size = self.size.value.strip() or None
        if not self.model.value:
            return self.show_error("no model to ask: the gateway listed no image model")
        if not prompt.strip():
            return self.show_error("the prompt is empty")
        if size and not _SIZE.match(size):
            return self.show_error(f"size must look like 512x512, not {echo(size)}")
        model = self.model.value

        def work() -> None:
            result = self.gateway.image(model, prompt, size=size)
            self.result = result
            if not result.images:
                return self.show_error("the gateway answered without an image (see .result.raw)")
            self.images[:0] = result.images
            tiles = [_tile(m, prompt) for m in result.images]
            self.gallery.children = (*tiles, *self.gallery.children)
            self.show_info(f"{model} · {len(result.images)} image(s) · {latency_text(result)}")

        self.in_background(work, self.generate_button, f"{model} is drawing…")


def _tile(media: Any, caption: str) -> widgets.Widget:
    view = media_widget(media)
    label = widgets.HTML(f"<small>{html.escape(caption[:80])}</small>")
    return widgets.VBox([view, label]).add_class("gatecell-image-result")
