"""The chat panel: a multi-turn conversation that streams into the notebook without blocking it.

A turn that produced no text (stopped at once, or failed) is taken back whole: its prompt
returns to the input box and the conversation stays as it was, so the next Send never
sends two user messages in a row. A turn with text keeps it, marked when partial.

Replies render as Markdown (headings, lists, tables, highlighted code) through the same
sanitising renderer as the magics, live as they stream; what the user typed stays plain
text. The transcript follows a streaming reply unless the user has scrolled up.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from gatecell.wire.schemas import RANGES

from ._base import Panel, button, follower, prompt_box, text_html
from ._live import LiveReply

if TYPE_CHECKING:
    from gatecell.wire.client import Gateway

__all__ = ["ChatPanel", "sampling_controls"]

_ROLES = ("system", "user", "assistant")


def sampling_controls(max_tokens: int | None = None) -> tuple[widgets.Widget, ...]:
    """Temperature and top_p sliders over SPEC 8's ranges, and max tokens (0: the default)."""
    wide = {"description_width": "initial"}
    lo, hi = RANGES["temperature"]
    temperature = widgets.FloatSlider(
        value=1.0, min=lo, max=hi, step=0.05, description="Temperature", style=wide
    ).add_class("gatecell-temperature")
    lo, hi = RANGES["top_p"]
    top_p = widgets.FloatSlider(
        value=1.0, min=lo, max=hi, step=0.05, description="top_p", style=wide
    ).add_class("gatecell-top-p")
    tokens = widgets.BoundedIntText(
        value=max_tokens or 0,
        min=0,
        max=1_000_000,
        description="Max tokens",
        tooltip="0 leaves it to the gateway",
        style=wide,
    ).add_class("gatecell-max-tokens")
    return temperature, top_p, tokens


def sampling(temperature: float, top_p: float, max_tokens: int) -> dict[str, Any]:
    """Request fields for the controls; SPEC defaults are left out, so models that refuse
    sampling settings (reasoning models often do) still get a request they accept."""
    fields: dict[str, Any] = {}
    if temperature != 1.0:
        fields["temperature"] = temperature
    if top_p != 1.0:
        fields["top_p"] = top_p
    if max_tokens:
        fields["max_tokens"] = max_tokens
    return fields


