"""`gatecell.dashboard()`: every panel in one set of tabs, over one gateway and one model list."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import ipywidgets as widgets

from gatecell.wire.util.secret import redact

from ._base import list_models, resolve_gateway
from .chat import ChatPanel
from .compare import ComparePanel
from .image import ImagePanel
from .media import MediaPanel
from .speech import SpeechPanel

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = ["Dashboard", "dashboard"]


class Dashboard(widgets.VBox):
    """A header naming the gateway (and whether it is the local one's stand-ins), then tabs:
    Chat, Compare, Image, Speech, Media. It is for end users, Voila's as a notebook's: the
    notice a notebook's author gets when the local gateway is chosen is not shown.

    The panels are attributes (``chat``, ``compare``, ``image``, ``speech``, ``media``) so
    that a notebook can drive or read them from Python.
    """

    def __init__(self, gateway: Gateway | AsyncGateway | None = None) -> None:
        from gatecell.connect import is_local, quiet

        super().__init__()
        self.add_class("gatecell-dashboard")
        quiet()  # its end users get the header, not the notice meant for a notebook's author
        self.gateway = gw = resolve_gateway(gateway)
        models, problem = list_models(gw)
        self.chat = ChatPanel(gw, models=models)
        self.compare = ComparePanel(gw, models=models)
        self.image = ImagePanel(gw, models=models)
        self.speech = SpeechPanel(gw, models=models)
        self.media = MediaPanel(gw, models=models)
        panels = [self.chat, self.compare, self.image, self.speech, self.media]
        self.tabs = widgets.Tab(
            children=panels, titles=("Chat", "Compare", "Image", "Speech", "Media")
        ).add_class("gatecell-tabs")
        where = redact(gw.base_url, gw.api_key)
        if is_local(gw.base_url):
            where += " (offline stand-in models)"
        line = problem or f"{len(models)} models"
        self.header = widgets.HTML(f"<b>gatecell</b> · {html.escape(where)} · {html.escape(line)}").add_class(
            "gatecell-header"
        )
        self.children = (self.header, self.tabs)


def dashboard(gateway: Gateway | AsyncGateway | None = None) -> Dashboard:
    """All panels in tabs. Without a gateway, the notebook's one is used (from the settings,
    else the embedded local gateway)."""
    return Dashboard(gateway)
