"""The chat panel: a multi-turn conversation that streams into the notebook without blocking it.

The conversation is a `Conversation` of the notebook's memory when the panel is given a
name (``ChatPanel(conversation="default")``): then the panel and the ``%%chat`` cells read
and write the same turns, and the transcript shows what the magics added, after each cell.
Otherwise the panel keeps a conversation of its own. The System box is the conversation's
system prompt.

A turn joins the conversation when its reply is in, as with the magics: a turn that produced
no text (stopped at once, or failed) is taken back whole, its prompt returned to the input
box; a turn with text keeps it, marked when partial.

The Attach button takes pictures and documents from the browser for the next message (see
`_attach`): they go as content parts, wait as thumbnails with a Remove button until then, and
show as thumbnails in the transcript, as do the pictures a ``%%chat --image`` cell put in a
shared conversation. A turn taken back returns its files too.

Replies render as Markdown (headings, lists, tables, highlighted code) through the same
sanitising renderer as the magics, live as they stream; what the user typed stays plain
text. The transcript follows a streaming reply unless the user has scrolled up.
"""

from __future__ import annotations

import html
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from gatecell.notebook.markdown import NOT_MATH
from gatecell.notebook.memory import Conversation, Turn
from gatecell.wire.apis.spec import RANGES
from gatecell.wire.transport.errors import echo
from gatecell.wire.util._text import joined

from ._attach import Attachments, content_html
from ._base import Panel, button, follower, keyed, prompt_box, text_html
from ._live import LiveReply

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = ["ChatPanel", "sampling_controls", "sampling"]

_ROLES = ("system", "user", "assistant")


def sampling_controls(max_tokens: int | None = None) -> tuple[widgets.Widget, ...]:
    """Temperature and top_p sliders over SPEC 8's ranges, and max tokens (empty: no limit)."""
    wide = {"description_width": "initial"}
    lo, hi = RANGES["temperature"]
    temperature = widgets.FloatSlider(
        value=1.0, min=lo, max=hi, step=0.05, description="Temperature", style=wide
    ).add_class("gatecell-temperature")
    lo, hi = RANGES["top_p"]
    top_p = widgets.FloatSlider(
        value=1.0, min=lo, max=hi, step=0.05, description="top_p", style=wide
    ).add_class("gatecell-top-p")
    tokens = widgets.Text(
        value=str(max_tokens) if max_tokens else "",
        placeholder="no limit",
        description="Max tokens",
        tooltip="the most tokens a reply may have; empty: no limit of gatecell's",
        style=wide,
    ).add_class("gatecell-max-tokens")
    return temperature, top_p, tokens


def sampling(temperature: float, top_p: float, max_tokens: str) -> dict[str, Any]:
    """Request fields for the controls; SPEC defaults are left out, so models that refuse
    sampling settings (reasoning models often do) still get a request they accept. A max
    tokens that is not a whole number of at least 1 (or empty) is a one-line ValueError."""
    fields: dict[str, Any] = {}
    if temperature != 1.0:
        fields["temperature"] = temperature
    if top_p != 1.0:
        fields["top_p"] = top_p
    text = str(max_tokens).strip()
    if text and text != "0":
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or number < 1:
            rule = "be a whole number" if number is None else "be at least 1"
            raise ValueError(f"max tokens must {rule} (empty: no limit), not {echo(text)}")
        fields["max_tokens"] = number
    return fields


