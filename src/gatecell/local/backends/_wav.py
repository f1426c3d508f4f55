"""WAV framing for the audio renderers, which all produce 16-bit mono PCM."""

from __future__ import annotations

import io
import wave

__all__ = ["wav"]


def wav(pcm: bytes, rate: int) -> bytes:
    """A RIFF/WAVE file around 16-bit little-endian mono `pcm` at `rate` Hz."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return out.getvalue()
