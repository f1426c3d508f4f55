"""Defaults of the magics, settable the IPython way and from the environment.

``%config Gatecell.model = "gpt-4o"`` or ``c.Gatecell.model = "gpt-4o"`` in
``ipython_config.py`` win; otherwise a ``GATECELL_*`` variable; otherwise the model ids
the embedded local gateway serves, so a fresh notebook works offline.

The API key is deliberately not a trait: config is printed by ``%config`` and saved in
profiles. Use ``%gatecell key`` or ``GATECELL_API_KEY``.
"""

from __future__ import annotations

import os
from typing import Any

from traitlets import Bool, CaselessStrEnum, Dict, Float, Int, Unicode, Union, default
from traitlets.config import Configurable

from gatecell.wire.transport.settings import env_flag, env_number

__all__ = ["Gatecell", "ENV"]

# trait name -> (environment variable, built-in default)
ENV: dict[str, tuple[str, Any]] = {
    "base_url": ("GATECELL_BASE_URL", ""),
    "model": ("GATECELL_MODEL", "local-chat"),
    "reasoning_model": ("GATECELL_REASONING_MODEL", "local-reasoner"),
    "image_model": ("GATECELL_IMAGE_MODEL", "local-image"),
    "tts_model": ("GATECELL_TTS_MODEL", "local-tts"),
    "voice": ("GATECELL_VOICE", "alloy"),
    "video_model": ("GATECELL_VIDEO_MODEL", "local-video"),
    "music_style": ("GATECELL_MUSIC_STYLE", ""),
    "image_size": ("GATECELL_IMAGE_SIZE", ""),
    "system": ("GATECELL_SYSTEM", ""),
    "api": ("GATECELL_API", "chat"),
    "footer": ("GATECELL_FOOTER", False),
    "debug": ("GATECELL_DEBUG", False),
    "output": ("GATECELL_OUTPUT", "auto"),
    "update_interval": ("GATECELL_UPDATE_INTERVAL", 0.1),
    "video_embed_limit": ("GATECELL_VIDEO_EMBED_LIMIT", 20_000_000),
    "media_dir": ("GATECELL_MEDIA_DIR", "gatecell-media"),
    "job_timeout": ("GATECELL_JOB_TIMEOUT", 600.0),
    "context_rows": ("GATECELL_CONTEXT_ROWS", 5),
    "context_chars": ("GATECELL_CONTEXT_CHARS", 4000),
    "log": ("GATECELL_LOG", True),
    "log_media": ("GATECELL_LOG_MEDIA", False),
    "cache": ("GATECELL_CACHE", False),
    "prices": ("GATECELL_PRICES", ""),
    "approve_tools": ("GATECELL_APPROVE_TOOLS", True),
}


def _from_env(name: str) -> Any:
    """The trait's variable, read by the wire's parsers: a malformed one is a ConfigError."""
    var, fallback = ENV[name]
    if isinstance(fallback, bool):
        return env_flag(None, var, fallback)
    if isinstance(fallback, (int, float)):
        return env_number(None, var, fallback)
    return os.environ.get(var) or fallback


class Gatecell(Configurable):
    """Defaults for gatecell's magics (``%config Gatecell`` lists them)."""

    base_url = Unicode(
        help="Gateway root address; empty: GATECELL_BASE_URL/OPENAI_BASE_URL, else the local gateway."
    ).tag(config=True)
    model = Unicode(help="Chat model of %%chat.").tag(config=True)
    reasoning_model = Unicode(help="Model of %%reason.").tag(config=True)
    image_model = Unicode(help="Model of %%image.").tag(config=True)
    tts_model = Unicode(help="Model of %%speak.").tag(config=True)
    voice = Unicode(help="Voice of %%speak.").tag(config=True)
    video_model = Unicode(help="Model of %%video.").tag(config=True)
    music_style = Unicode(help="Default style of %%music (empty: none).").tag(config=True)
    image_size = Unicode(help="Default size of %%image, WIDTHxHEIGHT (empty: the gateway's).").tag(
        config=True
    )
    system = Unicode(help="System prompt of new conversations (empty: none).").tag(config=True)
    api = CaselessStrEnum(
        ["chat", "messages", "generate-content", "responses"], help="Wire format of %%chat."
    ).tag(config=True)
    footer = Bool(help="Show a one-line provenance footer under every output.").tag(config=True)
    debug = Bool(help="Show full tracebacks instead of one-line errors.").tag(config=True)
    output = CaselessStrEnum(
        ["auto", "rich", "text"], help="rich: live displays; text: plain stdout; auto: rich in a kernel."
    ).tag(config=True)
    update_interval = Float(help="Minimum seconds between two live updates of a streaming reply.").tag(
        config=True
    )
    video_embed_limit = Int(
        help="Videos up to this many bytes are embedded; larger ones are saved to media_dir."
    ).tag(config=True)
    media_dir = Unicode(help="Folder for media too large to embed.").tag(config=True)
    job_timeout = Float(help="Seconds a job-style magic waits before giving up.").tag(config=True)
    context_rows = Int(
        min=1, help="Rows of a DataFrame (and edge items of an array) that {name} puts in a prompt."
    ).tag(config=True)
    context_chars = Int(
        min=100, help="Characters at most of one value, cell or error put in a prompt; the rest is counted."
    ).tag(config=True)
    log = Bool(help="Log every exchange in GATECELL_HOME/gatecell.db (magics and panels).").tag(config=True)
    log_media = Bool(help="Keep the bytes of media replies in the log too (else type, size, hash).").tag(
        config=True
    )
    cache = Bool(help="Answer a request identical to a logged one from the log (no request sent).").tag(
        config=True
    )
    approve_tools = Bool(
        help="Ask before each tool call of %%chat --tools runs (tools marked safe=True are not asked about)."
    ).tag(config=True)
    prices = Union(
        [Unicode(), Dict()],
        help="Prices for %gatecell usage: a TOML or JSON file, or {model: {'input': $, 'output': $}} "
        "per million tokens (empty: GATECELL_PRICES).",
    ).tag(config=True)

    # every default reads its environment variable when first needed (not at import)
    for _name in ENV:
        vars()[f"_default_{_name}"] = default(_name)(lambda self, _n=_name: _from_env(_n))
    del _name

    def summary(self) -> dict[str, Any]:
        """Every trait and its current value, for ``%gatecell config``."""
        return {name: getattr(self, name) for name in ENV}
