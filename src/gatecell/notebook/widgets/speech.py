"""The speech panel: text in, an audio player out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from ._base import Panel, button, latency_text, media_widget, prompt_box

if TYPE_CHECKING:
    from gatecell.gateway import AsyncGateway, Gateway

__all__ = ["SpeechPanel"]

VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse")
"""Common voice names, offered when the gateway lists none for the model."""
VOICE_KEYS = ("voices", "supported_voices")
"""Where a /v1/models entry may list its voices."""


class SpeechPanel(Panel):
    """Speak text with a model and voice; ``speak(text)`` does what the button does and
    ``audio`` holds the last Audio (``.data``, ``.format``, ``.save(path)``)."""

    kind = "speech"
    name = "speech"

    def __init__(
        self,
        gateway: Gateway | AsyncGateway | None = None,
        *,
        models: Sequence[Any] | None = None,
        model: str | None = None,
        voice: str = "alloy",
    ) -> None:
        super().__init__(gateway, models=models, model=model)
        self.voice = widgets.Combobox(value=voice, description="Voice", ensure_option=False)
        self.voice.add_class("gatecell-voice")
        self.offer(self.voice, VOICE_KEYS, VOICES)
        self.text = prompt_box("Text to speak")
        self.speak_button = button("Speak", "gatecell-speak", self.speak, primary=True)
        self.player = widgets.Box().add_class("gatecell-player")
        self.children = (
            widgets.HBox([self.model, self.voice]),
            self.text,
            self.speak_button,
            self.status,
            self.player,
        )
        self.audio: Any = None

    def speak(self, text: str | None = None) -> None:
        text = self.text.value if text is None else text
        voice = self.voice.value.strip()
        if not self.model.value:
            return self.show_error("no model to ask: the gateway listed no speech model")
        if not voice:
            return self.show_error("choose a voice")
        if not text.strip():
            return self.show_error("the text is empty")
        model = self.model.value

        def work() -> None:
            audio = self.gateway.speech(model, voice, text)
            self.audio = audio
            self.player.children = (media_widget(audio),)
            self.show_info(f"{model} · {voice} · {len(audio.data):,} bytes · {latency_text(audio)}")

        self.in_background(work, self.speak_button, f"{model} is speaking…")
