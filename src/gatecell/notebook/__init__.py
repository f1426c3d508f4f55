"""The notebook layer: ``%load_ext gatecell`` registers the magics.

Loading is cheap on purpose: nothing here imports the client, ipywidgets or the local
gateway; the first magic that needs them does. Loading also installs these in the shell:
a handler that prints gatecell's errors (from a magic or from any code) as one line
instead of a traceback, and keeps them as the session's last error as IPython does for the
others; a hook that settles the values magics return (see `values`); two input
transformers (`_keep_questions`, `_empty_cells`); and, in a kernel, display hooks that
remember the last picture shown, for ``--last-plot`` (see `plots`). Unloading removes them
all.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from gatecell._lazy import exports

__all__ = [
    "load_ipython_extension",
    "unload_ipython_extension",
    "error_line",
    "session_for",
    "LiveMarkdown",
    "code_blocks",
    "ChatPanel",
    "ComparePanel",
    "ImagePanel",
    "MediaPanel",
    "SpeechPanel",
    "dashboard",
]

# What notebooks use, loaded when first asked for (the panels load ipywidgets).
_LAZY = {
    "LiveMarkdown": "gatecell.notebook.display",
    "code_blocks": "gatecell.notebook.markdown",
    **{
        name: "gatecell.notebook.widgets"
        for name in ("ChatPanel", "ComparePanel", "ImagePanel", "MediaPanel", "SpeechPanel", "dashboard")
    },
}


__getattr__ = exports(__name__, _LAZY)


_STATE: dict[int, dict[str, Any]] = {}
_OWN_SESSIONS: dict[int, Any] = {}


def session_for(shell: Any = None) -> Any:
    """The notebook's `NotebookSession` for ``shell`` (default: the running one).

    When ``%load_ext gatecell`` ran there, it is the magics' session, so ``%gatecell key``
    and ``%config Gatecell.*`` apply to panels too; otherwise (Voila, a plain kernel) one
    session of its own per shell, made the same way.
    """
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    state = _STATE.get(id(shell))
    if state is not None:
        return state["magics"].session
    own = _OWN_SESSIONS.get(id(shell))
    if own is None:
        from .config import Gatecell
        from .session import NotebookSession

        own = NotebookSession(Gatecell(parent=shell) if shell is not None else Gatecell())
        _OWN_SESSIONS[id(shell)] = own
    return own


def error_line(exc: BaseException) -> str:
    """The one line shown for a gatecell error: redacted (any key, credential), and with
    control characters escaped (a terminal, or a frontend rendering ANSI escapes, shows it)."""
    from gatecell.wire.util._terminal import printable
    from gatecell.wire.util.secret import redact

    return printable(redact(f"gatecell: {exc}"))


def _show_error(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: int | None = None) -> None:
    magics = _STATE.get(id(shell), {}).get("magics")
    debug = getattr(value, "gatecell_debug", False) or (magics is not None and magics.session.config.debug)
    if debug:
        shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
        return
    # the last error, as showtraceback records it for every other one (%gatecell explain, %debug)
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    sys.stderr.write(error_line(value) + "\n")
    sys.stderr.flush()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gatecell``: register the magics and the one-line error handler."""
    if id(ipython) in _STATE:
        return
    from gatecell.wire.transport.errors import GatecellError

    from .config import Gatecell
    from .magics import GatecellMagics, Interrupted
    from .plots import LastPlot
    from .session import NotebookSession

    config = Gatecell(parent=ipython)
    ipython.configurables.append(config)
    session = NotebookSession(config)
    own = _OWN_SESSIONS.pop(id(ipython), None)
    if own is not None:  # a panel made before loading shares its conversations with the magics
        session.memory = own.memory
    magics = GatecellMagics(ipython, session)
    magics.plots = LastPlot(ipython).install()
    ipython.register_magics(magics)
    previous = (ipython.custom_exceptions, getattr(ipython, "CustomTB", None))
    ipython.set_custom_exc((GatecellError, Interrupted), _show_error)
    ipython.events.register("post_run_cell", _settle)
    ipython.input_transformers_cleanup.extend(_TRANSFORMERS)
    _STATE[id(ipython)] = {"magics": magics, "config": config, "previous": previous}


_MAGICS = "chat|reason|image|speak|imagine|video|music"  # gatecell's cell magics (line magics too)
_QUESTION = re.compile(rf"^%({_MAGICS})[ \t]+(\S.*\?)[ \t]*$")
_CELL_MAGIC = re.compile(rf"^%%({_MAGICS})(?:[ \t](.*))?$")


def _keep_questions(lines: list[str]) -> list[str]:
    """``%chat what is my name?`` is a prompt, not IPython's ``name?`` help request.

    IPython reads a line ending in ``word?`` as "show help on word"; for a line-form
    magic this turns it into the magic call before IPython sees it.
    """
    if not lines or lines[0].startswith("%%"):
        return lines
    out = []
    for line in lines:
        match = _QUESTION.match(line)
        out.append(
            f"get_ipython().run_line_magic({match.group(1)!r}, {match.group(2).strip()!r})\n"
            if match
            else line
        )
    return out


def _empty_cells(lines: list[str]) -> list[str]:
    """``%%chat --help`` alone in a cell shows the help, as it does with a prompt below.

    IPython refuses a cell magic with an empty body before the magic runs; for gatecell's
    magics this hands such a cell to the magic itself, which shows the help for ``--help``
    and otherwise says in one line that there is nothing to send.
    """
    if not lines or any(line.strip() for line in lines[1:]):
        return lines
    match = _CELL_MAGIC.match(lines[0].rstrip("\r\n"))
    if not match:
        return lines
    name, line = match.group(1), (match.group(2) or "").strip()
    return [f"get_ipython().find_cell_magic({name!r})({line!r}, '')\n"]


_TRANSFORMERS = (_keep_questions, _empty_cells)


def _settle(*_args: Any) -> None:
    from .values import settle

    settle()


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext gatecell``: remove the magics, restore the error handler, close the client."""
    state = _STATE.pop(id(ipython), None)
    if state is None:
        return
    magics = state["magics"]
    for kind, names in magics.magics.items():
        for name in names:
            ipython.magics_manager.magics[kind].pop(name, None)
    if state["config"] in ipython.configurables:
        ipython.configurables.remove(state["config"])
    exceptions, handler = state["previous"]
    ipython.custom_exceptions = exceptions
    if handler is not None:
        ipython.CustomTB = handler
    ipython.events.unregister("post_run_cell", _settle)
    if magics.plots is not None:
        magics.plots.uninstall()
    for transformer in _TRANSFORMERS:
        if transformer in ipython.input_transformers_cleanup:
            ipython.input_transformers_cleanup.remove(transformer)
    magics.session.disconnect()
