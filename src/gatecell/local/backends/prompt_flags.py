"""Inline ``--flag value`` options of a job-style image prompt (``--ar 16:9 --seed 42``).

The flags are taken out of the prompt before drawing; the aspect ratio decides the size.
"""

from __future__ import annotations

import math
import re

__all__ = ["parse", "size_for", "LONG_SIDE"]

LONG_SIDE = 768
_FLAG = re.compile(r"(?:^|\s)--([A-Za-z][\w-]*)(?:\s+(?!--)([^\s]+))?")
_RATIO = re.compile(r"^(\d{1,3}):(\d{1,3})$")


def parse(prompt: str) -> tuple[str, dict[str, str]]:
    """(prompt without its flags, {flag: value}); a flag without a value maps to ``""``."""
    flags = {name.lower(): value or "" for name, value in _FLAG.findall(prompt)}
    clean = " ".join(_FLAG.sub(" ", prompt).split())
    if "aspect" in flags and "ar" not in flags:
        flags["ar"] = flags.pop("aspect")
    if "seed" in flags and not re.fullmatch(r"\d{1,10}", flags["seed"]):
        raise ValueError(f"--seed must be a whole number, got {flags['seed']!r}")
    return clean, flags


def size_for(flags: dict[str, str]) -> tuple[int, int]:
    """Width and height for ``--ar W:H`` (1:1 when absent), the long side `LONG_SIDE` pixels."""
    ratio = flags.get("ar", "1:1")
    match = _RATIO.match(ratio)
    if not match or not int(match.group(1)) or not int(match.group(2)):
        raise ValueError(f"--ar must look like W:H (e.g. 16:9), got {ratio!r}")
    w, h = int(match.group(1)), int(match.group(2))
    if max(w, h) / min(w, h) > 8:
        raise ValueError(f"--ar {ratio} is too extreme; keep it within 8:1")
    scale = LONG_SIDE / max(w, h)
    return max(64, math.floor(w * scale / 8) * 8), max(64, math.floor(h * scale / 8) * 8)
