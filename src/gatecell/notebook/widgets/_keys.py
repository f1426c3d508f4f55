"""What a panel hears from the browser beyond ipywidgets: keys, and the files a user picks.

ipywidgets' Textarea tells the kernel nothing of its keys, and a FileUpload sends a file's
bytes in one message, which a Jupyter server drops without a word when it is over its
websocket message limit (and the upload button then sends nothing more: ipywidgets waits
for an answer to the dropped message). A small anywidget listens in the browser instead:
placed inside a panel, it hears

* a keydown that one of that panel's prompt boxes (``.gatecell-prompt textarea``) gets: on
  Ctrl+Enter, Shift+Enter or Cmd+Enter it sends the kernel the box's text (``send``);
* a click on that panel's send button (the class ``action`` names): it sends the kernel the
  text of the panel's prompt box (``send``) in place of the button's own click. ipywidgets
  holds a box's newest text back in the page until the kernel has answered its last change,
  while a click goes at once: a busy or loaded kernel would get the click first, and ask
  with the text the box had before;
* a click on that panel's Attach button (``.gatecell-attach``): it opens the file chooser
  itself and sends the files picked in a message of its own (``files``), or, when they are
  over the limit, only their names and sizes (``picked``), so that the kernel says in one
  line that they cannot come, and the button goes on working.

The module is the whole front end: no markup, nothing from outside, and its listeners go
with the widget.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

__all__ = ["Listener"]

_ESM = """
function render({ model, el }) {
  el.style.display = "none";
  const mine = (node) => {
    const panel = el.closest(".gatecell-panel");
    return panel !== null && node.closest(".gatecell-panel") === panel;
  };
  const onKey = (event) => {
    if (event.key !== "Enter" || !(event.ctrlKey || event.shiftKey || event.metaKey)) return;
    const box = event.target;
    if (!(box instanceof HTMLTextAreaElement) || !box.closest(".gatecell-prompt") || !mine(box)) return;
    event.preventDefault();
    event.stopPropagation();
    model.send({ event: "send", text: box.value });
  };
  const onSend = (event) => {
    const action = model.get("action");
    const button = action && event.target instanceof Element ? event.target.closest("." + action) : null;
    if (!button || button.disabled || !mine(button)) return false;
    const box = el.closest(".gatecell-panel").querySelector(".gatecell-prompt textarea");
    if (!box) return false;
    event.preventDefault();
    event.stopPropagation();
    model.send({ event: "send", text: box.value });
    return true;
  };
  const onClick = (event) => {
    if (onSend(event)) return;
    const button = event.target instanceof Element ? event.target.closest(".gatecell-attach") : null;
    if (!button || button.disabled || !mine(button)) return;
    event.preventDefault();
    event.stopPropagation();
    const input = document.createElement("input");
    input.type = "file";
    input.multiple = true;
    input.accept = model.get("accept");
    input.addEventListener("change", async () => {
      const files = Array.from(input.files || []);
      const named = files.map((f) => ({ name: f.name, size: f.size }));
      if (files.reduce((n, f) => n + f.size, 0) > model.get("limit")) {
        model.send({ event: "picked", files: named });  // too big to come: only what it is
        return;
      }
      const buffers = await Promise.all(files.map((f) => f.arrayBuffer()));
      model.send({ event: "files", files: named }, undefined, buffers);
    });
    input.click();
  };
  document.addEventListener("keydown", onKey, true);
  document.addEventListener("click", onClick, true);
  return () => {
    document.removeEventListener("keydown", onKey, true);
    document.removeEventListener("click", onClick, true);
  };
}
export default { render };
"""


class Listener(anywidget.AnyWidget):
    """An invisible widget that calls ``on_send(text)`` when a prompt box of the panel it is
    placed in gets Ctrl+Enter, Shift+Enter or Cmd+Enter, or the panel's ``action`` button is
    clicked; and, when files are picked with the panel's Attach button, ``on_files(files)``
    with their ``(name, bytes)``, or ``on_too_big(files)`` with their ``(name, size)`` when
    together they are over ``limit`` bytes (then the bytes do not come).

    **Parameters:**

    * **on_send** - called in the kernel with the box's text as the browser had it.
    * **on_files** - called in the kernel with the files picked.
    * **on_too_big** - called in the kernel with the names and sizes of files too big to send.
    * **action** - the CSS class of the panel's send button, whose clicks come as ``on_send``
      with the prompt box's text ("" for none).
    * **accept** - the file types the browser's chooser offers.
    * **limit** - the most bytes the files picked at once may have.
    """

    _esm = _ESM
    action = traitlets.Unicode("").tag(sync=True)
    accept = traitlets.Unicode("").tag(sync=True)
    limit = traitlets.Int(0).tag(sync=True)

    def __init__(
        self,
        on_send: Callable[[str], Any],
        on_files: Callable[[list[tuple[str, bytes]]], Any] | None = None,
        on_too_big: Callable[[list[tuple[str, int]]], Any] | None = None,
        *,
        action: str = "",
        accept: str = "",
        limit: int = 0,
    ) -> None:
        super().__init__(action=action, accept=accept, limit=limit)
        self.add_class("gatecell-listener")

        def heard(_: Any, content: Any, buffers: Any) -> None:
            if not isinstance(content, dict):
                return
            event = content.get("event")
            named = content.get("files")
            named = [f for f in named if isinstance(f, dict)] if isinstance(named, list) else []
            if event == "send":
                text = content.get("text")
                on_send(text if isinstance(text, str) else "")
            elif event == "files" and on_files is not None:
                on_files([(f.get("name"), bytes(b)) for f, b in zip(named, buffers or [], strict=False)])
            elif event == "picked" and on_too_big is not None:
                on_too_big([(str(f.get("name")), f["size"]) for f in named if isinstance(f.get("size"), int)])

        self.on_msg(heard)