class ChatPanel(Panel):
    """Chat with any chat or reasoning model the gateway lists.

    ``panel.messages`` is the conversation as the gateway would receive it (system prompt
    first when set; a turn with pictures has a list of text and `Attachment` items as its
    content) and can be assigned. ``ask(text)``, ``stop()``, ``clear()`` do from Python what
    the buttons do; ``wait()`` blocks until the current reply has ended. ``attachments``
    holds the files attached for the next message (``attachments.upload`` is the button).
    ``conversation`` names a conversation of the notebook's memory to share with ``%%chat``
    (``"default"`` is the one ``%%chat`` uses without ``-c``).
    """

    def __init__(
        self,
        gateway: Gateway | AsyncGateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        model: str | None = None,
        system: str = "",
        max_tokens: int | None = None,
        interval: float = 0.1,
        conversation: str | None = None,
    ) -> None:
        super().__init__(gateway, models=models, model=model)
        self.interval = interval
        self.shared = conversation
        """The name of the notebook conversation the panel shares, or None."""
        self._own = Conversation("panel")
        self.temperature, self.top_p, self.max_tokens = sampling_controls(max_tokens)
        self.system = widgets.Textarea(
            value=system or self._system_turn(), description="System", placeholder="optional system prompt"
        ).add_class("gatecell-system")
        self.system.observe(lambda change: self._set_system(change["new"]), "value")
        self._set_system(self.system.value)
        self.transcript = widgets.VBox().add_class("gatecell-transcript")
        self.prompt = prompt_box("Ask something, then press Send (or Ctrl+Enter)")
        self.send_button = button("Send", "gatecell-send", self.ask, primary=True)
        self.stop_button = button("Stop", "gatecell-stop", self.stop, disabled=True)
        self.clear_button = button("Clear", "gatecell-clear", self.clear)
        self.attachments = Attachments(self, self._set_busy)
        self.children = (
            widgets.HBox([self.model, self.max_tokens]),
            widgets.HBox([self.temperature, self.top_p]),
            self.system,
            follower(self.transcript),
            self.prompt,
            self.attachments.row,
            widgets.HBox([self.send_button, self.stop_button, self.clear_button, self.attachments.upload]),
            self.status,
            keyed(self.prompt, self.ask, "gatecell-send", self.attachments),
        )
        self._bubbles: dict[int, tuple[Turn, widgets.HTMLMath]] = {}  # id(turn) -> its bubble
        self.reply: LiveReply | None = None
        """The current or last reply (text, error, latency, ttft, usage)."""
        self.refresh()
        if conversation is not None:
            _refresh_after_cells(self)

    # -- the conversation ------------------------------------------------------------

    @property
    def conversation(self) -> Conversation:
        """The conversation the panel reads and writes (looked up by name each time, so that
        ``%%chat --new`` or ``%gatecell reset`` apply to the panel too)."""
        if self.shared is None:
            return self._own
        from gatecell.notebook import session_for

        return session_for().memory.get(self.shared)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [{"role": t.role, "content": t.content} for t in self.conversation.turns]

    @messages.setter
    def messages(self, value: Sequence[dict[str, Any]]) -> None:
        for m in value:
            content = m.get("content")
            if m.get("role") not in _ROLES or not (
                isinstance(content, str) or (m["role"] == "user" and isinstance(content, list))
            ):
                raise ValueError(
                    f"a message needs a role in {_ROLES} and string content (a user's may be a "
                    f"list of text and pictures): {m!r}"
                )
        self.stop()
        system = "\n".join(m["content"] for m in value if m["role"] == "system")
        self.conversation.turns = [Turn(m["role"], m["content"]) for m in value if m["role"] != "system"]
        self.system.value = system
        self._set_system(system)
        self.refresh()

    @property
    def busy(self) -> bool:
        return self.reply is not None and not self.reply.done

    def refresh(self) -> None:
        """Show the conversation as it is now: turns the magics added appear, turns they
        forgot go. Bubbles already shown are kept as they are (no second render)."""
        if self.busy:
            return  # the reply's end refreshes
        turns = [t for t in self.conversation.turns if t.role != "system"]
        bubbles = {}
        for turn in turns:
            known = self._bubbles.get(id(turn))
            bubbles[id(turn)] = (
                known if known is not None and known[0] is turn else (turn, _turn_bubble(turn))
            )
        self._bubbles = bubbles
        children = tuple(bubbles[id(t)][1] for t in turns)
        if children != self.transcript.children:
            self.transcript.children = children
        system = self._system_turn()
        if system != self.system.value.strip():
            self.system.value = system

    # -- actions -------------------------------------------------------------------

    def ask(self, text: str | None = None) -> LiveReply | None:
        """Send `text` (default: the prompt box), with the files attached, and stream the
        reply into the transcript."""
        text = self.prompt.value if text is None else text
        if self.busy:
            self.show_error("a reply is still streaming: press Stop first")
            return None
        if self.attachments.reading:
            self.show_error("the attached files are still being read: send once they show")
            return None
        if not text.strip() and not self.attachments.items:
            self.show_error("the prompt is empty")
            return None
        if not self.model.value:
            self.show_error("no model to ask: the gateway listed no chat model")
            return None
        try:
            fields = sampling(self.temperature.value, self.top_p.value, self.max_tokens.value)
        except ValueError as err:
            self.show_error(str(err))
            return None
        self.refresh()
        conversation = self.conversation
        attached = self.attachments.take()
        prompt = joined([text, *attached])
        request = {"model": self.model.value, "messages": conversation.messages(prompt), **fields}
        self.prompt.value = ""
        question, answer = _bubble("user", prompt), _bubble("assistant", "", self.model.value)
        self.transcript.children = (*self.transcript.children, question, answer)
        self.show_info(f"{self.model.value} is answering…")
        self._set_busy(True)
        self.reply = LiveReply(
            self.gateway,
            request,
            lambda t: setattr(answer, "value", _bubble_html("assistant", t, request["model"])),
            lambda reply: self._done(reply, conversation, prompt, (text, attached), question, answer),
            interval=self.interval,
        )
        return self.reply.start()

    def stop(self) -> None:
        """Stop the reply at once; what arrived stays in the conversation."""
        if self.reply is not None:
            self.reply.stop()

    def clear(self) -> None:
        """Forget the conversation's turns (the system prompt stays)."""
        self.stop()
        conversation = self.conversation
        conversation.turns = [t for t in conversation.turns if t.role == "system"]
        self.refresh()
        self.show_info("")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the current reply has ended (for scripts and tests)."""
        return self.reply.join(timeout) if self.reply is not None else True

    # -- internals -----------------------------------------------------------------

    def _system_turn(self) -> str:
        turns = self.conversation.turns
        return turns[0].content if turns and turns[0].role == "system" else ""

    def _set_system(self, text: str) -> None:
        """The System box is the conversation's system prompt; emptied, there is none."""
        conversation, text = self.conversation, text.strip()
        if text:
            if text != self._system_turn():
                conversation.set_system(text)
        elif self._system_turn():
            conversation.turns = conversation.turns[1:]

    def _set_busy(self, busy: bool | None = None) -> None:
        """Send is off while a reply streams or attached files are read; Stop is on while a reply streams."""
        busy = self.busy if busy is None else busy
        self.send_button.disabled = busy or self.attachments.reading
        self.stop_button.disabled = not busy

    def _done(
        self,
        reply: LiveReply,
        conversation: Conversation,
        prompt: Any,
        typed: tuple[str, list[Any]],
        question: Any,
        answer: Any,
    ) -> None:
        """Keep the turn when its reply has text; else take it back: its text to the prompt
        box, its files to those attached."""
        model = reply.request["model"]
        if reply.text:
            partial = reply.stopped or bool(reply.error)
            prov = {"model": model}
            asked, answered = conversation.add(prompt, reply.text, partial=partial, prov=prov)
            note = "stopped" if reply.stopped else "error" if reply.error else reply.cut or ""
            answer.value = _bubble_html("assistant", reply.text, model, note, reply.reasoning)
            self._bubbles[id(asked)], self._bubbles[id(answered)] = (asked, question), (answered, answer)
        else:  # take the turn back whole, its files too
            self.transcript.children = tuple(
                w for w in self.transcript.children if w is not question and w is not answer
            )
            text, attached = typed
            if not self.prompt.value:
                self.prompt.value = text
            self.attachments.put_back(attached)
        self._set_busy(False)
        if reply.error:
            self.show_error(reply.error)
        elif reply.stopped:
            self.show_info(f"{model}: stopped")
        else:
            self.show_info(f"{model} · {reply.summary()}" + (f" · {reply.cut}" if reply.cut else ""))


