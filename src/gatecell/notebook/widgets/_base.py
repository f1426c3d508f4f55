"""What every panel shares: a gateway, the model list, a one-line status, background work.

Panels hold the gateway as a plain Python attribute, never as a trait: traits are synced to
the browser and saved with the notebook's widget state, and the gateway carries the key.
Requests run in daemon threads so that a click never blocks the kernel; widget values set
from those threads reach the frontend through the kernel's thread-safe iopub channel. An
`AsyncGateway` is driven through `SyncGateway`, on a loop of its own.
"""

from __future__ import annotations

import contextvars
import html
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

import ipywidgets as widgets

from gatecell.notebook.markdown import ALERT, MUTED

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = [
    "ENDPOINTS",
    "Panel",
    "panel_error",
    "latency_text",
    "list_models",
    "listed_values",
    "button",
    "keyed",
    "media_widget",
    "model_ids",
    "prompt_box",
    "start_thread",
    "text_html",
    "follower",
]

# Substrings of the paths a model may declare in its /v1/models entry, per panel kind.
ENDPOINTS: dict[str, tuple[str, ...]] = {
    "chat": ("chat/completions", "responses"),
    "image": ("images/generations",),
    "speech": ("audio/speech",),
    "video": ("videos",),
}


def resolve_gateway(gateway: Gateway | AsyncGateway | None) -> Gateway:
    """The given gateway, else the notebook's one (settings, or the embedded local gateway).
    An `AsyncGateway` is run on a loop of the panel's own (see `SyncGateway`)."""
    if gateway is None:
        from gatecell.notebook import session_for

        return session_for().gateway
    from gatecell.gateway import AsyncGateway

    if isinstance(gateway, AsyncGateway):
        from ._bridge import SyncGateway

        return cast("Gateway", SyncGateway(gateway))  # it answers every method of a Gateway, alike
    return gateway


def list_models(gateway: Gateway) -> tuple[list[Any], str | None]:
    """The gateway's model entries, or an empty list and the error line saying why."""
    try:
        return list(gateway.models()), None
    except Exception as err:  # a panel without models still opens and says why
        return [], f"could not list models: {panel_error(err, gateway)}"


def model_ids(models: Iterable[Any], kind: str) -> list[str]:
    """Ids of the models serving a panel kind.

    A gateway that does not say which endpoints a model serves gets the model offered in
    every panel: the user knows better than a guess from its name.
    """
    wanted = ENDPOINTS[kind]
    ids = []
    for model in models:
        endpoints = getattr(model, "endpoints", None)
        if not endpoints or any(w in e for e in endpoints for w in wanted):
            ids.append(model.id)
    return ids


def listed_values(models: Iterable[Any], model: str | None, keys: Sequence[str]) -> list[str]:
    """The values of a setting (voices, sizes) the gateway lists for ``model`` in its
    /v1/models entry under one of ``keys``: strings, or objects naming one by ``id`` or
    ``name``. SPEC does not show such lists, so none is needed; what a gateway lists is
    offered as text, never markup."""
    entry = next((getattr(m, "raw", None) for m in models if getattr(m, "id", None) == model), None)
    if not isinstance(entry, dict):
        return []
    found: list[Any] = next((entry[k] for k in keys if isinstance(entry.get(k), list)), [])
    values = [v.get("id") or v.get("name") if isinstance(v, dict) else v for v in found]
    return list(dict.fromkeys(v for v in values if isinstance(v, str) and v.strip() and len(v) <= 100))


def panel_error(err: BaseException, gateway: Gateway | None = None) -> str:
    """One readable line for an error, with the key masked even if a gateway echoed it."""
    from gatecell.wire.transport.errors import GatecellError, first_line
    from gatecell.wire.util.secret import redact

    text = first_line(err)
    if not isinstance(err, GatecellError):
        text = f"{type(err).__name__}: {text}"
    return redact(text, gateway.api_key if gateway is not None else None)


