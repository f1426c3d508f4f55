"""Offline image generation: a PNG drawn from the prompt, the stand-in for an image model.

The picture is a pure function of the prompt: a two-colour gradient, a handful of translucent
shapes and the prompt itself as a caption, all chosen from a SHA-256 seed. `draw()` takes a
`phase` so the video renderer animates the very same picture instead of drawing its own.
"""

from __future__ import annotations

import io
import math
import random
import re
import textwrap
import threading
from typing import TYPE_CHECKING

from ._seed import seed
from ._stop import check

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["MIME", "MIN_SIDE", "MAX_SIDE", "render", "draw", "check_size"]

MIME = "image/png"
_WORD = re.compile(r"\S+")
MIN_SIDE = 64
MAX_SIDE = 2048


def check_size(width: int, height: int, *, what: str = "image", high: int = MAX_SIDE) -> None:
    """Raise ValueError naming the allowed range when a side is out of it."""
    for name, side in (("width", width), ("height", height)):
        if not isinstance(side, int) or isinstance(side, bool) or not MIN_SIDE <= side <= high:
            raise ValueError(f"{what} {name} must be an integer from {MIN_SIDE} to {high}, got {side!r}")


def render(prompt: str, width: int, height: int, *, stop: threading.Event | None = None) -> bytes:
    """PNG bytes of exactly `width` x `height` pixels, the same bytes for the same arguments.

    A set `stop` means the job is gone: raise `Stopped` instead of drawing."""
    check_size(width, height)
    check(stop)
    out = io.BytesIO()
    draw(prompt, width, height).save(out, format="PNG", optimize=False, compress_level=6)
    return out.getvalue()


def draw(prompt: str, width: int, height: int, phase: float = 0.0) -> Image.Image:
    """The picture for `prompt` as an RGB image; `phase` (0..1 is one cycle) moves the shapes."""
    from PIL import Image, ImageDraw

    rng = random.Random(seed("image", prompt))
    hue = rng.random()
    canvas = _gradient(width, height, hue, rng.random() * math.tau, phase).convert("RGBA")
    layer = Image.new("RGBA", (width, height))
    pen = ImageDraw.Draw(layer)
    short = min(width, height)
    for _ in range(rng.randint(4, 8)):
        kind = rng.choice(("ellipse", "rectangle", "triangle"))
        radius = short * rng.uniform(0.08, 0.28)
        orbit = short * rng.uniform(0.02, 0.12)
        angle = rng.random() * math.tau + phase * math.tau * rng.choice((-1, 1))
        cx = rng.uniform(0, width) + orbit * math.cos(angle)
        cy = rng.uniform(0, height * 0.75) + orbit * math.sin(angle)
        fill = (*_rgb((hue + rng.uniform(0.15, 0.85)) % 1.0, 0.65, 0.95), rng.randint(110, 190))
        box = (cx - radius, cy - radius, cx + radius, cy + radius)
        if kind == "ellipse":
            pen.ellipse(box, fill=fill)
        elif kind == "rectangle":
            pen.rectangle(box, fill=fill)
        else:
            turn = rng.random() * math.tau + phase * math.tau
            corners = [turn + k * math.tau / 3 for k in range(3)]
            points = [(cx + radius * math.cos(a), cy + radius * math.sin(a)) for a in corners]
            pen.polygon(points, fill=fill)
    _caption(pen, prompt, width, height)
    return Image.alpha_composite(canvas, layer).convert("RGB")


def _gradient(width: int, height: int, hue: float, angle: float, phase: float) -> Image.Image:
    """A diagonal blend between two colours a third of the colour wheel apart."""
    import numpy as np
    from PIL import Image

    drift = 0.05 * math.sin(phase * math.tau)  # the video's background breathes a little
    start = np.array(_rgb((hue + drift) % 1.0, 0.55, 0.55), dtype=np.float32)
    end = np.array(_rgb((hue + 0.33) % 1.0, 0.6, 0.9), dtype=np.float32)
    xs = np.linspace(0.0, math.cos(angle), width, dtype=np.float32)
    ys = np.linspace(0.0, math.sin(angle), height, dtype=np.float32)
    t = ys[:, None] + xs[None, :]
    t = (t - t.min()) / max(float(t.max() - t.min()), 1e-6)
    pixels = start + (end - start) * t[..., None]
    return Image.fromarray(pixels.round().astype(np.uint8), "RGB")


def _caption(pen, prompt: str, width: int, height: int) -> None:
    """The prompt, wrapped on a dark band along the bottom, so the picture says what it is."""
    from PIL import ImageFont

    size = max(10, min(width, height) // 16)
    font = ImageFont.load_default(size=size)
    per_line = max(8, int(width * 0.9 / max(font.getlength("abcdefghij") / 10, 1)))
    max_lines = max(1, int(height * 0.3 / (size * 1.25)))
    text = _leading_words(prompt, 2 * per_line * (max_lines + 1)) or "(empty prompt)"
    lines = textwrap.wrap(text, per_line, max_lines=max_lines, placeholder=" …")
    line_height = round(size * 1.25)
    top = height - line_height * len(lines) - size // 2
    pen.rectangle((0, top - size // 4, width, height), fill=(0, 0, 0, 150))
    for i, line in enumerate(lines):
        pen.text((width * 0.05, top + i * line_height), line, font=font, fill=(255, 255, 255, 255))


def _leading_words(text: str, budget: int) -> str:
    """The first words of `text`, single-spaced, up to about `budget` characters: only what a
    caption can show is wrapped, so a long prompt costs no more than a short one, frame after frame."""
    words: list[str] = []
    for match in _WORD.finditer(text):
        words.append(match.group())
        budget -= len(words[-1]) + 1
        if budget < 0:
            break
    return " ".join(words)


def _rgb(hue: float, saturation: float, value: float) -> tuple[int, int, int]:
    import colorsys

    red, green, blue = colorsys.hsv_to_rgb(hue, saturation, value)
    return round(red * 255), round(green * 255), round(blue * 255)