def _refresh_after_cells(panel: ChatPanel) -> None:
    """Refresh a panel sharing a conversation after every cell the notebook runs (the cell may
    have been a ``%%chat``); the hook holds the panel weakly and goes with it."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return
    ref = weakref.ref(panel)

    def refresh(*_: Any) -> None:
        found = ref()
        if found is None:
            shell.events.unregister("post_run_cell", refresh)
        else:
            found.refresh()

    shell.events.register("post_run_cell", refresh)


def _turn_bubble(turn: Turn) -> widgets.HTMLMath:
    content = turn.content if turn.role == "user" else turn.text
    return _bubble(turn.role, content, turn.prov.get("model"), "partial" if turn.partial else "")


def _bubble(role: str, content: Any, model: str | None = None, note: str = "") -> widgets.HTMLMath:
    # HTMLMath: a front end that typesets widget HTML (JupyterLab, Voila) typesets the reply's
    # formulas, and only those (NOT_MATH); elsewhere they show as their TeX source
    bubble = widgets.HTMLMath(_bubble_html(role, content, model, note)).add_class("gatecell-message")
    return bubble.add_class(f"gatecell-{role}")


def _bubble_html(
    role: str, content: Any, model: str | None = None, note: str = "", reasoning: str | None = None
) -> str:
    """A message: the user's as typed, with thumbnails of its pictures; a reply as Markdown,
    its reasoning summary (if the model sent one) folded away above it, as the magics show it."""
    who = {"user": "You", "system": "System"}.get(role, model or "Assistant")
    mark = f' <i class="gatecell-note">({html.escape(note)})</i>' if note else ""
    # translucent, so that the bubbles read on a light and a dark background alike
    colour = "rgba(66,133,244,.12)" if role == "user" else "rgba(127,127,127,.1)"
    body = text_html(content, markdown=True) if role == "assistant" else content_html(content)
    if reasoning:
        body = (
            '<details class="gatecell-reasoning"><summary>Reasoning summary</summary>'
            f"{text_html(reasoning, markdown=True)}</details>{body}"
        )
    return (
        f'<div class="{NOT_MATH}" style="background:{colour};padding:4px 8px;margin:2px 0;border-radius:6px">'
        f"<b>{html.escape(who)}</b>{mark}{body}</div>"
    )
