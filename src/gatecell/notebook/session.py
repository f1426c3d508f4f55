"""The notebook's state: its gateway, its conversations and the jobs it started.

The gateway is made on first use, not at ``%load_ext``: from ``Gatecell.base_url`` or the
environment (``GATECELL_BASE_URL``/``OPENAI_BASE_URL``), with the key from ``%gatecell key``
or the environment. When no address is configured anywhere, the embedded local gateway is
started (once per process) and one line says so, so a fresh notebook works offline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .memory import Memory

if TYPE_CHECKING:
    from gatecell.wire.client import Gateway
    from gatecell.wire.secret import Secret

    from .config import Gatecell

__all__ = ["NotebookSession", "LOCAL_NOTICE"]

LOCAL_NOTICE = (
    "gatecell: no gateway configured, so the local gateway is serving offline models at {url}; "
    "to use a real gateway set GATECELL_BASE_URL and GATECELL_API_KEY "
    "(or %config Gatecell.base_url = '...' and %gatecell key)."
)


class NotebookSession:
    """gatecell's state in one IPython shell."""

    def __init__(self, config: Gatecell) -> None:
        self.config = config
        self.memory = Memory()
        self.jobs: dict[str, str] = {}  # job id -> kind, for %gatecell job ID
        self.key_source: str | None = None
        self._key: Secret | None = None
        self._gateway: Gateway | None = None
        self._local_url: str | None = None
        config.observe(lambda _change: self.disconnect(), "base_url")

    @property
    def gateway(self) -> Gateway:
        """The client every magic uses; connected on first use."""
        if self._gateway is None:
            self._gateway = self._connect()
        return self._gateway

    @property
    def local(self) -> bool:
        """True when the magics talk to the embedded local gateway."""
        return self._gateway is not None and self._local_url == self._gateway.base_url

    def _connect(self) -> Gateway:
        from gatecell.wire.client import Gateway
        from gatecell.wire.settings import resolve

        settings = resolve(self.config.base_url or None, self._key)
        if settings.base_url:
            return Gateway(base_url=settings.base_url, api_key=settings.api_key)
        from gatecell.local import embedded

        served = embedded.start()
        self._local_url = served.base_url
        print(LOCAL_NOTICE.format(url=served.base_url), flush=True)
        return Gateway(base_url=served.base_url, api_key=served.api_key)

    def set_key(self, key: Secret, source: str = "%gatecell key") -> None:
        """Use ``key`` from now on (it lives in this process only, never in the notebook)."""
        self._key = key
        self.key_source = source
        self.disconnect()

    def has_key(self) -> bool:
        from gatecell.wire.settings import resolve

        return self._key is not None or resolve().api_key is not None

    def disconnect(self) -> None:
        """Close the client; the next magic connects again with the current settings."""
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None

    def describe(self) -> dict[str, Any]:
        """Where requests go and whether a key is set, without showing any part of it."""
        from gatecell.wire.settings import resolve

        settings = resolve(self.config.base_url or None, self._key)
        if self._key is not None:
            key = f"set ({self.key_source})"
        elif settings.api_key is not None:
            key = "set (environment)"
        elif self.local:
            key = "the local gateway's own"
        else:
            key = "not set"
        url = settings.base_url or "local gateway (started on first use)"
        if self._gateway is not None:
            url = self._gateway.base_url + (" (local gateway)" if self.local else "")
        return {"gateway": url, "api key": key}