def text_html(text: str, *, markdown: bool = False) -> str:
    """Text shown as HTML: a model's reply rendered as sanitised Markdown (see
    `gatecell.notebook.markdown`), anything else as plain text with its line breaks."""
    # ipywidgets gives an HTML widget the line height of a form control: read like text instead
    if markdown:
        from gatecell.notebook.markdown import to_html

        return f'<div class="gatecell-text" style="line-height:1.45">{to_html(text)}</div>'
    style = "white-space:pre-wrap;line-height:1.45"
    return f'<div class="gatecell-text" style="{style}">{html.escape(text)}</div>'


def follower(child: widgets.Widget, max_height: str = "420px") -> widgets.Box:
    """A scroll box around ``child`` that follows it as it grows, unless the user has
    scrolled up to read: its flex direction is reversed, so the browser pins the view to
    the bottom edge, and keeps what the user reads in view once they leave it (scroll
    anchoring). No script is involved, so it works wherever the widget is shown."""
    child.layout.flex = "0 0 auto"
    layout = widgets.Layout(flex_flow="column-reverse", max_height=max_height, overflow="auto")
    return widgets.Box([child], layout=layout).add_class("gatecell-follow")


def latency_text(result: Any) -> str:
    """`0.42 s` from a result's provenance, when the client measured it."""
    latency = getattr(getattr(result, "meta", None), "latency", None)
    return f"{latency:.2f} s" if latency is not None else "done"


def start_thread(target: Callable[[], None], name: str) -> threading.Thread:
    """Run ``target`` in a daemon thread, in a copy of the caller's context (a thread starts
    with an empty one): the calls it makes are logged with the notebook's path, and with
    whatever the caller set (`gatecell.journal`)."""
    from gatecell.notebook.log import calls_in

    context = contextvars.copy_context()

    def run() -> None:
        with calls_in(None):
            target()

    thread = threading.Thread(target=context.run, args=(run,), name=f"gatecell-{name}", daemon=True)
    thread.start()
    return thread


PICTURE_WIDTH = "320px"
"""The widest a panel shows a picture it made (the notebook's outputs allow more)."""


def media_widget(media: Any) -> widgets.Widget:
    """An Image, Audio or Video widget for fetched media, of the type `media_type` settles
    (never a gateway's header as it came), a picture at most `PICTURE_WIDTH` wide; a link
    when only a web URL came back."""
    from gatecell.notebook.display import media_type
    from gatecell.notebook.markdown import link_allowed

    data = getattr(media, "data", None) or b""
    mime = media_type(data, getattr(media, "mime", None))
    major, _, sub = mime.partition("/")
    if data and major in ("image", "audio", "video"):
        cls = {"image": widgets.Image, "audio": widgets.Audio, "video": widgets.Video}[major]
        kwargs = {} if major == "image" else {"autoplay": False, "loop": False}
        view = cls(value=data, format=sub, **kwargs).add_class(f"gatecell-result-{major}")
        if major == "image":
            view.layout.max_width = PICTURE_WIDTH
        return view
    if data:
        return widgets.HTML(f"<i>{len(data):,} bytes of a type gatecell does not show</i>")
    url = getattr(media, "url", None)
    if url and link_allowed(url):
        link = html.escape(url)
        return widgets.HTML(f'<a href="{link}" target="_blank" rel="noopener noreferrer">{link}</a>')
    return widgets.HTML("<i>a result with no data</i>")


def prompt_box(placeholder: str) -> widgets.Textarea:
    """The full-width text box every panel reads its prompt from."""
    box = widgets.Textarea(placeholder=placeholder, layout=widgets.Layout(width="100%"))
    return box.add_class("gatecell-prompt")


