"""Offline music generation: a synthesized WAV clip, the stand-in for a music model.

`style` picks a recipe (tempo, scale, timbre, rhythm) by the first word in it that names one
(or a common synonym: "techno", "lo-fi", "metal"...); the prompt seeds the chords and melody
inside it. A style that names none gets a blend of two recipes chosen by its own hash, so every
style string sounds like itself and the same arguments give the same bytes.
"""

from __future__ import annotations

import random
import re
import threading
from typing import NamedTuple

from ._seed import seed
from ._stop import check
from ._wav import wav

__all__ = ["MIME", "RATE", "STYLES", "MAX_SECONDS", "Style", "style_for", "synthesize"]

MIME = "audio/wav"
RATE = 22050
MAX_SECONDS = 60.0


class Style(NamedTuple):
    """A recipe for the synthesizer; the prompt only chooses notes within it."""

    tempo: float  # beats per minute
    scale: tuple[int, ...]  # semitones above the root
    root: int  # MIDI note
    harmonics: tuple[float, ...]  # amplitudes of the lead voice's partials: its timbre
    decay: float  # seconds for a lead note to fall to 1/e
    density: int  # lead notes per beat
    drums: float  # 0 (none) .. 1
    swing: float  # 0 (straight) .. 1


_MAJOR = (0, 2, 4, 5, 7, 9, 11)
_MINOR = (0, 2, 3, 5, 7, 8, 10)
_DORIAN = (0, 2, 3, 5, 7, 9, 10)
_PENTATONIC = (0, 3, 5, 7, 10)

STYLES: dict[str, Style] = {
    "ambient": Style(66, _MAJOR, 57, (1.0, 0.2), 2.5, 1, 0.0, 0.0),
    "classical": Style(96, _MAJOR, 60, (1.0, 0.5, 0.25, 0.12), 0.7, 2, 0.0, 0.0),
    "jazz": Style(128, _DORIAN, 55, (1.0, 0.35, 0.2, 0.05), 0.45, 2, 0.45, 0.6),
    "lofi": Style(78, _MINOR, 53, (1.0, 0.3, 0.1), 0.6, 2, 0.6, 0.35),
    "rock": Style(132, _PENTATONIC, 52, (1.0, 0.8, 0.7, 0.6, 0.5, 0.45, 0.4), 0.3, 2, 1.0, 0.0),
    "electronic": Style(126, _MINOR, 57, tuple(1 / k for k in range(1, 16)), 0.18, 4, 0.9, 0.0),
}
_SYNONYMS = {
    "calm": "ambient",
    "drone": "ambient",
    "orchestral": "classical",
    "piano": "classical",
    "blues": "jazz",
    "swing": "jazz",
    "lo-fi": "lofi",
    "chill": "lofi",
    "metal": "rock",
    "punk": "rock",
    "edm": "electronic",
    "techno": "electronic",
    "house": "electronic",
    "synth": "electronic",
    "synthwave": "electronic",
}


