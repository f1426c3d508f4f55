"""The notebook's state: its gateway, its conversations and the jobs it started.

The gateway is made on first use, not at ``%load_ext``, by the policy of `gatecell.connect`
that `Gateway()` and the CLI follow too: ``Gatecell.base_url`` or the environment
(``GATECELL_BASE_URL``/``OPENAI_BASE_URL``), with the key from ``%gatecell key`` or the
environment; with no address anywhere, the local gateway (``gatecell lab``'s, or one started
in this process), announced once, so a fresh notebook works offline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .memory import Memory

if TYPE_CHECKING:
    from gatecell.gateway import Gateway
    from gatecell.wire.transport.results import ModelList
    from gatecell.wire.util.secret import Secret

    from .config import Gatecell

__all__ = ["NotebookSession"]


class NotebookSession:
    """gatecell's state in one IPython shell."""

    def __init__(self, config: Gatecell) -> None:
        self.config = config
        self.memory = Memory()
        self.jobs: dict[str, str] = {}  # job id -> kind, for %gatecell job ID
        self.key_source: str | None = None
        self._key: Secret | None = None
        self._gateway: Gateway | None = None
        self._models: ModelList | None = None
        config.observe(lambda _change: self.disconnect(), "base_url")
        config.observe(self._switch, ["log", "log_media", "cache"])

    @property
    def gateway(self) -> Gateway:
        """The client every magic uses; connected on first use."""
        if self._gateway is None:
            from gatecell.gateway import Gateway

            self._gateway = Gateway(
                base_url=self.config.base_url or None,
                api_key=self._key,
                log=self.config.log,
                log_media=self.config.log_media,
                cache=self.config.cache,
            )
        return self._gateway

    def _switch(self, change: Any) -> None:
        """``%config Gatecell.log`` / ``log_media`` / ``cache``: the client follows at once."""
        if self._gateway is not None:
            setattr(self._gateway, change["name"], change["new"])

    @property
    def local(self) -> bool:
        """True when the magics talk to the local gateway (embedded, or ``gatecell lab``'s)."""
        return self._gateway is not None and self._gateway.local

    def served(self) -> ModelList | None:
        """The gateway's model list, asked once per connection; None when it cannot be had."""
        if self._models is None:
            from gatecell.wire.transport.errors import GatecellError

            try:
                self._models = self.gateway.models()
            except GatecellError:  # only ever a hint: the error being explained matters more
                return None
        return self._models

    def set_key(self, key: Secret, source: str = "%gatecell key") -> None:
        """Use ``key`` from now on (it lives in this process only, never in the notebook)."""
        self._key = key
        self.key_source = source
        self.disconnect()

    def disconnect(self) -> None:
        """Close the client; the next magic connects again with the current settings."""
        if self._gateway is not None:
            self._gateway.close()
            self._gateway = None
        self._models = None

    def describe(self) -> dict[str, Any]:
        """Where requests go and whether a key is set, without showing any part of it."""
        from gatecell.connect import local_url
        from gatecell.wire.transport.settings import resolve

        settings = resolve(self.config.base_url or None, self._key)
        handed_down = local_url()
        gateway = self._gateway
        if gateway is not None and gateway.located:
            url = gateway.base_url + (" (local gateway)" if gateway.local else "")
        elif settings.base_url:
            url = settings.base_url + (" (local gateway)" if settings.base_url == handed_down else "")
        elif handed_down:
            url = f"{handed_down} (local gateway of gatecell lab)"
        else:
            url = "local gateway (started on first use)"
        if not settings.base_url:
            key = "the local gateway's own"
        elif self._key is not None:
            key = f"set ({self.key_source})"
        elif settings.api_key is not None:
            key = "set (environment)"
        else:
            key = "not set"
        return {"gateway": url, "api key": key}
