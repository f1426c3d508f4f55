"""The last picture the notebook showed, for ``--last-plot``.

Where a kernel keeps what it has shown (nothing else is read):

- ipykernel's display publisher, and from ipykernel 7 its display hook, run public
  transform hooks (``register_hook``) on every message they send: `LastPlot` installs one
  that remembers the last ``image/png`` of a ``display_data``, ``update_display_data`` or
  ``execute_result`` (a matplotlib figure shown inline, ``display(Image(...))``, a figure
  as a cell's value), and hands the message on unchanged. Only a reference to the last
  one is kept.
- IPython 9 records each cell's outputs in ``history_manager.outputs``: in a plain IPython
  shell every display and result, in ipykernel the results only (its publisher stores
  displays only with ``store_display_history``, off because it would keep every output of
  the session). `LastPlot.last` reads them when no hook saw a later picture.

IPython 8 outside a kernel keeps neither, and then there is no last plot to send.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

__all__ = ["LastPlot"]

_SHOWN = ("display_data", "update_display_data", "execute_result")


class LastPlot:
    """Remembers the last PNG ``shell`` showed (see the module docstring).

    **Parameters:**

    * **shell** - the IPython shell (an ipykernel shell gets the hooks).
    """

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._png: Any = None  # base64 text or bytes, as the display held it
        self._count: int | None = None  # the cell that showed it
        self._targets: list[Any] = []

    def install(self) -> LastPlot:
        for target in (getattr(self.shell, "display_pub", None), getattr(self.shell, "displayhook", None)):
            register = getattr(target, "register_hook", None)
            if callable(register):
                register(self._hook)
                self._targets.append(target)
        return self

    def uninstall(self) -> None:
        for target in self._targets:
            target.unregister_hook(self._hook)
        self._targets.clear()

    def _hook(self, msg: Any) -> Any:
        try:
            if msg.get("msg_type", msg.get("header", {}).get("msg_type")) in _SHOWN:
                png = msg["content"]["data"].get("image/png")
                if png:
                    self._png, self._count = png, getattr(self.shell, "execution_count", None)
        except (AttributeError, KeyError, TypeError):
            pass  # not a display message: nothing to remember
        return msg

    def last(self) -> bytes | None:
        """The PNG bytes of the last picture shown before now, or None."""
        png, count = self._png, self._count
        history = getattr(getattr(self.shell, "history_manager", None), "outputs", None) or {}
        for number in sorted(history, reverse=True):
            if count is not None and number <= count:
                break
            found = next(
                (o.bundle.get("image/png") for o in reversed(history[number]) if o.bundle.get("image/png")),
                None,
            )
            if found is not None:
                png = found
                break
        if png is None:
            return None
        if isinstance(png, (bytes, bytearray)):
            return bytes(png)
        try:
            return base64.b64decode(png)
        except (binascii.Error, ValueError, TypeError):
            return None