def synthesize(
    prompt: str, style: str | None, seconds: float = 4.0, *, stop: threading.Event | None = None
) -> bytes:
    """WAV bytes (22.05 kHz, 16-bit mono) of `seconds` of music in `style`, seeded by `prompt`.

    `style` None (or naming no recipe) still gives a fixed recipe, see `style_for`. Setting
    `stop` makes it raise `Stopped` before the next note.
    """
    if not 0 < seconds <= MAX_SECONDS:
        raise ValueError(f"music seconds must be above 0 and at most {MAX_SECONDS:g}, got {seconds!r}")
    import numpy as np

    recipe = style_for(style)
    rng = random.Random(seed("music", prompt, style))
    total = round(seconds * RATE)
    mix = np.zeros(total, dtype=np.float64)
    beat = 60.0 / recipe.tempo
    chords = [rng.choice((0, 3, 4, 5)) for _ in range(4)]  # scale degrees of a four-bar loop
    degree = 0
    step = beat / recipe.density
    for index in range(int(seconds / step) + 1):
        check(stop)
        start = index * step + (step * recipe.swing / 3 if index % 2 else 0.0)
        bar_chord = chords[int(start / (4 * beat)) % 4]
        if index % (4 * recipe.density) == 0:
            for offset in (0, 2, 4):  # the bar's chord, an octave down, as a pad
                pad = _pitch(recipe, bar_chord + offset, -12)
                _add(mix, start, 4 * beat, pad, 0.12, (1.0, 0.3), decay=4 * beat, attack=0.2)
        if rng.random() < 0.8:  # a melody note, or a rest
            degree = max(-3, min(9, degree + rng.choice((-2, -1, -1, 0, 1, 1, 2, 3))))
            note = _pitch(recipe, bar_chord + degree, 0)
            _add(mix, start, 2 * step, note, 0.28, recipe.harmonics, decay=recipe.decay)
        if recipe.drums and index % recipe.density == 0:
            _drum(mix, start, index // recipe.density, recipe.drums, rng)
    mix *= 0.9 / max(float(np.max(np.abs(mix))), 1e-9)
    fade = min(total, RATE // 20)
    mix[-fade:] *= np.linspace(1.0, 0.0, fade)
    return wav((mix * 32767).astype("<i2").tobytes(), RATE)


def style_for(style: str | None) -> Style:
    """The recipe a style string names, or a blend of two recipes picked by its hash."""
    words = re.findall(r"[a-z]+(?:-[a-z]+)*", (style or "").lower())
    for word in words:
        name = _SYNONYMS.get(word, word)
        if name in STYLES:
            return STYLES[name]
    rng = random.Random(seed("style", " ".join(words)))
    first, second = rng.sample(sorted(STYLES), 2)
    a, b, w = STYLES[first], STYLES[second], rng.uniform(0.3, 0.7)
    return Style(
        tempo=a.tempo * w + b.tempo * (1 - w),
        scale=a.scale,
        root=round(a.root * w + b.root * (1 - w)),
        harmonics=b.harmonics,
        decay=a.decay * w + b.decay * (1 - w),
        density=rng.choice((a.density, b.density)),
        drums=a.drums * w + b.drums * (1 - w),
        swing=b.swing,
    )


def _pitch(recipe: Style, degree: int, shift: int) -> float:
    octave, index = divmod(degree, len(recipe.scale))
    midi = recipe.root + shift + 12 * octave + recipe.scale[index]
    return 440.0 * 2 ** ((midi - 69) / 12)


def _add(
    mix,
    start: float,
    length: float,
    freq: float,
    amp: float,
    harmonics,
    *,
    decay: float,
    attack: float = 0.005,
) -> None:
    """Mix in one note: additive harmonics under an attack/exponential-decay envelope."""
    import numpy as np

    first = int(start * RATE)
    count = min(int(length * RATE), len(mix) - first)
    if count <= 0:
        return
    t = np.arange(count) / RATE
    partials = [(k, h) for k, h in enumerate(harmonics, 1) if freq * k < RATE / 2]  # no aliasing
    tone = sum(h * np.sin(2 * np.pi * freq * k * t) for k, h in partials)
    envelope = np.minimum(t / attack, 1.0) * np.exp(-t / decay)
    mix[first : first + count] += amp * envelope * tone


def _drum(mix, start: float, beat: int, level: float, rng: random.Random) -> None:
    """Kick on beats 1 and 3, snare on 2 and 4, a hi-hat on every beat."""
    import numpy as np

    first = int(start * RATE)
    count = min(int(0.25 * RATE), len(mix) - first)
    if count <= 0:
        return
    t = np.arange(count) / RATE
    noise = np.random.default_rng(rng.getrandbits(32)).uniform(-1, 1, count)
    if beat % 2 == 0:
        hit = np.sin(2 * np.pi * (50 * t + 60 * (1 - np.exp(-t * 30)) / 30)) * np.exp(-t * 12)
    else:
        hit = 0.6 * noise * np.exp(-t * 18) + 0.3 * np.sin(2 * np.pi * 190 * t) * np.exp(-t * 20)
    hat = 0.15 * np.diff(noise, prepend=0.0) * np.exp(-t * 60)
    mix[first : first + count] += level * 0.5 * (hit + hat)
