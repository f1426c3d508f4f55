"""Ctrl+Enter (or Shift+Enter, or Cmd+Enter) in a panel's prompt box sends, as chat boxes do.

ipywidgets' Textarea tells the kernel nothing of its keys, so a small anywidget listens in
the browser: placed inside a panel, it hears a keydown that one of that panel's prompt boxes
(``.gatecell-prompt textarea``) gets, and on one of those keys sends the kernel the box's
text. The module is the whole front end: no markup, nothing from outside, and its listener
goes with the widget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget

__all__ = ["SendKeys"]

_ESM = """
function render({ model, el }) {
  el.style.display = "none";
  const onKey = (event) => {
    if (event.key !== "Enter" || !(event.ctrlKey || event.shiftKey || event.metaKey)) return;
    const box = event.target;
    if (!(box instanceof HTMLTextAreaElement) || !box.closest(".gatecell-prompt")) return;
    const panel = el.closest(".gatecell-panel");
    if (!panel || box.closest(".gatecell-panel") !== panel) return;
    event.preventDefault();
    event.stopPropagation();
    model.send({ event: "send", text: box.value });
  };
  document.addEventListener("keydown", onKey, true);
  return () => document.removeEventListener("keydown", onKey, true);
}
export default { render };
"""


class SendKeys(anywidget.AnyWidget):
    """An invisible widget that calls ``on_send(text)`` when a prompt box of the panel it is
    placed in gets Ctrl+Enter, Shift+Enter or Cmd+Enter.

    **Parameters:**

    * **on_send** - called in the kernel with the box's text as the browser had it.
    """

    _esm = _ESM

    def __init__(self, on_send: Callable[[str], Any]) -> None:
        super().__init__()
        self.add_class("gatecell-send-keys")

        def heard(_: Any, content: Any, buffers: Any) -> None:
            if isinstance(content, dict) and content.get("event") == "send":
                text = content.get("text")
                on_send(text if isinstance(text, str) else "")

        self.on_msg(heard)
