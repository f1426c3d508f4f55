"""Which gateway a client talks to: one policy for `Gateway()`, the magics, the CLI and `gatecell lab`.

Explicit settings win; then ``GATECELL_*`` / ``OPENAI_*`` (see `gatecell.wire.transport.settings`); with
no address anywhere, the local gateway: the one ``gatecell lab`` handed down to its kernels
(`ENV_LOCAL_URL`), else the embedded one, started in this process on a client's first
request. Choosing the local gateway says so once per process (`NOTICE`), so a fresh machine
works offline and the user learns in one line how to point gatecell at a real gateway: on
stderr from the CLI and plain Python; in a Jupyter kernel as a small, muted output of its own,
as Jupyter shows stderr on a red background, which would make a newcomer's first cell look
failed. The notice never shows the key.

This module also says what to do when a gateway refuses a model it does not serve
(`explain_unserved`): the magics and the CLI add which models it does serve.
"""

from __future__ import annotations

import html
import os
import re
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gatecell.wire.transport.settings import Settings, resolve, root_url

if TYPE_CHECKING:
    from gatecell.wire.transport.errors import APIError
    from gatecell.wire.transport.results import ModelList
    from gatecell.wire.util.secret import Secret

__all__ = [
    "Target",
    "choose",
    "is_local",
    "local_url",
    "quiet",
    "explain_unserved",
    "ENV_LOCAL_URL",
    "NOTICE",
]

# Set by `gatecell lab` for its kernels: the root address of its local gateway, whose key is
# in GATECELL_LOCAL_KEYS. A process that finds it uses that gateway instead of starting one.
ENV_LOCAL_URL = "GATECELL_LOCAL_URL"

NOTICE = (
    "gatecell: no gateway configured, so the local gateway serves offline stand-in models at {url}; "
    "to use yours, set GATECELL_BASE_URL and GATECELL_API_KEY "
    "(in a notebook: %config Gatecell.base_url = '...' and %gatecell key)"
)

_lock = threading.Lock()
_announced = False


@dataclass(frozen=True, repr=False)
class Target(Settings):
    """Where requests go, with the key to send; ``local`` when it is the local gateway."""

    base_url: str
    local: bool = False


def local_url() -> str | None:
    """The local gateway handed down by ``gatecell lab`` (`ENV_LOCAL_URL`), if any."""
    url = os.environ.get(ENV_LOCAL_URL, "").strip()
    return root_url(url) if url else None


def is_local(base_url: str) -> bool:
    """Whether ``base_url`` is the local gateway: the one ``gatecell lab`` handed down
    (`ENV_LOCAL_URL`), or the one embedded in this process."""
    root = root_url(base_url)
    if root == local_url():
        return True
    embedded = sys.modules.get("gatecell.local.embedded")  # not loaded: nothing was started here
    served = embedded.running() if embedded is not None else None
    return served is not None and served.base_url == root


def choose(base_url: str | None = None, api_key: str | Secret | None = None) -> Target:
    """The gateway for these settings: explicit, else the environment, else the local one.

    The local gateway always takes its own key (a key meant for a real gateway would only be
    refused there), and the first choice of it in this process says so on stderr.
    """
    settings = resolve(base_url, api_key)
    if settings.base_url:
        return Target(settings.base_url, settings.api_key, local=is_local(settings.base_url))
    handed_down = local_url()
    if handed_down:
        from gatecell.local.config import keys_from

        keys = keys_from(None)
        target = Target(handed_down, keys[0] if keys else None, local=True)
    else:
        from gatecell.local import embedded

        served = embedded.start()
        target = Target(served.base_url, served.api_key, local=True)
    _announce(target.base_url)
    return target


# Muted by opacity, not by a colour: it then reads as secondary text in any theme.
_NOTICE_HTML = '<div class="gatecell-notice" style="font-size:smaller;opacity:0.7">{}</div>'


def quiet() -> None:
    """Choosing the local gateway says nothing from now on in this process: the caller says
    it its own way (the dashboard's header, for people who never set a gateway up)."""
    global _announced
    with _lock:
        _announced = True


def _announce(url: str) -> None:
    global _announced
    with _lock:
        if _announced:
            return
        _announced = True
    text = NOTICE.format(url=url)
    display = _kernel_display()
    if display is None:
        print(text, file=sys.stderr, flush=True)
    else:
        display({"text/plain": text, "text/html": _NOTICE_HTML.format(html.escape(text))}, raw=True)


def _kernel_display() -> Callable[..., object] | None:
    """IPython's ``display`` when this process is a Jupyter kernel, else None. A kernel has
    IPython loaded already: nothing is imported otherwise (a terminal IPython has no kernel,
    and there stderr is fine)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if getattr(shell, "kernel", None) is None:
        return None
    from IPython.display import display

    return display


def explain_unserved(
    error: APIError, model: str, list_models: Callable[[], ModelList | None], how: str
) -> bool:
    """Add to a 400/404 about ``model`` which models the gateway does serve, and ``how`` to
    choose one, when ``model`` is not among them. True when the error was extended.

    Gateways word "unknown model" in many ways (LiteLLM answers 400 "Invalid model name
    passed in model=..."), so the message only has to name the model; the model list decides.
    It is asked for only then, and ``list_models`` gives None when it cannot be had. The
    error stays one line.
    """
    named = re.search(rf"(?<![\w-]){re.escape(model)}(?![\w-])", error.message or "")
    if error.status not in (400, 404) or not named:
        return False
    models = list_models()
    served = models.suggest(model, error.path) if models is not None else None
    if served is None:
        return False
    extra = f"{served}; {how}"
    error.hint = f"{error.hint}. {extra}" if error.hint else extra
    error.args = (f"{error.args[0]}. {extra}",)
    return True