class ChatPanel(Panel):
    """Chat with any chat or reasoning model the gateway lists.

    ``panel.messages`` is the conversation as the gateway would receive it (system prompt
    first when set) and can be assigned. ``ask(text)``, ``stop()``, ``clear()`` do from
    Python what the buttons do; ``wait()`` blocks until the current reply has ended.
    """

    def __init__(
        self,
        gateway: Gateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        model: str | None = None,
        system: str = "",
        max_tokens: int | None = None,
        interval: float = 0.1,
    ) -> None:
        super().__init__(gateway, models=models, model=model)
        self.interval = interval
        self.temperature, self.top_p, self.max_tokens = sampling_controls(max_tokens)
        self.system = widgets.Textarea(
            value=system, description="System", placeholder="optional system prompt"
        ).add_class("gatecell-system")
        self.transcript = widgets.VBox().add_class("gatecell-transcript")
        self.prompt = prompt_box("Ask something, then press Send")
        self.send_button = button("Send", "gatecell-send", self.ask, primary=True)
        self.stop_button = button("Stop", "gatecell-stop", self.stop, disabled=True)
        self.clear_button = button("Clear", "gatecell-clear", self.clear)
        self.children = (
            widgets.HBox([self.model, self.max_tokens]),
            widgets.HBox([self.temperature, self.top_p]),
            self.system,
            follower(self.transcript),
            self.prompt,
            widgets.HBox([self.send_button, self.stop_button, self.clear_button]),
            self.status,
        )
        self._history: list[dict[str, str]] = []
        self.reply: LiveReply | None = None
        """The current or last reply (text, error, latency, ttft, usage)."""

    # -- the conversation ------------------------------------------------------------

    @property
    def messages(self) -> list[dict[str, str]]:
        system = self.system.value.strip()
        head = [{"role": "system", "content": system}] if system else []
        return head + [dict(m) for m in self._history]

    @messages.setter
    def messages(self, value: Sequence[dict[str, str]]) -> None:
        for m in value:
            if m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
                raise ValueError(f"a message needs a role in {_ROLES} and string content: {m!r}")
        self.stop()
        self.system.value = "\n".join(m["content"] for m in value if m["role"] == "system")
        self._history = [dict(m) for m in value if m["role"] != "system"]
        self.transcript.children = tuple(_bubble(m["role"], m["content"]) for m in self._history)

    @property
    def busy(self) -> bool:
        return self.reply is not None and not self.reply.done

    # -- actions -------------------------------------------------------------------

    def ask(self, text: str | None = None) -> LiveReply | None:
        """Send `text` (default: the prompt box) and stream the reply into the transcript."""
        text = self.prompt.value if text is None else text
        if self.busy:
            self.show_error("a reply is still streaming: press Stop first")
            return None
        if not text.strip():
            self.show_error("the prompt is empty")
            return None
        if not self.model.value:
            self.show_error("no model to ask: the gateway listed no chat model")
            return None
        request = {
            "model": self.model.value,
            "messages": self.messages + [{"role": "user", "content": text}],
            **sampling(self.temperature.value, self.top_p.value, self.max_tokens.value),
        }
        self.prompt.value = ""
        self._history.append({"role": "user", "content": text})
        question, answer = _bubble("user", text), _bubble("assistant", "", self.model.value)
        self.transcript.children = (*self.transcript.children, question, answer)
        self.show_info(f"{self.model.value} is answering…")
        self._set_busy(True)
        self.reply = LiveReply(
            self.gateway,
            request,
            lambda t: setattr(answer, "value", _bubble_html("assistant", t, request["model"])),
            lambda reply: self._done(reply, text, question, answer),
            interval=self.interval,
        )
        return self.reply.start()

    def stop(self) -> None:
        """Stop the reply at once; what arrived stays in the conversation."""
        if self.reply is not None:
            self.reply.stop()

    def clear(self) -> None:
        """Forget the conversation (the system prompt stays)."""
        self.stop()
        self._history = []
        self.transcript.children = ()
        self.show_info("")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current reply has ended (for scripts and tests)."""
        return self.reply.join(timeout) if self.reply is not None else True

    # -- internals -----------------------------------------------------------------

    def _set_busy(self, busy: bool) -> None:
        self.send_button.disabled = busy
        self.stop_button.disabled = not busy

    def _done(self, reply: LiveReply, text: str, question: Any, answer: Any) -> None:
        model = reply.request["model"]
        if reply.text:
            self._history.append({"role": "assistant", "content": reply.text})
            note = "stopped" if reply.stopped else ("error" if reply.error else "")
            answer.value = _bubble_html("assistant", reply.text, model, note)
        else:  # take the turn back whole
            self._history = self._history[:-1]
            self.transcript.children = tuple(
                w for w in self.transcript.children if w is not question and w is not answer
            )
            if not self.prompt.value:
                self.prompt.value = text
        self._set_busy(False)
        if reply.error:
            self.show_error(reply.error)
        elif reply.stopped:
            self.show_info(f"{model}: stopped")
        else:
            self.show_info(f"{model} · {reply.summary()}")


def _bubble(role: str, text: str, model: str | None = None) -> widgets.HTML:
    bubble = widgets.HTML(_bubble_html(role, text, model)).add_class("gatecell-message")
    return bubble.add_class(f"gatecell-{role}")


def _bubble_html(role: str, text: str, model: str | None = None, note: str = "") -> str:
    who = {"user": "You", "system": "System"}.get(role, model or "Assistant")
    mark = f' <i class="gatecell-note">({html.escape(note)})</i>' if note else ""
    colour = "#eef3ff" if role == "user" else "#f6f6f6"
    return (
        f'<div style="background:{colour};padding:4px 8px;margin:2px 0;border-radius:6px">'
        f"<b>{html.escape(who)}</b>{mark}{text_html(text, markdown=role == 'assistant')}</div>"
    )