def keyed(
    box: widgets.Textarea, action: Callable[[], object], send: str, attachments: Any = None
) -> widgets.Widget:
    """The invisible widget that runs ``action`` when ``box`` (a prompt box of the panel it is
    placed in) gets Ctrl+Enter or Shift+Enter, or the panel's button of CSS class ``send`` is
    clicked, the box first taking the text the browser had (`_keys`: a click alone could come
    before the box's newest text); and hands the files picked with the panel's Attach button
    to ``attachments`` (`_attach`)."""
    from ._keys import Listener

    def sent(text: str) -> None:
        box.value = text
        action()

    if attachments is None:
        return Listener(sent, action=send)
    return Listener(
        sent,
        attachments.receive,
        attachments.too_big,
        action=send,
        accept=attachments.accept,
        limit=attachments.limit,
    )


def button(
    description: str,
    css: str,
    action: Callable[[], object],
    *,
    primary: bool = False,
    disabled: bool = False,
) -> widgets.Button:
    """A button with a stable CSS class (for people's styles and the browser tests)."""
    found = widgets.Button(
        description=description, button_style="primary" if primary else "", disabled=disabled
    ).add_class(css)
    found.on_click(lambda _: action())
    return found


def _dropdown(options: Sequence[str], value: str | None, description: str) -> widgets.Dropdown:
    options = list(options)
    if value and value not in options:
        options.insert(0, value)
    return widgets.Dropdown(
        options=options,
        value=value if value else (options[0] if options else None),
        description=description,
    )


class Panel(widgets.VBox):
    """A VBox with a gateway, a model list and a status line that shows one line at a time."""

    kind = "chat"  # which models it offers (a key of ENDPOINTS)
    name = "chat"  # its CSS class is gatecell-<name>

    def __init__(
        self,
        gateway: Gateway | AsyncGateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        model: str | None = None,
    ) -> None:
        super().__init__()
        self.add_class("gatecell-panel").add_class(f"gatecell-{self.name}")
        self.gateway = resolve_gateway(gateway)
        self.status = widgets.HTML("").add_class("gatecell-status")
        self.error: str | None = None
        """The error line the status shows, if it shows one."""
        problem = None
        if models is None:
            models, problem = list_models(self.gateway)
        self.models = list(models)
        """The gateway's model entries, as listed when the panel was made."""
        self.model = _dropdown(model_ids(models, self.kind), model, "Model").add_class("gatecell-model")
        if problem:
            self.show_error(problem)
        self._thread: threading.Thread | None = None

    def offer(self, field: widgets.Combobox, keys: Sequence[str], common: Sequence[str]) -> None:
        """Offer in ``field`` the values the gateway lists for the chosen model under one of
        ``keys`` (see `listed_values`), else ``common`` ones; any text goes either way."""

        def update(_: Any = None) -> None:
            field.options = tuple(listed_values(self.models, self.model.value, keys) or common)

        self.model.observe(update, "value")
        update()

    def in_background(self, work: Callable[[], None], button: widgets.Button, busy: str) -> None:
        """Run `work` in a thread with `button` disabled meanwhile; an error becomes the status."""
        button.disabled = True
        self.show_info(busy)

        def target() -> None:
            try:
                work()
            except Exception as err:  # shown in the panel; a thread has nobody to raise to
                self.fail(err)
            finally:
                button.disabled = False

        self._thread = start_thread(target, self.kind)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the panel's background work has ended (for scripts and tests)."""
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def show_error(self, text: str) -> None:
        self.error = text
        self.status.remove_class("gatecell-info")
        self.status.add_class("gatecell-error")
        self.status.value = f'<span style="color:{ALERT}">{html.escape(text)}</span>'

    def show_info(self, text: str) -> None:
        self.error = None
        self.status.remove_class("gatecell-error")
        self.status.add_class("gatecell-info")
        self.status.value = f'<span style="color:{MUTED}">{html.escape(text)}</span>'

    def fail(self, err: BaseException) -> None:
        self.show_error(panel_error(err, self.gateway))
