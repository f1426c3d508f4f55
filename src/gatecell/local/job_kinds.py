"""What each job kind renders, from the job's record alone.

A job starts from its record, and starts again from it after a restart, when the record on
disk is all there is: so the endpoints put every parameter of the render in the record's
``meta`` (already checked), and this is the one place that turns a record into a render.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["renderer"]

Render = Callable[..., bytes]  # render(stop=threading.Event) -> the file's bytes


def renderer(kind: str, prompt: str, meta: Mapping[str, Any]) -> tuple[Render, str, str]:
    """``(render, mime, extension)`` of a job of ``kind`` from its record's ``prompt`` and
    ``meta``; ValueError when the record cannot say."""
    try:
        if kind == "video":
            from .backends import video

            width, height = (int(side) for side in str(meta["size"]).split("x"))
            render = functools.partial(video.render, prompt, float(meta["seconds"]), width, height)
            return render, "video/mp4", "mp4"
        if kind == "imagine":
            from .backends import image

            width, height = int(meta["width"]), int(meta["height"])
            return functools.partial(image.render, str(meta["clean"]), width, height), "image/png", "png"
        if kind == "music":
            from .backends import music

            style = meta["style"]
            render = functools.partial(
                music.synthesize, prompt, None if style is None else str(style), float(meta["seconds"])
            )
            return render, "audio/wav", "wav"
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"its record lacks what it renders from ({type(exc).__name__}: {exc})") from None
    raise ValueError(f"no local renderer for jobs of kind {kind!r}")
